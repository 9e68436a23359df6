// The rdma_cm requests of the control protocol (abi/cm.h): decoded here, served by the NIC's
// CmAgent. They come on librdmacm's query-only connection; the first one makes it a CM client
// (ControlDispatcher::handle_op), whose ids and channels die with the connection, as the
// kernel's ucma file does.
#include <cerrno>

#include "simnic/service/control_ops.h"

namespace simnic::service::control {

using namespace simnic::abi;
using namespace simnic::core;

namespace {

CmAgent& cm(Request& r) { return r.dev.cm(); }
uint32_t client(const Request& r) { return r.session.cm_client; }

// A reply struct filled by the agent, or its errno.
template <class Reply, class Fn>
ControlReply reply_from(Fn&& fn) {
  Reply rep{};
  if (int e = fn(&rep)) return fail(e);
  return ok(rep);
}

}  // namespace

ControlReply cm_attach_channel(Request& r) {
  if (r.fds.empty() || r.fds[0] < 0) return fail(EINVAL);
  if (int e = r.check_fd(FdRole::kCmChannel, r.fds[0])) return fail(e);
  HandleReply rep{};
  int e = cm(r).attach_channel(client(r), r.fds[0], &rep.handle);
  r.fds[0] = -1;  // the agent owns it now, taken or not
  return e ? fail(e) : ok(rep);
}

ControlReply cm_create_id(Request& r, const CmCreateIdReq& q) {
  return reply_from<HandleReply>([&](HandleReply* rep) { return cm(r).create_id(client(r), q, &rep->handle); });
}

ControlReply cm_destroy_id(Request& r, const HandleReq& q) {
  return fail(cm(r).destroy_id(client(r), q.handle, r.now));
}

ControlReply cm_migrate_id(Request& r, const CmMigrateReq& q) { return fail(cm(r).migrate_id(client(r), q)); }

ControlReply cm_bind(Request& r, const CmBindReq& q) {
  return reply_from<CmBindReply>([&](CmBindReply* rep) { return cm(r).bind(client(r), q, &rep->port); });
}

ControlReply cm_listen(Request& r, const CmListenReq& q) { return fail(cm(r).listen(client(r), q)); }

ControlReply cm_connect(Request& r, const CmConnectReq& q) { return fail(cm(r).connect(client(r), q, r.now)); }

ControlReply cm_accept(Request& r, const CmAcceptReq& q) { return fail(cm(r).accept(client(r), q, r.now)); }

ControlReply cm_reject(Request& r, const CmRejectReq& q) { return fail(cm(r).reject(client(r), q, r.now)); }

ControlReply cm_disconnect(Request& r, const CmDisconnectReq& q) { return fail(cm(r).disconnect(client(r), q, r.now)); }

ControlReply cm_init_qp_attr(Request& r, const CmInitQpAttrReq& q) {
  return reply_from<CmInitQpAttrReply>([&](CmInitQpAttrReply* rep) { return cm(r).init_qp_attr(client(r), q, rep); });
}

}  // namespace simnic::service::control
