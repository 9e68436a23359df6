// The XRC control requests: ibv_open_xrcd / ibv_close_xrcd, ibv_create_srq_ex with an XRC SRQ,
// ibv_create_qp_ex with an XRC INI or TGT QP. Decoded here, carried out by Device (xrc.cc).
#include <cerrno>
#include <cstring>

#include "simnic/core/control_dispatch.h"
#include "simnic/core/control_reply.h"

namespace simnic::core {

using namespace simnic::abi;
using namespace simnic::core::control;

namespace {

uint32_t offset_in(const ShmRegion& mem, const void* p) {
  return uint32_t(static_cast<const uint8_t*>(p) - static_cast<const uint8_t*>(mem.addr));
}

ControlReply create_xrc_qp(Device& dev, Context* ctx, std::span<const uint8_t> body) {
  CreateXrcQpReq req;
  if (!decode(body, &req)) return fail(EINVAL);
  // Checked before the cast: only the two XRC types reach the enum.
  if (req.qp.qp_type != IBV_QPT_XRC_SEND && req.qp.qp_type != IBV_QPT_XRC_RECV) return fail(EINVAL);
  ibv_qp_init_attr init{};
  init.qp_type = ibv_qp_type(req.qp.qp_type);
  init.sq_sig_all = int(req.qp.sq_sig_all);
  init.cap = req.qp.cap;
  Qp* qp = nullptr;
  if (int e = dev.create_xrc_qp(ctx, init, req.qp.pd, req.qp.send_cq, req.xrcd, &qp)) return fail(e);
  CreateQpReply rep{};
  rep.handle = qp->handle;
  rep.qp_num = qp->qpn;
  rep.cap = qp->cap;
  rep.sq_entries = qp->sq_entries;
  rep.rq_entries = 0;
  rep.sq_offset = offset_in(qp->mem, qp->sq);
  rep.rq_offset = offset_in(qp->mem, qp->rq);
  rep.mem_bytes = qp->mem.size;
  return ok(rep, qp->mem);
}

}  // namespace

ControlReply ControlDispatcher::handle_xrc_op(Context* ctx, Op op, std::span<const uint8_t> body,
                                              std::vector<int>& fds) {
  switch (op) {
    case Op::OpenXrcd: {
      OpenXrcdReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      uint64_t dev = 0, ino = 0;
      if (req.has_file) {
        if (fds.empty() || fds[0] < 0) return fail(EBADF);
        if (!hooks_.file_identity) return fail(EOPNOTSUPP);
        if (int e = hooks_.file_identity(fds[0], &dev, &ino)) return fail(e);
      }
      HandleReply rep{};
      if (int e = dev_.open_xrcd(ctx, req.has_file != 0, dev, ino, req.oflags, &rep.handle)) return fail(e);
      return ok(rep);
    }
    case Op::CloseXrcd: {
      HandleReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      return fail(dev_.close_xrcd(ctx, req.handle));
    }
    case Op::CreateXrcSrq: {
      CreateXrcSrqReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      Srq* srq = nullptr;
      if (int e = dev_.create_xrc_srq(ctx, req.pd, req.xrcd, req.cq, req.attr, &srq)) return fail(e);
      CreateXrcSrqReply rep{};
      rep.srq = {srq->handle, srq->entries, srq->attr, offset_in(srq->mem, srq->slots), 0, srq->mem.size};
      rep.srq_num = srq->srqn;
      return ok(rep, srq->mem);
    }
    case Op::CreateXrcQp:
      return create_xrc_qp(dev_, ctx, body);
    case Op::OpenXrcQp: {
      OpenXrcQpReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      Qp* qp = nullptr;
      CreateQpReply rep{};
      if (int e = dev_.open_xrc_qp(ctx, req.xrcd, req.qp_num, &rep.handle, &qp)) return fail(e);
      rep.qp_num = qp->qpn;
      rep.cap = qp->cap;
      return ok(rep);
    }
    default:
      return fail(EOPNOTSUPP);
  }
}

}  // namespace simnic::core
