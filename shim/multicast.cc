// ibv_attach_mcast / ibv_detach_mcast: a UD QP joins or leaves a multicast group. simnicd does
// the work (and the checks, with the kernel's errnos); see docs/architecture.md, "Multicast".
#include "shim/shim.h"

using namespace simnic::shim;
using namespace simnic::abi;

namespace {

int mcast_rpc(Op op, const char* verb, ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  if (!qp || !gid) return fail_errno(EINVAL);
  McastReq req{};
  req.qp = qp->handle;
  req.lid = lid;
  req.gid = *gid;
  int st = rpc_status(to_shim(qp->context), op, req);
  if (st) explain_refusal(verb, st, last_refusal());
  return fail_errno(st);
}

}  // namespace

extern "C" {

int ibv_attach_mcast(struct ibv_qp* qp, const union ibv_gid* gid, uint16_t lid) {
  return mcast_rpc(Op::AttachMcast, "ibv_attach_mcast", qp, gid, lid);
}

int ibv_detach_mcast(struct ibv_qp* qp, const union ibv_gid* gid, uint16_t lid) {
  return mcast_rpc(Op::DetachMcast, "ibv_detach_mcast", qp, gid, lid);
}

}  // extern "C"

#include "shim/symver.h"
SIMNIC_DEFAULT_VERSION_1_1(ibv_attach_mcast);
SIMNIC_DEFAULT_VERSION_1_1(ibv_detach_mcast);
