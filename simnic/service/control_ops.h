// The control dispatcher's per-Op table: for every request of the control protocol
// (abi/control.h, abi/cm.h), what the connection needs before it may make it, how big its body
// is, and the one function that serves it. ControlDispatcher::handle checks the first two for
// every op alike, so a handler only decodes, calls the Device (or CmAgent) and encodes.
//
// Adding a request: declare its handler below, write it in the control_dispatch_*.cc file of
// its object kind (a new file for a new kind), and add one line to kOpTable
// (control_op_table.cc). A handler taking `const Req&` gets its body size checked against
// sizeof(Req) (EINVAL otherwise); one taking only the Request reads the body as it likes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "simnic/abi/cm.h"
#include "simnic/service/control_dispatch.h"
#include "simnic/service/control_reply.h"

namespace simnic::service::control {

// What one handler is given. The body's size is already checked (see OpRule::body).
struct Request {
  core::Device& dev;
  const ControlDispatcher::Hooks& hooks;
  pid_t daemon_pid;
  ControlSession& session;
  core::Context* ctx;  // the session's context: never null for a Needs::kContext op
  std::span<const uint8_t> body;
  std::vector<int>& fds;  // descriptors a handler keeps are set to -1
  uint64_t now;

  // 0 when `fd` may serve as `role` for this session, else the errno to refuse with.
  int check_fd(FdRole role, int fd) const { return hooks.check_fd ? hooks.check_fd(role, fd, session) : 0; }
};

// What a connection must have done before it may make a request. A connection is greeted by
// its Hello; a Hello that brought a doorbell and an event socket opened an ibv_context.
// Query-only connections (the CLI, librdmacm) never do.
enum class Needs : uint8_t {
  kNothing,   // Hello itself
  kHello,     // a query: any greeted connection (ibv_query_*, simnic status)
  kContext,   // creates or uses a context's objects: EPROTO on a query-only connection
  kCmClient,  // rdma_cm: any greeted connection, which becomes a CM client (cm_dispatch.cc)
};

constexpr size_t kAnyBody = SIZE_MAX;  // text, or a body the op ignores

using Handler = ControlReply (*)(Request&);

struct OpRule {
  abi::Op op{};
  const char* name = nullptr;  // nullptr: an op this NIC does not serve (EOPNOTSUPP)
  Needs needs = Needs::kContext;
  size_t body = kAnyBody;  // the exact size of the request body, or kAnyBody
  Handler handler = nullptr;
};

// The rule of `op`, or one with no name for an op nobody serves.
const OpRule& op_rule(abi::Op op);

// --- Building table lines from handlers ---
template <class F>
struct HandlerBody {  // ControlReply (*)(Request&): the handler reads the body itself
  static constexpr size_t size = kAnyBody;
};
template <class Req>
struct HandlerBody<ControlReply (*)(Request&, const Req&)> {  // one struct of exactly sizeof(Req)
  using type = Req;
  static constexpr size_t size = sizeof(Req);
};

template <auto Fn>
ControlReply call(Request& r) {
  using Body = HandlerBody<decltype(Fn)>;
  if constexpr (Body::size == kAnyBody) {
    return Fn(r);
  } else {
    typename Body::type req;
    std::memcpy(static_cast<void*>(&req), r.body.data(), sizeof req);
    return Fn(r, req);
  }
}

// One line of the table: entry<handler>(Op::X, "X", Needs::...).
template <auto Fn>
constexpr OpRule entry(abi::Op op, const char* name, Needs needs) {
  return OpRule{op, name, needs, HandlerBody<decltype(Fn)>::size, &call<Fn>};
}

// A verb that takes a handle and answers with an errno only (ibv_dealloc_pd, ibv_destroy_*):
// `Verb`, a member of the part of the Device that `Part` returns (Device::queue_verbs, ...).
template <auto Part, auto Verb>
ControlReply handle_verb(Request& r, const abi::HandleReq& q) {
  return fail(((r.dev.*Part)().*Verb)(r.ctx, q.handle));
}

// A destroy verb (ibv_dealloc_pd, ibv_dereg_mr, ibv_destroy_*): a handle that names none of the
// context's objects is ENOENT, one that names an object of another kind EINVAL, as the kernel's
// uverbs answers (ContextVerbs::check_handle); then the verb's own errno (EBUSY while in use, ...).
template <core::ContextVerbs::HandleKind Kind, auto Part, auto Verb>
ControlReply destroy_verb(Request& r, const abi::HandleReq& q) {
  if (int e = r.dev.context_verbs().check_handle(r.ctx, Kind, q.handle)) return fail(e);
  return fail(((r.dev.*Part)().*Verb)(r.ctx, q.handle));
}

// --- The handlers, by file ---
// control_dispatch_query.cc: Hello and what needs no context
ControlReply hello(Request& r, const abi::HelloReq& q);
ControlReply status(Request& r);
ControlReply set_fault(Request& r);
ControlReply step(Request& r);
ControlReply query_device(Request& r);
ControlReply query_port(Request& r, const abi::QueryPortReq& q);
ControlReply query_gid(Request& r, const abi::QueryGidReq& q);
ControlReply take_notices(Request& r);
ControlReply explain_qp(Request& r, const abi::HandleReq& q);

// control_dispatch_verbs.cc: PDs, MRs, MWs, channels, CQs, QPs, SRQs, AHs, multicast
ControlReply alloc_pd(Request& r);
ControlReply reg_mr(Request& r, const abi::RegMrReq& q);
ControlReply alloc_mw(Request& r, const abi::AllocMwReq& q);
ControlReply create_comp_channel(Request& r);
ControlReply create_cq(Request& r, const abi::CreateCqReq& q);
ControlReply resize_cq(Request& r, const abi::ResizeCqReq& q);
ControlReply map_context_page(Request& r);
ControlReply open_direct_send(Request& r);

// control_dispatch_verbs_ext.cc: issue 17's verbs
ControlReply rereg_mr(Request& r, const abi::ReregMrReq& q);
ControlReply query_clock(Request& r);
ControlReply alloc_dm(Request& r, const abi::AllocDmReq& q);
ControlReply reg_dm_mr(Request& r, const abi::RegDmMrReq& q);
ControlReply import_pd(Request& r, const abi::HandleReq& q);
ControlReply import_mr(Request& r, const abi::HandleReq& q);
ControlReply join_context(Request& r);
ControlReply advise_mr(Request& r, const abi::AdviseMrReq& q);  // on-demand paging
ControlReply create_qp(Request& r, const abi::CreateQpReq& q);
ControlReply modify_qp(Request& r, const abi::ModifyQpReq& q);
ControlReply query_qp(Request& r, const abi::QueryQpReq& q);
ControlReply create_srq(Request& r, const abi::CreateSrqReq& q);
ControlReply modify_srq(Request& r, const abi::ModifySrqReq& q);
ControlReply query_srq(Request& r, const abi::HandleReq& q);
ControlReply create_ah(Request& r, const abi::CreateAhReq& q);
ControlReply attach_mcast(Request& r, const abi::McastReq& q);
ControlReply detach_mcast(Request& r, const abi::McastReq& q);

// control_dispatch_xrc.cc: XRC domains, SRQs and QPs
ControlReply open_xrcd(Request& r, const abi::OpenXrcdReq& q);
ControlReply create_xrc_srq(Request& r, const abi::CreateXrcSrqReq& q);
ControlReply create_xrc_qp(Request& r, const abi::CreateXrcQpReq& q);
ControlReply open_xrc_qp(Request& r, const abi::OpenXrcQpReq& q);

// cm_dispatch.cc: rdma_cm (Needs::kCmClient; r.session.cm_client is set)
ControlReply cm_attach_channel(Request& r);
ControlReply cm_create_id(Request& r, const abi::CmCreateIdReq& q);
ControlReply cm_destroy_id(Request& r, const abi::HandleReq& q);
ControlReply cm_migrate_id(Request& r, const abi::CmMigrateReq& q);
ControlReply cm_bind(Request& r, const abi::CmBindReq& q);
ControlReply cm_listen(Request& r, const abi::CmListenReq& q);
ControlReply cm_connect(Request& r, const abi::CmConnectReq& q);
ControlReply cm_accept(Request& r, const abi::CmAcceptReq& q);
ControlReply cm_reject(Request& r, const abi::CmRejectReq& q);
ControlReply cm_disconnect(Request& r, const abi::CmDisconnectReq& q);
ControlReply cm_init_qp_attr(Request& r, const abi::CmInitQpAttrReq& q);

// Text replies (simnic status, fault and step commands, explanations).
ControlReply text(const std::string& s, int status = 0);
// Where `p` lies in a shared region, and the replies that tell a client where its rings are.
uint32_t offset_in(const core::ShmRegion& mem, const void* p);
abi::CreateQpReply qp_reply(const core::Qp& qp);
abi::CreateSrqReply srq_reply(const core::Srq& srq);

}  // namespace simnic::service::control
