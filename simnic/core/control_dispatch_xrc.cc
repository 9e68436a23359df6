// The XRC control requests: ibv_open_xrcd / ibv_close_xrcd, ibv_create_srq_ex with an XRC SRQ,
// ibv_create_qp_ex with an XRC INI or TGT QP. Decoded here, carried out by Device (xrc.cc).
#include <cerrno>
#include <cstring>

#include "simnic/core/control_dispatch.h"

namespace simnic::core {

using namespace simnic::abi;

namespace {

template <class T>
bool decode_body(std::span<const uint8_t> body, T* out) {
  if (body.size() != sizeof(T)) return false;
  std::memcpy(static_cast<void*>(out), body.data(), sizeof(T));
  return true;
}

template <class T>
ControlReply reply_with(const T& v, ShmRegion* mem = nullptr) {
  ControlReply r;
  r.body.resize(sizeof(T));
  std::memcpy(r.body.data(), &v, sizeof(T));
  if (mem && mem->fd >= 0) {
    r.fds.push_back(mem->fd);
    mem->fd = -1;
  }
  return r;
}

ControlReply status(int e) {
  ControlReply r;
  r.status = e;
  return r;
}

uint32_t offset_in(const ShmRegion& mem, const void* p) {
  return uint32_t(static_cast<const uint8_t*>(p) - static_cast<const uint8_t*>(mem.addr));
}

ControlReply create_xrc_qp(Device& dev, Context* ctx, std::span<const uint8_t> body) {
  CreateXrcQpReq req;
  if (!decode_body(body, &req)) return status(EINVAL);
  // Checked before the cast: only the two XRC types reach the enum.
  if (req.qp.qp_type != IBV_QPT_XRC_SEND && req.qp.qp_type != IBV_QPT_XRC_RECV) return status(EINVAL);
  ibv_qp_init_attr init{};
  init.qp_type = ibv_qp_type(req.qp.qp_type);
  init.sq_sig_all = int(req.qp.sq_sig_all);
  init.cap = req.qp.cap;
  Qp* qp = nullptr;
  if (int e = dev.create_xrc_qp(ctx, init, req.qp.pd, req.qp.send_cq, req.xrcd, &qp)) return status(e);
  CreateQpReply rep{};
  rep.handle = qp->handle;
  rep.qp_num = qp->qpn;
  rep.cap = qp->cap;
  rep.sq_entries = qp->sq_entries;
  rep.rq_entries = 0;
  rep.sq_offset = offset_in(qp->mem, qp->sq);
  rep.rq_offset = offset_in(qp->mem, qp->rq);
  rep.mem_bytes = qp->mem.size;
  return reply_with(rep, &qp->mem);
}

}  // namespace

ControlReply ControlDispatcher::handle_xrc_op(Context* ctx, Op op, std::span<const uint8_t> body,
                                              std::vector<int>& fds) {
  switch (op) {
    case Op::OpenXrcd: {
      OpenXrcdReq req;
      if (!decode_body(body, &req)) return status(EINVAL);
      uint64_t dev = 0, ino = 0;
      if (req.has_file) {
        if (fds.empty() || fds[0] < 0) return status(EBADF);
        if (!hooks_.file_identity) return status(EOPNOTSUPP);
        if (int e = hooks_.file_identity(fds[0], &dev, &ino)) return status(e);
      }
      HandleReply rep{};
      if (int e = dev_.open_xrcd(ctx, req.has_file != 0, dev, ino, req.oflags, &rep.handle)) return status(e);
      return reply_with(rep);
    }
    case Op::CloseXrcd: {
      HandleReq req;
      if (!decode_body(body, &req)) return status(EINVAL);
      return status(dev_.close_xrcd(ctx, req.handle));
    }
    case Op::CreateXrcSrq: {
      CreateXrcSrqReq req;
      if (!decode_body(body, &req)) return status(EINVAL);
      Srq* srq = nullptr;
      if (int e = dev_.create_xrc_srq(ctx, req.pd, req.xrcd, req.cq, req.attr, &srq)) return status(e);
      CreateXrcSrqReply rep{};
      rep.srq = {srq->handle, srq->entries, srq->attr, offset_in(srq->mem, srq->slots), 0, srq->mem.size};
      rep.srq_num = srq->srqn;
      return reply_with(rep, &srq->mem);
    }
    case Op::CreateXrcQp:
      return create_xrc_qp(dev_, ctx, body);
    case Op::OpenXrcQp: {
      OpenXrcQpReq req;
      if (!decode_body(body, &req)) return status(EINVAL);
      Qp* qp = nullptr;
      CreateQpReply rep{};
      if (int e = dev_.open_xrc_qp(ctx, req.xrcd, req.qp_num, &rep.handle, &qp)) return status(e);
      rep.qp_num = qp->qpn;
      rep.cap = qp->cap;
      return reply_with(rep);
    }
    default:
      return status(EOPNOTSUPP);
  }
}

}  // namespace simnic::core
