// The table of control requests (control_ops.h): one line per abi::Op.
#include <array>

#include "simnic/service/control_ops.h"

namespace simnic::service::control {

using abi::Op;
using core::Device;
using N = Needs;
using K = core::ContextVerbs::HandleKind;
using core::MemoryVerbs;
using core::QueueVerbs;
using core::XrcVerbs;

namespace {

constexpr OpRule kOpTable[] = {
    entry<hello>(Op::Hello, "Hello", N::kNothing),
    // Queries: any greeted connection.
    entry<query_device>(Op::QueryDevice, "QueryDevice", N::kHello),
    entry<query_port>(Op::QueryPort, "QueryPort", N::kHello),
    entry<query_gid>(Op::QueryGid, "QueryGid", N::kHello),
    entry<status>(Op::Status, "Status", N::kHello),
    entry<set_fault>(Op::SetFault, "SetFault", N::kHello),
    entry<step>(Op::Step, "Step", N::kHello),
    // Verbs on a context's objects.
    entry<alloc_pd>(Op::AllocPd, "AllocPd", N::kContext),
    entry<destroy_verb<K::kPd, &Device::memory_verbs, &MemoryVerbs::dealloc_pd>>(Op::DeallocPd, "DeallocPd",
                                                                                 N::kContext),
    entry<reg_mr>(Op::RegMr, "RegMr", N::kContext),
    entry<destroy_verb<K::kMr, &Device::memory_verbs, &MemoryVerbs::dereg_mr>>(Op::DeregMr, "DeregMr", N::kContext),
    entry<alloc_mw>(Op::AllocMw, "AllocMw", N::kContext),
    entry<destroy_verb<K::kMw, &Device::memory_verbs, &MemoryVerbs::dealloc_mw>>(Op::DeallocMw, "DeallocMw",
                                                                                 N::kContext),
    entry<create_comp_channel>(Op::CreateCompChannel, "CreateCompChannel", N::kContext),
    entry<handle_verb<&Device::queue_verbs, &QueueVerbs::destroy_channel>>(Op::DestroyCompChannel, "DestroyCompChannel",
                                                                           N::kContext),
    entry<create_cq>(Op::CreateCq, "CreateCq", N::kContext),
    entry<resize_cq>(Op::ResizeCq, "ResizeCq", N::kContext),
    entry<map_context_page>(Op::MapContextPage, "MapContextPage", N::kContext),
    entry<open_direct_send>(Op::OpenDirectSend, "OpenDirectSend", N::kContext),
    // Issue 17's verbs (control_dispatch_verbs_ext.cc).
    entry<rereg_mr>(Op::ReregMr, "ReregMr", N::kContext),
    entry<query_clock>(Op::QueryClock, "QueryClock", N::kContext),
    entry<alloc_dm>(Op::AllocDm, "AllocDm", N::kContext),
    entry<handle_verb<&Device::memory_verbs, &MemoryVerbs::free_dm>>(Op::FreeDm, "FreeDm", N::kContext),
    entry<reg_dm_mr>(Op::RegDmMr, "RegDmMr", N::kContext),
    entry<import_pd>(Op::ImportPd, "ImportPd", N::kContext),
    entry<import_mr>(Op::ImportMr, "ImportMr", N::kContext),
    entry<join_context>(Op::JoinContext, "JoinContext", N::kContext),
    entry<advise_mr>(Op::AdviseMr, "AdviseMr", N::kContext),
    entry<destroy_verb<K::kCq, &Device::queue_verbs, &QueueVerbs::destroy_cq>>(Op::DestroyCq, "DestroyCq", N::kContext),
    entry<create_qp>(Op::CreateQp, "CreateQp", N::kContext),
    entry<modify_qp>(Op::ModifyQp, "ModifyQp", N::kContext),
    entry<query_qp>(Op::QueryQp, "QueryQp", N::kContext),
    entry<destroy_verb<K::kQp, &Device::queue_verbs, &QueueVerbs::destroy_qp>>(Op::DestroyQp, "DestroyQp", N::kContext),
    entry<explain_qp>(Op::ExplainQp, "ExplainQp", N::kContext),
    entry<take_notices>(Op::TakeNotices, "TakeNotices", N::kContext),
    entry<create_srq>(Op::CreateSrq, "CreateSrq", N::kContext),
    entry<modify_srq>(Op::ModifySrq, "ModifySrq", N::kContext),
    entry<query_srq>(Op::QuerySrq, "QuerySrq", N::kContext),
    entry<destroy_verb<K::kSrq, &Device::queue_verbs, &QueueVerbs::destroy_srq>>(Op::DestroySrq, "DestroySrq",
                                                                                 N::kContext),
    entry<create_ah>(Op::CreateAh, "CreateAh", N::kContext),
    entry<destroy_verb<K::kAh, &Device::memory_verbs, &MemoryVerbs::destroy_ah>>(Op::DestroyAh, "DestroyAh",
                                                                                 N::kContext),
    entry<attach_mcast>(Op::AttachMcast, "AttachMcast", N::kContext),
    entry<detach_mcast>(Op::DetachMcast, "DetachMcast", N::kContext),
    // XRC (control_dispatch_xrc.cc).
    entry<open_xrcd>(Op::OpenXrcd, "OpenXrcd", N::kContext),
    entry<destroy_verb<K::kXrcd, &Device::xrc_verbs, &XrcVerbs::close_xrcd>>(Op::CloseXrcd, "CloseXrcd", N::kContext),
    entry<create_xrc_srq>(Op::CreateXrcSrq, "CreateXrcSrq", N::kContext),
    entry<create_xrc_qp>(Op::CreateXrcQp, "CreateXrcQp", N::kContext),
    entry<open_xrc_qp>(Op::OpenXrcQp, "OpenXrcQp", N::kContext),
    // rdma_cm (cm_dispatch.cc).
    entry<cm_attach_channel>(Op::CmAttachChannel, "CmAttachChannel", N::kCmClient),
    entry<cm_create_id>(Op::CmCreateId, "CmCreateId", N::kCmClient),
    entry<cm_destroy_id>(Op::CmDestroyId, "CmDestroyId", N::kCmClient),
    entry<cm_migrate_id>(Op::CmMigrateId, "CmMigrateId", N::kCmClient),
    entry<cm_bind>(Op::CmBind, "CmBind", N::kCmClient),
    entry<cm_listen>(Op::CmListen, "CmListen", N::kCmClient),
    entry<cm_connect>(Op::CmConnect, "CmConnect", N::kCmClient),
    entry<cm_accept>(Op::CmAccept, "CmAccept", N::kCmClient),
    entry<cm_reject>(Op::CmReject, "CmReject", N::kCmClient),
    entry<cm_disconnect>(Op::CmDisconnect, "CmDisconnect", N::kCmClient),
    entry<cm_init_qp_attr>(Op::CmInitQpAttr, "CmInitQpAttr", N::kCmClient),
};

constexpr size_t kOps = size_t(Op::Count_);

// kOpTable indexed by op; an op listed twice does not compile.
constexpr std::array<OpRule, kOps> by_op() {
  std::array<OpRule, kOps> t{};
  for (const OpRule& r : kOpTable) {
    const size_t i = size_t(r.op);
    if (i >= kOps || t[i].name) throw "an op outside abi::Op, or listed twice";
    t[i] = r;
  }
  return t;
}

constexpr std::array<OpRule, kOps> kByOp = by_op();

}  // namespace

const OpRule& op_rule(Op op) {
  static constexpr OpRule kUnserved{};
  const size_t i = size_t(op);
  return i < kOps && kByOp[i].name ? kByOp[i] : kUnserved;
}

}  // namespace simnic::service::control
