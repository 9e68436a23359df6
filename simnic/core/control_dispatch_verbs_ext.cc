// Handlers of issue 17's verbs (control_ops.h): rereg MR, the NIC clock, device memory, and
// sharing a context's PDs and MRs with another process (ibv_import_device/pd/mr).
#include <cerrno>

#include "simnic/core/control_ops.h"

namespace simnic::core::control {

using namespace simnic::abi;

ControlReply rereg_mr(Request& r, const ReregMrReq& q) {
  Mr* mr = nullptr;
  if (int e = r.dev.rereg_mr(r.ctx, q, &mr)) return fail(e);
  return ok(RegMrReply{mr->handle, mr->lkey, mr->rkey, 0});
}

ControlReply query_clock(Request& r) { return ok(QueryClockReply{r.dev.now()}); }

ControlReply alloc_dm(Request& r, const AllocDmReq& q) {
  if (q.comp_mask) return fail(EINVAL);  // no ibv_alloc_dm_attr extension is known
  Dm* dm = nullptr;
  if (int e = r.dev.alloc_dm(r.ctx, q.length, q.log_align_req, &dm)) return fail(e);
  return ok(AllocDmReply{dm->handle, 0, dm->mem.size}, dm->mem);
}

ControlReply reg_dm_mr(Request& r, const RegDmMrReq& q) {
  Mr* mr = nullptr;
  if (int e = r.dev.reg_dm_mr(r.ctx, q, &mr)) return fail(e);
  return ok(RegMrReply{mr->handle, mr->lkey, mr->rkey, 0});
}

ControlReply advise_mr(Request& r, const AdviseMrReq& q) { return fail(r.dev.advise_mr(r.ctx, q)); }

ControlReply import_pd(Request& r, const HandleReq& q) {
  if (int e = r.dev.import_pd(r.ctx, q.handle)) return fail(e);
  return ok(HandleReply{q.handle, 0});
}

ControlReply import_mr(Request& r, const HandleReq& q) {
  Mr* mr = nullptr;
  if (int e = r.dev.import_mr(r.ctx, q.handle, &mr)) return fail(e);
  return ok(ImportMrReply{mr->handle, mr->pd->handle, mr->lkey, mr->rkey, mr->iova, mr->length, mr->access,
                          r.dev.is_dm_mr(mr->handle) ? 1u : 0u});
}

// fds[0] is another context's command socket (ibv_import_device); the I/O layer tells whether
// it is the very socket that context's process holds (kcmp).
ControlReply join_context(Request& r) {
  if (r.fds.size() != 1 || r.fds[0] < 0) return fail(EINVAL);
  if (!r.hooks.same_file) return fail(EOPNOTSUPP);
  const int fd = r.fds[0];
  return fail(r.dev.join_context(r.ctx, [&](pid_t pid, int their_fd) { return r.hooks.same_file(pid, their_fd, fd); }));
}

}  // namespace simnic::core::control
