// ContextVerbs: one context per control connection (ibv_open_device), its teardown, the handle
// checks of the destroy verbs, and why a QP of the context failed.
#include "simnic/core/objects/contexts.h"
#include "simnic/core/device.h"
#include "simnic/core/objects/qp_state_table.h"
#include "simnic/core/text.h"

#include <algorithm>
#include <cerrno>

namespace simnic::core {

ContextVerbs::ContextVerbs(Device& dev) : dev_(dev) {}

Context* ContextVerbs::open_context(pid_t pid, uid_t uid, int doorbell_fd, int async_fd) {
  const uint32_t id = dev_.next_context_id_++;
  Context* raw = (dev_.contexts_[id] = std::make_unique<Context>(
                      Context{.id = id, .pid = pid, .uid = uid, .doorbell_fd = doorbell_fd, .async_fd = async_fd}))
                     .get();
  dev_.tracer_.event(TraceKind::kCtxOpen).u("ctx", raw->id).u("pid", uint64_t(pid));
  dev_.journal().log(LogLevel::kInfo, "context " + std::to_string(raw->id) + " opened by pid " + std::to_string(pid));
  return raw;
}

void ContextVerbs::close_context(Context* ctx) {
  // Tear down like the kernel does for a dying process: QPs first, PDs last.
  for (auto h : std::vector<uint32_t>(ctx->qps)) {
    if (Qp* qp = dev_.tables().owned(dev_.qps_, ctx, h)) dev_.queue_verbs().detach_all_mcast(*qp);
    dev_.queue_verbs().destroy_qp(ctx, h);
  }
  for (auto h : std::vector<uint32_t>(ctx->ahs)) dev_.memory_verbs().destroy_ah(ctx, h);
  for (auto h : std::vector<uint32_t>(ctx->srqs)) dev_.queue_verbs().destroy_srq(ctx, h);
  for (auto h : std::vector<uint32_t>(ctx->cqs)) dev_.queue_verbs().destroy_cq(ctx, h);
  dev_.xrc_verbs().close_xrcds(ctx);  // after its XRC SRQs and TGT QPs
  for (auto h : std::vector<uint32_t>(ctx->channels)) dev_.queue_verbs().destroy_channel(ctx, h);
  for (auto h : std::vector<uint32_t>(ctx->mws)) dev_.memory_verbs().dealloc_mw(ctx, h);
  for (auto h : std::vector<uint32_t>(ctx->mrs)) dev_.memory_verbs().dereg_mr(ctx, h);
  dev_.completions().forget(ctx);  // its flushes' CQEs wake nobody: the page goes next
  release_context_page(ctx);
  dev_.memory_verbs().free_dms(ctx);  // after the MRs over them
  leave_group(ctx);                   // its PDs go to a context that imported it (ibv_import_device)
  for (auto h : std::vector<uint32_t>(ctx->pds)) dev_.memory_verbs().dealloc_pd(ctx, h);
  dev_.journal().log(LogLevel::kInfo,
                     "context " + std::to_string(ctx->id) + " of pid " + std::to_string(ctx->pid) + " closed");
  dev_.tracer_.event(TraceKind::kCtxClose).u("ctx", ctx->id).u("pid", uint64_t(ctx->pid));
  dev_.contexts_.erase(ctx->id);
}

// The kernel keeps one handle table per uverbs file for every kind of object, and answers a
// lookup that finds nothing with ENOENT (lookup_get_idr_uobject), one that finds an object of
// another kind with EINVAL (rdma_lookup_get_uobject). simnic's handles are also unique across
// kinds, so the same two answers follow from its tables.
int ContextVerbs::check_handle(Context* ctx, HandleKind kind, uint32_t handle) {
  const bool opened_qp = [&] {
    auto it = dev_.tgt_opens_.find(handle);
    return it != dev_.tgt_opens_.end() && it->second.first == ctx;
  }();
  const std::pair<HandleKind, bool> names[] = {
      {HandleKind::kPd, dev_.tables().owned(dev_.pds_, ctx, handle) != nullptr},
      {HandleKind::kMr, dev_.tables().owned(dev_.mrs_, ctx, handle) != nullptr},
      {HandleKind::kMw, dev_.tables().owned(dev_.mws_, ctx, handle) != nullptr},
      {HandleKind::kCq, dev_.tables().owned(dev_.cqs_, ctx, handle) != nullptr},
      {HandleKind::kSrq, dev_.tables().owned(dev_.srqs_, ctx, handle) != nullptr},
      {HandleKind::kQp, dev_.tables().owned(dev_.qps_, ctx, handle) != nullptr || opened_qp},
      {HandleKind::kAh, dev_.tables().owned(dev_.ahs_, ctx, handle) != nullptr},
      {HandleKind::kXrcd, std::find(ctx->xrcds.begin(), ctx->xrcds.end(), handle) != ctx->xrcds.end()},
  };
  bool other_kind = false;
  for (const auto& [k, named] : names) {
    if (named && k == kind) return 0;
    other_kind |= named;
  }
  if (other_kind)
    return dev_.journal().refuse(EINVAL, "handle " + std::to_string(handle) +
                                             " names an object of another kind (uverbs: EINVAL)");
  return dev_.journal().refuse(
      ENOENT, "handle " + std::to_string(handle) +
                  " names no object of this program: destroyed already, or never created (uverbs: ENOENT)");
}

int ContextVerbs::explain_qp(Context* ctx, uint32_t qpn, std::string* why) {
  Qp* qp = dev_.tables().find_qp_by_qpn(qpn);
  if (!qp || qp->ctx != ctx) return EINVAL;
  if (qp->error_reason.empty()) {
    *why = "";
    return 0;
  }
  *why = "QP " + hex(qp->qpn) + " is in " + qp_state_name(qp->state) + " because " + qp->error_reason;
  if (qp->state == IBV_QPS_ERR)
    *why += "; its other work requests complete with IBV_WC_WR_FLUSH_ERR until it is reset (RESET, INIT, RTR, RTS)";
  return 0;
}
}  // namespace simnic::core
