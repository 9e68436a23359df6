// The QP state changes and what each state implies (IBA 10.3, 10.8, 11.2.4).
#include "simnic/core/objects/qp_states.h"

#include <cstdio>
#include <string>
#include <string_view>

#include "simnic/core/objects/qp_state_table.h"
#include "simnic/core/text.h"

namespace simnic::core {

void QpStates::set_qp_state(Qp& qp, ibv_qp_state state, const char* cause, uint32_t mask) {
  if (qp.req.lent) hooks_.end_lend(qp);  // the program's packet, if it sent one, counts as sent before the change
  ibv_qp_state from = qp.state;
  if (tracer_.on())
    tracer_.event(TraceKind::kQpState)
        .u("qp", qp.qpn)
        .s("from", qp_state_name(from))
        .s("to", qp_state_name(state))
        .s("mask", mask ? qp_attr_mask_names(mask) : "")
        .s("cause", cause)
        .raw("attr", trace_points_.qp_attr_json(qp));
  if (state == IBV_QPS_RESET) qp.error_reason.clear();
  if ((state == IBV_QPS_ERR || state == IBV_QPS_SQE) && qp.error_reason.empty())
    qp.error_reason = std::string_view(cause) == "modify_qp"
                          ? "the application moved it to " + std::string(qp_state_name(state)) + " with ibv_modify_qp"
                          : std::string(cause);
  if (state == IBV_QPS_ERR && from != IBV_QPS_ERR && std::string_view(cause) != "modify_qp")
    journal_.log(LogLevel::kWarn,
                 "QP " + hex(qp.qpn) + " " + qp_state_name(from) + "->ERR (" + cause +
                     "): its work requests, posted and still to come, complete with IBV_WC_WR_FLUSH_ERR "
                     "until it is reset (IBA 10.3.1.1)");
  qp.state = state;
  qp.attr.qp_state = state;
  qp.shm->state.store(state, std::memory_order_release);
  if (qp.req.sq_watched) {  // posts ring again; the flush or wake below reads the SQ after this
    qp.req.sq_watched = false;
    abi::stop_watching_sq(*qp.shm);
  }
  if (state != IBV_QPS_SQD) qp.sq_draining = false;
  switch (state) {
    case IBV_QPS_RESET: reset_qp(qp); break;
    case IBV_QPS_RTR:
      if (from == IBV_QPS_INIT) {
        qp.resp.msn = 0;
        qp.resp.nak_sent = false;
        qp.resp.recv.reset();
      }
      break;
    case IBV_QPS_RTS:
      if (from == IBV_QPS_RTR) {
        qp.comp.una_psn = qp.req.next_psn = qp.req.psn_end = qp.comp.rd_psn = qp.attr.sq_psn;
        qp.req.msn_started = qp.comp.msn_retired = 0;  // the peer's MSN starts at 0 in RTR too
        qp.comp.retry_left = qp.attr.retry_cnt;
        qp.comp.rnr_retry_left = qp.attr.rnr_retry;
      }
      hooks_.wake(qp);  // WQEs may have been posted before RTS
      break;
    case IBV_QPS_SQD:
      if (from == IBV_QPS_RTS) {
        qp.sq_draining = true;
        check_sq_drained(qp);  // nothing in flight: drained at once
      }
      break;
    case IBV_QPS_ERR:
      qp.comp.timer_deadline_ns = 0;
      hooks_.forget_busy(qp);
      completions_.flush_qp(qp);
      break;
    case IBV_QPS_SQE:
      hooks_.requester_idle(qp);
      completions_.flush_sq(qp);
      break;
    default: break;
  }
  // Out of RTS/SQD (ERR, SQE, RESET) a QP holds no credit towards its peer (congestion.h).
  hooks_.sync_credit(qp);
}

// SQD: once every WQE that had begun has completed, the drain is over; the SQ Drained
// affiliated event goes out if the RTS->SQD modify asked for it (IBV_QP_EN_SQD_ASYNC_NOTIFY).
void QpStates::check_sq_drained(Qp& qp) {
  if (qp.state != IBV_QPS_SQD || !qp.sq_draining || qp.comp.sq_consumer != qp.req.sq_started) return;
  qp.sq_draining = false;
  char line[96];
  std::snprintf(line, sizeof line, "QP 0x%x SQ drained%s", qp.qpn,
                qp.attr.en_sqd_async_notify ? " (IBV_EVENT_SQ_DRAINED sent)" : "");
  journal_.log(LogLevel::kInfo, line);
  if (qp.attr.en_sqd_async_notify) completions_.send_async_event(qp.ctx, IBV_EVENT_SQ_DRAINED, qp.handle);
}

// RESET discards every WQE without a completion and forgets all transport state.
void QpStates::reset_qp(Qp& qp) {
  uint32_t sq_prod = qp.shm->sq.producer.value.load(std::memory_order_acquire);
  qp.shm->sq.consumer.value.store(sq_prod, std::memory_order_release);
  if (qp.rq_entries) {
    uint32_t rq_prod = qp.shm->rq.producer.value.load(std::memory_order_acquire);
    qp.shm->rq.consumer.value.store(rq_prod, std::memory_order_release);
  }
  for (auto& s : qp.sq_state) s = SendWqeState{};
  // Every engine starts over; RTR and RTS set the PSNs and retry counts again.
  qp.req = QpRequester{};
  qp.comp = QpCompleter{};
  qp.resp = QpResponder{};
  qp.shm->receives_awaited.store(0, std::memory_order_relaxed);  // the requests that waited are gone
  qp.comp.sq_consumer = qp.req.sq_next = sq_prod;
  qp.req.sq_started = qp.req.sq_fetched = qp.req.sq_seen = sq_prod;
  qp.resp.rq_seen = qp.rq_entries ? qp.shm->rq.producer.value.load(std::memory_order_acquire) : 0;
  hooks_.forget_busy(qp);
  ibv_qp_cap cap = qp.cap;
  qp.attr = ibv_qp_attr{};
  qp.attr.cap = cap;
  qp.attr.qp_state = IBV_QPS_RESET;
  qp.attr.path_mtu = IBV_MTU_1024;
  qp.attr.path_mig_state = IBV_MIG_MIGRATED;
}

}  // namespace simnic::core
