// ContextVerbs: the verbs on a context (one per control connection): open and close (which
// destroys everything the context created), the handle check of the destroy verbs, why a QP
// failed, the page an idle poller sleeps on, and ibv_import_device (contexts that share PDs and
// MRs, as processes that share one uverbs file do). A part of Device (device.h).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "simnic/core/env.h"

namespace simnic::core {

class Device;
struct Context;
struct Mr;

class ContextVerbs {
 public:
  explicit ContextVerbs(Device& dev);

  // contexts.cc
  Context* open_context(pid_t pid, uid_t uid, int doorbell_fd, int async_fd);
  void close_context(Context* ctx);  // destroys everything it created
  // What uverbs answers for a handle a destroy verb cannot use (rdma_core.c,
  // rdma_lookup_get_uobject): 0 when `handle` names an object of `kind` that `ctx` may use,
  // ENOENT when it names none of the context's objects, EINVAL when it names one of another kind.
  enum class HandleKind { kPd, kMr, kMw, kCq, kSrq, kQp, kAh, kXrcd };
  int check_handle(Context* ctx, HandleKind kind, uint32_t handle);
  // Why QP `qpn` of `ctx` completed work requests in error: 0 and *why, or EINVAL.
  int explain_qp(Context* ctx, uint32_t qpn, std::string* why);

  // context_page.cc: the page an idle ibv_poll_cq sleeps on (abi::ContextShared). Allocated on
  // the shim's first request (EALREADY after that); *page's memfd goes to the client.
  int map_context_page(Context* ctx, ShmRegion** page);
  // The program now holds the NIC's socket (Op::OpenDirectSend): its QPs' next PSN may be lent
  // to it (engines/direct_send.h). EALREADY the second time.
  int allow_direct_send(Context* ctx);

  // import.cc: set_ctl_fd_number: what the context's Hello said its socket's descriptor number
  // is; join_context: `holds(pid, fd)` says whether that descriptor of that process is the
  // socket the importer passed.
  void set_ctl_fd_number(Context* ctx, int fd) { ctl_fd_number_[ctx] = fd; }
  int join_context(Context* ctx, const std::function<bool(pid_t pid, int fd)>& holds);
  int import_pd(Context* ctx, uint32_t handle);
  int import_mr(Context* ctx, uint32_t handle, Mr** out);
  bool shares(const Context* owner, const Context* user) const;

 private:
  void release_context_page(Context* ctx);
  void leave_group(Context* ctx);  // a closing context hands what others still use to them

  Device& dev_;
  std::map<const Context*, int> ctl_fd_number_;
  std::map<const Context*, uint32_t> group_of_;  // contexts that share PDs and MRs: same group
};

}  // namespace simnic::core
