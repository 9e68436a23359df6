// The XRC control requests: ibv_open_xrcd / ibv_close_xrcd, ibv_create_srq_ex with an XRC SRQ,
// ibv_create_qp_ex with an XRC INI or TGT QP, ibv_open_qp. Decoded here, carried out by Device
// (xrc.cc).
#include <cerrno>
#include <cstring>

#include "simnic/service/control_ops.h"

namespace simnic::service::control {

using namespace simnic::abi;
using namespace simnic::core;

// With a file, simnicd identifies it itself (fstat through the hook), so a program can only
// name a domain whose file it could open.
ControlReply open_xrcd(Request& r, const OpenXrcdReq& q) {
  uint64_t dev = 0, ino = 0;
  if (q.has_file) {
    if (r.fds.empty() || r.fds[0] < 0) return fail(EBADF);
    if (!r.hooks.file_identity) return fail(EOPNOTSUPP);
    if (int e = r.hooks.file_identity(r.fds[0], &dev, &ino)) return fail(e);
  }
  HandleReply rep{};
  if (int e = r.dev.xrc_verbs().open_xrcd(r.ctx, q.has_file != 0, dev, ino, q.oflags, &rep.handle)) return fail(e);
  return ok(rep);
}

ControlReply create_xrc_srq(Request& r, const CreateXrcSrqReq& q) {
  Srq* srq = nullptr;
  if (int e = r.dev.xrc_verbs().create_xrc_srq(r.ctx, q.pd, q.xrcd, q.cq, q.attr, &srq)) return fail(e);
  CreateXrcSrqReply rep{};
  rep.srq = srq_reply(*srq);
  rep.srq_num = srq->srqn;
  return ok(rep, srq->mem);
}

ControlReply create_xrc_qp(Request& r, const CreateXrcQpReq& q) {
  // Checked before the cast: only the two XRC types reach the enum.
  if (q.qp.qp_type != IBV_QPT_XRC_SEND && q.qp.qp_type != IBV_QPT_XRC_RECV) return fail(EINVAL);
  ibv_qp_init_attr init{};
  init.qp_type = ibv_qp_type(q.qp.qp_type);
  init.sq_sig_all = int(q.qp.sq_sig_all);
  init.cap = q.qp.cap;
  Qp* qp = nullptr;
  if (int e = r.dev.xrc_verbs().create_xrc_qp(r.ctx, init, q.qp.pd, q.qp.send_cq, q.xrcd, &qp)) return fail(e);
  CreateQpReply rep = qp_reply(*qp);
  rep.rq_entries = 0;  // no receive queue: an INI QP only sends, a TGT QP receives into SRQs
  return ok(rep, qp->mem);
}

ControlReply open_xrc_qp(Request& r, const OpenXrcQpReq& q) {
  Qp* qp = nullptr;
  CreateQpReply rep{};
  if (int e = r.dev.xrc_verbs().open_xrc_qp(r.ctx, q.xrcd, q.qp_num, &rep.handle, &qp)) return fail(e);
  rep.qp_num = qp->qpn;
  rep.cap = qp->cap;
  return ok(rep);
}

}  // namespace simnic::service::control
