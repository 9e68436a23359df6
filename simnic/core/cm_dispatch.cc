// The rdma_cm requests of the control protocol (abi/cm.h): decoded here, served by the NIC's
// CmAgent. They come on librdmacm's query-only connection; the first one makes it a CM client,
// whose ids and channels die with the connection, as the kernel's ucma file does.
#include <cerrno>
#include <cstring>

#include "simnic/abi/cm.h"
#include "simnic/core/control_dispatch.h"
#include "simnic/core/control_reply.h"

namespace simnic::core {

using namespace simnic::abi;
using namespace simnic::core::control;

namespace {

// Decodes the request struct, calls fn(req) -> errno.
template <class Req, class Fn>
ControlReply simple(std::span<const uint8_t> body, Fn&& fn) {
  Req req;
  if (!decode(body, &req)) return fail(EINVAL);
  return fail(fn(req));
}

}  // namespace

ControlReply ControlDispatcher::handle_cm(ControlSession& s, Op op, std::span<const uint8_t> body,
                                          std::vector<int>& fds, uint64_t now) {
  CmAgent& cm = dev_.cm();
  if (!s.cm_client) s.cm_client = cm.new_client();
  const uint32_t c = s.cm_client;
  cm.take_refusal();
  ControlReply r;
  switch (op) {
    case Op::CmAttachChannel: {
      if (fds.empty() || fds[0] < 0) return fail(EINVAL);
      if (int e = check_fd(FdRole::kCmChannel, fds[0], s)) return fail(e);
      HandleReply rep{};
      int e = cm.attach_channel(c, fds[0], &rep.handle);
      fds[0] = -1;
      return e ? fail(e) : ok(rep);
    }
    case Op::CmCreateId: {
      CmCreateIdReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      HandleReply rep{};
      if (int e = cm.create_id(c, req, &rep.handle)) return fail(e);
      return ok(rep);
    }
    case Op::CmDestroyId:
      return simple<HandleReq>(body, [&](const HandleReq& q) { return cm.destroy_id(c, q.handle, now); });
    case Op::CmMigrateId:
      return simple<CmMigrateReq>(body, [&](const CmMigrateReq& q) { return cm.migrate_id(c, q); });
    case Op::CmBind: {
      CmBindReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      CmBindReply rep{};
      if (int e = cm.bind(c, req, &rep.port)) r = fail(e);
      else r = ok(rep);
      break;
    }
    case Op::CmListen:
      r = simple<CmListenReq>(body, [&](const CmListenReq& q) { return cm.listen(c, q); });
      break;
    case Op::CmConnect:
      r = simple<CmConnectReq>(body, [&](const CmConnectReq& q) { return cm.connect(c, q, now); });
      break;
    case Op::CmAccept:
      r = simple<CmAcceptReq>(body, [&](const CmAcceptReq& q) { return cm.accept(c, q, now); });
      break;
    case Op::CmReject:
      r = simple<CmRejectReq>(body, [&](const CmRejectReq& q) { return cm.reject(c, q, now); });
      break;
    case Op::CmDisconnect:
      r = simple<CmDisconnectReq>(body, [&](const CmDisconnectReq& q) { return cm.disconnect(c, q, now); });
      break;
    case Op::CmInitQpAttr: {
      CmInitQpAttrReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      CmInitQpAttrReply rep{};
      if (int e = cm.init_qp_attr(c, req, &rep)) r = fail(e);
      else r = ok(rep);
      break;
    }
    default:
      return fail(EOPNOTSUPP);
  }
  std::string why = cm.take_refusal();
  if (r.status && !why.empty()) r.body.assign(why.begin(), why.end());
  return r;
}

}  // namespace simnic::core
