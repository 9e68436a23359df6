// The event entry points that start the engines (a doorbell, a turn of pending work; a packet
// is in ingress.cc, a timer in completer_timers.cc), and how the engines schedule each other.
// As in rxe, an engine never runs another directly: the completer or a fired timer that wants
// the requester to send sets the QP's work flag, and the entry point that is handling the
// event runs what was scheduled before it returns.
#include "simnic/core/device.h"

namespace simnic::core {

void Requester::schedule(Qp& qp, uint8_t work) {
  if (!qp.work) scheduled_.push_back(qp.qpn);
  qp.work |= work;
}

void Requester::run_scheduled(uint64_t now) {
  while (!scheduled_.empty()) {
    std::vector<uint32_t> qpns;
    qpns.swap(scheduled_);
    for (uint32_t qpn : qpns) {
      Qp* qp = dev_.tables().find_qp_by_qpn(qpn);  // it may have been destroyed meanwhile
      if (!qp) continue;
      const uint8_t work = qp->work;
      qp->work = 0;
      if (work & kWorkRequester) run(*qp, now);
    }
  }
}

void Requester::on_doorbell(Context* ctx, uint64_t now, uint64_t rings) {
  dev_.set_time(now);
  // Before any producer index is read (abi::open_doorbell_gate says why that order matters).
  abi::open_doorbell_gate(ctx->shared);
  dev_.tracer_.event(TraceKind::kDoorbell).u("ctx", ctx->id).u("rings", rings);
  for (uint32_t h : std::vector<uint32_t>(ctx->qps)) {
    auto it = dev_.qps_.find(h);
    if (it == dev_.qps_.end()) continue;
    Qp& qp = *it->second;
    if (dev_.tracer_.on()) dev_.trace_points().trace_new_wqes(qp);
    if (qp.state == IBV_QPS_ERR) dev_.completions().flush_qp(qp);
    else if (qp.state == IBV_QPS_SQE) dev_.completions().flush_sq(qp);
    else if (qp.state == IBV_QPS_RTS) schedule(qp, kWorkRequester);
  }
  run_scheduled(now);
}

// A turn for the QPs that stopped early to let the event loop breathe (busy_qps_).
void Requester::run_pending(uint64_t now) {
  dev_.set_time(now);
  std::vector<Qp*> busy;
  for (auto& [qpn, qp] : busy_qps_) busy.push_back(qp);
  for (Qp* qp : busy) {
    if (!dev_.tables().find_qp_by_qpn(qp->qpn)) continue;
    const bool reads_done = responder_.send_read_responses(*qp, burst_);
    if (qp->sq_running()) run(*qp, now);            // leaves the busy set by itself (idle) when done
    else if (reads_done) busy_qps_.erase(qp->qpn);  // RTR: only its responder had work, and is done
    if (!reads_done) busy_qps_[qp->qpn] = qp;
  }
  run_scheduled(now);
}

}  // namespace simnic::core
