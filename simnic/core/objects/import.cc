// ibv_import_device, ibv_import_pd, ibv_import_mr: a process given another's command socket
// (its ibv_context's cmd_fd, through SCM_RIGHTS) opens a context of its own that shares the
// first one's PDs and MRs, as two processes sharing one uverbs file do. Its own connection
// keeps its requests and replies apart from the exporter's, and its own pid is the one DMA
// reaches for the MRs it registers; an imported MR still reaches its registrant's memory.
#include "simnic/core/device.h"
#include "simnic/core/text.h"

#include <cerrno>

namespace simnic::core {

bool ContextVerbs::shares(const Context* owner, const Context* user) const {
  auto a = group_of_.find(owner), b = group_of_.find(user);
  return a != group_of_.end() && b != group_of_.end() && a->second == b->second;
}

// The exporter is the context whose Hello named a descriptor the importer's socket is.
int ContextVerbs::join_context(Context* ctx, const std::function<bool(pid_t pid, int fd)>& holds) {
  for (auto& [id, other] : dev_.contexts_) {
    if (other.get() == ctx) continue;
    auto n = ctl_fd_number_.find(other.get());
    if (n == ctl_fd_number_.end() || n->second <= 0 || !holds(other->pid, n->second)) continue;
    if (group_of_.count(ctx)) return dev_.journal().refuse(EINVAL, "this context already imported one");
    const uint32_t group = group_of_.emplace(other.get(), other->id).first->second;
    group_of_[ctx] = group;
    dev_.journal().log(LogLevel::kInfo, "context " + std::to_string(ctx->id) + " of pid " + std::to_string(ctx->pid) +
                                            " imports context " + std::to_string(other->id) + " of pid " +
                                            std::to_string(other->pid));
    return 0;
  }
  return dev_.journal().refuse(EINVAL, "the descriptor passed is no context's command socket on this NIC");
}

int ContextVerbs::import_pd(Context* ctx, uint32_t handle) {
  return dev_.tables().owned(dev_.pds_, ctx, handle)
             ? 0
             : dev_.journal().refuse(EINVAL, "no PD " + std::to_string(handle) + " this context shares");
}

int ContextVerbs::import_mr(Context* ctx, uint32_t handle, Mr** out) {
  *out = dev_.tables().owned(dev_.mrs_, ctx, handle);
  return *out ? 0 : dev_.journal().refuse(EINVAL, "no MR " + std::to_string(handle) + " this context shares");
}

// A closing context of a group leaves its PDs to another member, as a uverbs file shared by
// processes keeps its objects while one of them has it open; nothing points at the closed
// context afterwards. Its MRs cannot stay: they reach the memory of the process that
// registered them, which is going, so they are deregistered (windows bound to them unbound).
void ContextVerbs::leave_group(Context* ctx) {
  ctl_fd_number_.erase(ctx);
  auto g = group_of_.find(ctx);
  if (g == group_of_.end()) return;
  const uint32_t group = g->second;
  group_of_.erase(g);
  Context* heir = nullptr;
  for (auto& [c, grp] : group_of_)
    if (grp == group) heir = const_cast<Context*>(c);
  for (auto& [h, mw] : dev_.mws_)  // windows of the group bound to its MRs lose them (as at a dereg)
    if (mw->mr && mw->mr->ctx == ctx) dev_.engines_.windows.unbind_mw(*mw);
  for (auto h : std::vector<uint32_t>(ctx->mrs)) dev_.memory_verbs().dereg_mr(ctx, h);
  for (auto& [h, pd] : dev_.pds_) {
    if (pd->ctx != ctx) continue;
    if (heir) pd->ctx = heir, heir->pds.push_back(h);
  }
}

}  // namespace simnic::core
