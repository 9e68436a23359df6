// The control dispatcher: what every request goes through before its handler (control_ops.h,
// the per-Op table in control_op_table.cc), and what a closing connection leaves behind.
#include "simnic/service/control_dispatch.h"
#include "simnic/service/control_ops.h"

#include <cerrno>

namespace simnic::service {

using namespace simnic::abi;
using namespace simnic::core;

ControlDispatcher::ControlDispatcher(Device& device, pid_t daemon_pid, Hooks hooks)
    : dev_(device), daemon_pid_(daemon_pid), hooks_(std::move(hooks)) {}

void ControlDispatcher::close(ControlSession& s) {
  if (s.cm_client) dev_.cm().close_client(s.cm_client, 0);
  s.cm_client = 0;
  if (s.ctx) dev_.context_verbs().close_context(s.ctx);
  s.ctx = nullptr;
}

// Every refusal carries the reason the Device gave for it, if any, as its body (control.h).
ControlReply ControlDispatcher::handle(ControlSession& s, Op op, std::span<const uint8_t> body, std::vector<int>& fds,
                                       uint64_t now) {
  dev_.journal().take_refusal();  // none left over from an earlier request
  ControlReply r = handle_op(s, op, body, fds, now);
  std::string why = dev_.journal().take_refusal();
  if (r.status != 0 && r.body.empty()) r.body.assign(why.begin(), why.end());
  return r;
}

// The checks every op gets from its table line, in this order: a Hello first (EPROTO), a
// context for what creates or uses objects (EPROTO on a query-only connection), an op this NIC
// serves (EOPNOTSUPP), a body of the op's size (EINVAL).
ControlReply ControlDispatcher::handle_op(ControlSession& s, Op op, std::span<const uint8_t> body,
                                          std::vector<int>& fds, uint64_t now) {
  using control::fail, control::Needs;
  const control::OpRule& rule = control::op_rule(op);
  if (rule.needs != Needs::kNothing && !s.greeted) return fail(EPROTO);
  if (rule.needs == Needs::kContext && !s.ctx) return fail(EPROTO);
  if (!rule.handler) return fail(EOPNOTSUPP);
  if (rule.body != control::kAnyBody && body.size() != rule.body) return fail(EINVAL);
  control::Request r{dev_, hooks_, daemon_pid_, s, s.ctx, body, fds, now};
  if (rule.needs != Needs::kCmClient) return rule.handler(r);
  // rdma_cm: the first request makes the connection a CM client; a refusal carries the
  // CmAgent's reason.
  CmAgent& cm = dev_.cm();
  if (!s.cm_client) s.cm_client = cm.new_client();
  cm.take_refusal();
  ControlReply reply = rule.handler(r);
  std::string why = cm.take_refusal();
  if (reply.status && !why.empty()) reply.body.assign(why.begin(), why.end());
  return reply;
}

}  // namespace simnic::service
