// Device: creating and destroying RC, UC and UD QPs (XRC QPs: xrc.cc; the state machine:
// qp_modify.cc), and what a QP's errors were.
#include "simnic/core/device.h"
#include "simnic/core/objects/qp_state_table.h"
#include "simnic/core/text.h"

#include <algorithm>
#include <cerrno>

namespace simnic::core {

QueueVerbs::QueueVerbs(Device& dev) : dev_(dev) {}

// Checks what ibv_create_qp asks for against the device (IBA 11.2.5.1 and ibv_query_device's
// limits): 0 or the errno, with the reason.
int QueueVerbs::check_qp_request(Context* ctx, const ibv_qp_init_attr& init, bool has_srq) {
  if (init.qp_type != IBV_QPT_RC && init.qp_type != IBV_QPT_UC && init.qp_type != IBV_QPT_UD)
    return dev_.journal().refuse(EOPNOTSUPP,
                                 "QP type " + std::to_string(init.qp_type) + ": simnic has RC, UC and UD QPs");
  const ibv_qp_cap& c = init.cap;
  if (c.max_send_wr > DeviceLimits::kMaxQpWr || c.max_send_sge > abi::kMaxSge ||
      c.max_inline_data > abi::kMaxInlineData ||
      (!has_srq && (c.max_recv_wr > DeviceLimits::kMaxQpWr || c.max_recv_sge > abi::kMaxSge)))
    return dev_.journal().refuse(
        EINVAL,
        "cap asks for more than the device has (ibv_query_device): max_send_wr and max_recv_wr "
        "at most " +
            std::to_string(DeviceLimits::kMaxQpWr) + ", max_send_sge and max_recv_sge " + std::to_string(abi::kMaxSge) +
            ", max_inline_data " + std::to_string(abi::kMaxInlineData));
  return dev_.budgets().check_room(ctx, dev_.qps_.size(), &Context::qps, DeviceLimits::kMaxQp, "QPs", "max_qp");
}

// The rings of a new QP (of any type) in shared memory, and what every QP starts with in
// RESET. 0, or the errno with nothing charged.
int QueueVerbs::map_qp_queues(Context* ctx, Qp& qp, const QpLayout& layout) {
  if (int e = dev_.budgets().map_queue_memory(ctx, layout.charged, layout.ring_bytes, "simnic-qp", &qp.mem)) return e;
  qp.sq_state.resize(qp.sq_entries);
  auto* base = static_cast<uint8_t*>(qp.mem.addr);
  qp.shm = new (base) abi::QpShared();
  qp.shm->state.store(IBV_QPS_RESET);
  qp.sq = reinterpret_cast<abi::SendWqe*>(base + layout.sq_off);
  qp.rq = reinterpret_cast<abi::RecvWqe*>(base + layout.rq_off);
  qp.attr.qp_state = IBV_QPS_RESET;
  qp.attr.cap = qp.cap;
  qp.attr.path_mtu = IBV_MTU_1024;
  qp.attr.path_mig_state = IBV_MIG_MIGRATED;
  return 0;
}

void set_qp_identity(Qp& qp, const ibv_qp_init_attr& init, Pd* pd, Cq* send_cq) {
  qp.pd = pd;
  qp.send_cq = send_cq;
  qp.type = init.qp_type;
  qp.sq_sig_all = init.sq_sig_all;
}

// Puts a new QP in the tables (its users already counted).
Qp* QueueVerbs::add_qp(std::unique_ptr<Qp> qp) {
  dev_.qp_by_qpn_[qp->qpn] = qp.get();
  dev_.trace_points().trace_qp_lifecycle(TraceKind::kQpCreate, *qp);
  std::vector<uint32_t>& handles = qp->ctx->qps;  // before qp is moved from
  return dev_.insert_object(dev_.qps_, handles, std::move(qp));
}

// Takes a QP out of the tables and frees its rings (its users already let go).
void QueueVerbs::remove_qp(Context* ctx, Qp& qp) {
  dev_.trace_points().trace_qp_lifecycle(TraceKind::kQpDestroy, qp);
  dev_.engines_.windows.unbind_mws_of_qp(qp);
  dev_.engines_.requester.not_busy(qp);
  dev_.engines_.congestion.forget(qp);  // its credit goes back to the peer's window, and it leaves the queue
  dev_.qp_by_qpn_.erase(qp.qpn);
  dev_.budgets().unmap_queue_memory(ctx, qp_layout_of(qp).charged, qp.mem);
  dev_.erase_object(dev_.qps_, ctx->qps, qp.handle);
}

int QueueVerbs::create_qp(Context* ctx, const ibv_qp_init_attr& init, uint32_t pd_handle, uint32_t send_cq,
                          uint32_t recv_cq, uint32_t srq_handle, Qp** out) {
  Pd* pd = dev_.tables().owned(dev_.pds_, ctx, pd_handle);
  Cq* scq = dev_.tables().owned(dev_.cqs_, ctx, send_cq);
  Cq* rcq = dev_.tables().owned(dev_.cqs_, ctx, recv_cq);
  Srq* srq = srq_handle ? dev_.tables().owned(dev_.srqs_, ctx, srq_handle) : nullptr;
  if (!pd || !scq || !rcq || (srq_handle && !srq)) return EINVAL;
  if (int e = check_qp_request(ctx, init, srq != nullptr)) return e;
  auto qp = dev_.make_object<Qp>(ctx);
  qp->qpn = dev_.tables().new_qpn();
  set_qp_identity(*qp, init, pd, scq);
  qp->recv_cq = rcq;
  qp->srq = srq;
  // A UD message is one packet of up to the port's MTU (UD QPs have no path MTU attribute).
  if (qp->type == IBV_QPT_UD) qp->mtu_bytes = dev_.config_.mtu_bytes;
  qp->sq_entries = round_up_pow2(std::max(1u, init.cap.max_send_wr));
  qp->rq_entries = srq ? 0 : round_up_pow2(std::max(1u, init.cap.max_recv_wr));
  qp->cap = {qp->sq_entries, qp->rq_entries, abi::kMaxSge, srq ? 0 : abi::kMaxSge, abi::kMaxInlineData};
  const QpLayout layout = qp_layout(qp->sq_entries, qp->rq_entries);
  if (!dev_.budgets().queue_memory_fits(ctx, layout.charged))
    return dev_.journal().refuse(ENOMEM, "out of queue memory: this program's queues already take " +
                                             std::to_string(ctx->queue_bytes >> 20) + " MiB (at most " +
                                             std::to_string(ContextLimits::kMaxQueueBytes >> 20) +
                                             " MiB per program); smaller "
                                             "max_send_wr/max_recv_wr, or fewer QPs");
  if (int e = map_qp_queues(ctx, *qp, layout)) return e;
  pd->users++;
  scq->users++;
  rcq->users++;
  if (srq) srq->users++;
  *out = add_qp(std::move(qp));
  dev_.journal().log(LogLevel::kInfo, "QP " + hex((*out)->qpn) + " created (" + qp_type_name((*out)->type) + ", sq " +
                                          std::to_string((*out)->sq_entries) + ", rq " +
                                          std::to_string((*out)->rq_entries) + ")");
  return 0;
}

int QueueVerbs::destroy_qp(Context* ctx, uint32_t handle) {
  Qp* qp = dev_.tables().owned(dev_.qps_, ctx, handle);
  if (!qp) return dev_.xrc_verbs().close_opened_qp(ctx, handle);  // an ibv_open_qp handle, or EINVAL
  // As uverbs: a QP still attached to a multicast group cannot be destroyed (a dying process's
  // are detached first, in close_context).
  if (!qp->mcast_gids.empty())
    return dev_.journal().refuse(EBUSY, "QP " + hex(qp->qpn) + " is still attached to " +
                                            std::to_string(qp->mcast_gids.size()) +
                                            " multicast group(s): ibv_detach_mcast them before ibv_destroy_qp");
  if (qp->is_xrc()) return dev_.xrc_verbs().destroy_xrc_qp(ctx, *qp);
  qp->pd->users--;
  qp->send_cq->users--;
  qp->recv_cq->users--;
  if (qp->srq) qp->srq->users--;
  remove_qp(ctx, *qp);
  return 0;
}

}  // namespace simnic::core
