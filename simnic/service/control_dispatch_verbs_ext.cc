// Handlers of issue 17's verbs (control_ops.h): rereg MR, the NIC clock, device memory, ODP
// advice, and sharing a context's PDs and MRs with another process (ibv_import_device/pd/mr).
// The requests are decoded into the core's own arguments (core/memory/mr_verbs.h).
#include <cerrno>

#include "simnic/service/control_ops.h"

namespace simnic::service::control {

using namespace simnic::abi;
using namespace simnic::core;

// The limits the shim reads from abi/control.h are the NIC's own.
static_assert(DmLimits::kMaxDmSize == abi::kMaxDmSize, "the shim's max_dm_size is the NIC's");
static_assert(core::kMaxAdviseSge == abi::kMaxAdviseSge, "one AdviseMr request holds what the NIC takes");

ControlReply rereg_mr(Request& r, const ReregMrReq& q) {
  Mr* mr = nullptr;
  if (int e = r.dev.memory_verbs().rereg_mr(r.ctx, MrRereg{q.mr, q.flags, q.pd, q.access, q.addr, q.length}, &mr))
    return fail(e);
  return ok(RegMrReply{mr->handle, mr->lkey, mr->rkey, 0});
}

ControlReply query_clock(Request& r) { return ok(QueryClockReply{r.dev.now()}); }

ControlReply alloc_dm(Request& r, const AllocDmReq& q) {
  if (q.comp_mask) return fail(EINVAL);  // no ibv_alloc_dm_attr extension is known
  Dm* dm = nullptr;
  if (int e = r.dev.memory_verbs().alloc_dm(r.ctx, q.length, q.log_align_req, &dm)) return fail(e);
  return ok(AllocDmReply{dm->handle, 0, dm->mem.size}, dm->mem);
}

ControlReply reg_dm_mr(Request& r, const RegDmMrReq& q) {
  Mr* mr = nullptr;
  if (int e =
          r.dev.memory_verbs().reg_dm_mr(r.ctx, DmMrReg{q.pd, q.dm, q.dm_offset, q.length, q.access, q.mapped_at}, &mr))
    return fail(e);
  return ok(RegMrReply{mr->handle, mr->lkey, mr->rkey, 0});
}

// q.sge holds kMaxAdviseSge SGEs; the NIC checks num_sge against that before it reads one.
ControlReply advise_mr(Request& r, const AdviseMrReq& q) {
  return fail(r.dev.memory_verbs().advise_mr(r.ctx, q.pd, q.advice, q.flags, q.sge, q.num_sge));
}

ControlReply import_pd(Request& r, const HandleReq& q) {
  if (int e = r.dev.context_verbs().import_pd(r.ctx, q.handle)) return fail(e);
  return ok(HandleReply{q.handle, 0});
}

ControlReply import_mr(Request& r, const HandleReq& q) {
  Mr* mr = nullptr;
  if (int e = r.dev.context_verbs().import_mr(r.ctx, q.handle, &mr)) return fail(e);
  return ok(ImportMrReply{mr->handle, mr->pd->handle, mr->lkey, mr->rkey, mr->iova, mr->length, mr->access,
                          r.dev.memory_verbs().is_dm_mr(mr->handle) ? 1u : 0u});
}

// fds[0] is another context's command socket (ibv_import_device); the I/O layer tells whether
// it is the very socket that context's process holds (kcmp).
ControlReply join_context(Request& r) {
  if (r.fds.size() != 1 || r.fds[0] < 0) return fail(EINVAL);
  if (!r.hooks.same_file) return fail(EOPNOTSUPP);
  const int fd = r.fds[0];
  return fail(r.dev.context_verbs().join_context(r.ctx, [&](pid_t pid, int their_fd) {
    return r.hooks.same_file(pid, their_fd, fd);
  }));
}

}  // namespace simnic::service::control
