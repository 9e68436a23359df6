// The control requests that need no context: Hello, the ibv_query_* queries, and the CLI's
// status, fault and step commands; and the two that read what the NIC noticed about a context.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "simnic/service/control_ops.h"

namespace simnic::service::control {

using namespace simnic::abi;
using namespace simnic::core;

ControlReply text(const std::string& s, int status) {
  ControlReply r;
  r.status = status;
  r.body.assign(s.begin(), s.end());
  return r;
}

namespace {

HelloReply hello_reply(const Device& dev, pid_t daemon_pid) {
  HelloReply rep{};
  std::snprintf(rep.name, sizeof rep.name, "%s", dev.config().name.c_str());
  rep.node_guid = dev.addressing().node_guid_be();
  const uint32_t ip = dev.config().ipv4;
  const uint8_t b[4] = {uint8_t(ip >> 24), uint8_t(ip >> 16), uint8_t(ip >> 8), uint8_t(ip)};
  std::memcpy(&rep.ipv4, b, 4);
  rep.daemon_pid = uint32_t(daemon_pid);
  rep.abi_version = kAbiVersion;
  rep.num_comp_vectors = Addressing::num_comp_vectors();  // one per CPU, as rxe
  return rep;
}

// A CLI command in text, answered in text by an I/O-layer hook (EOPNOTSUPP without one).
template <class Hook>
ControlReply text_command(const Hook& hook, std::span<const uint8_t> body) {
  if (!hook) return fail(EOPNOTSUPP);
  int st = 0;
  std::string out = hook(std::string(body.begin(), body.end()), &st);
  return text(out, st);
}

}  // namespace

// A Hello with two descriptors (doorbell eventfd, async-event socket) opens an ibv_context;
// one without is a query-only connection (ibv_get_device_list, the CLI, librdmacm).
ControlReply hello(Request& r, const HelloReq& q) {
  if (q.abi_version != kAbiVersion) return fail(EPROTO);
  ControlSession& s = r.session;
  if (s.greeted) return fail(EALREADY);
  const bool context = r.fds.size() >= 2;
  if (context) {
    if (int e = r.check_fd(FdRole::kDoorbell, r.fds[0])) return fail(e);
    if (int e = r.check_fd(FdRole::kEventSocket, r.fds[1])) return fail(e);
  }
  s.greeted = true;
  if (context) {
    s.ctx = r.dev.context_verbs().open_context(s.pid, s.uid, r.fds[0], r.fds[1]);
    r.fds[0] = r.fds[1] = -1;
    r.dev.context_verbs().set_ctl_fd_number(s.ctx, int(q.ctl_fd));  // for ibv_import_device (issue 17)
  }
  return ok(hello_reply(r.dev, r.daemon_pid));
}

ControlReply status(Request& r) {
  return text(r.dev.status_text() + (r.hooks.extra_status ? r.hooks.extra_status() : ""));
}

ControlReply set_fault(Request& r) { return text_command(r.hooks.set_faults, r.body); }

ControlReply step(Request& r) { return text_command(r.hooks.step, r.body); }

ControlReply query_device(Request& r) { return ok(QueryDeviceReply{r.dev.addressing().device_attr()}); }

namespace {
// ibv_query_port, ibv_query_gid ...: one port, number 1.
ControlReply no_such_port(Request& r, uint32_t port_num) {
  return fail(r.dev.journal().refuse(EINVAL, "port " + std::to_string(port_num) +
                                                 " does not exist: a simnic NIC has one port, "
                                                 "port 1 (phys_port_cnt 1)"));
}
}  // namespace

ControlReply query_port(Request& r, const QueryPortReq& q) {
  if (q.port_num != 1) return no_such_port(r, q.port_num);
  return ok(QueryPortReply{r.dev.addressing().port_attr()});
}

ControlReply query_gid(Request& r, const QueryGidReq& q) {
  if (q.port_num != 1) return no_such_port(r, q.port_num);
  GidEntry e;
  if (int st = r.dev.addressing().query_gid(q.index, &e)) {  // ENODATA: an empty slot, which needs no reason
    return fail(st == EINVAL ? r.dev.journal().refuse(st, r.dev.addressing().gid_index_refusal(q.index)) : st);
  }
  QueryGidReply rep{};
  rep.gid = e.gid;
  rep.gid_type = e.type;
  // A RoCE GID belongs to the interface of its address (kernel: the GID attribute's ndev);
  // an InfiniBand GID to none.
  rep.ndev_ifindex = e.type == IBV_GID_TYPE_IB ? 0 : r.dev.config().netdev_ifindex;
  return ok(rep);
}

ControlReply take_notices(Request& r) { return text(r.dev.journal().take_notices(r.ctx)); }

ControlReply explain_qp(Request& r, const HandleReq& q) {
  std::string why;
  int e = r.dev.context_verbs().explain_qp(r.ctx, q.handle, &why);
  return e ? fail(e) : text(why);
}

}  // namespace simnic::service::control
