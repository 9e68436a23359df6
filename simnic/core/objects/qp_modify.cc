// The QP state machine as ibv_modify_qp drives it: check against the transition table,
// check the values, then apply (IBA 10.3, 11.2.4; the kernel's ib_modify_qp_is_ok).
#include <cerrno>
#include <cstring>
#include <string_view>

#include "simnic/core/device.h"
#include "simnic/core/objects/qp_state_table.h"
#include "simnic/core/text.h"
#include "simnic/proto/psn.h"

namespace simnic::core {

int Device::check_qp_attr_values(const Qp& qp, const ibv_qp_attr& a, int mask, std::string* why) {
  (void)qp;
  auto fail = [&](const std::string& s) {
    *why = s;
    return EINVAL;
  };
  if ((mask & IBV_QP_PORT) && a.port_num != 1)
    return fail("port_num " + std::to_string(a.port_num) + " does not exist (the NIC has port 1)");
  if ((mask & IBV_QP_PKEY_INDEX) && a.pkey_index != 0)
    return fail("pkey_index " + std::to_string(a.pkey_index) + " is beyond the P_Key table (1 entry)");
  if (mask & IBV_QP_PATH_MTU) {
    uint32_t b = mtu_to_bytes(a.path_mtu);
    if (b == 0) return fail("path_mtu " + std::to_string(a.path_mtu) + " is not an ibv_mtu value");
  }
  if (mask & IBV_QP_AV) {
    // The GRH's GIDs on RoCE, the DLID in InfiniBand mode (address.cc).
    uint32_t ip = 0;
    if (resolve_av(a.ah_attr, &ip, why)) return EINVAL;
  }
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a.max_rd_atomic > DeviceLimits::kMaxRdAtomic)
    return fail("max_rd_atomic " + std::to_string(a.max_rd_atomic) + " exceeds max_qp_init_rd_atom 16");
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a.max_dest_rd_atomic > DeviceLimits::kMaxRdAtomic)
    return fail("max_dest_rd_atomic " + std::to_string(a.max_dest_rd_atomic) + " exceeds max_qp_rd_atom 16");
  if ((mask & IBV_QP_TIMEOUT) && a.timeout > 31) return fail("timeout " + std::to_string(a.timeout) + " is over 31");
  if ((mask & IBV_QP_RETRY_CNT) && a.retry_cnt > 7)
    return fail("retry_cnt " + std::to_string(a.retry_cnt) + " is over 7");
  if ((mask & IBV_QP_RNR_RETRY) && a.rnr_retry > 7)
    return fail("rnr_retry " + std::to_string(a.rnr_retry) + " is over 7");
  if ((mask & IBV_QP_MIN_RNR_TIMER) && a.min_rnr_timer > 31)
    return fail("min_rnr_timer " + std::to_string(a.min_rnr_timer) + " is over 31");
  if ((mask & IBV_QP_DEST_QPN) && a.dest_qp_num > proto::kPsnMask)
    return fail("dest_qp_num " + hex(a.dest_qp_num) + " is over 24 bits");
  // qp_access_flags are taken as given, other bits too (IBV_ACCESS_ON_DEMAND when a program
  // passes its MRs' flags): rxe_qp_from_attr copies them unchecked, and only the remote rights
  // (IBA 11.2.4.2, "Remote Access Enable") mean anything to a QP.
  if ((mask & IBV_QP_CAP)) return fail("resizing a QP (IBV_QP_CAP) is not supported");
  return 0;
}

int Device::modify_qp(Context* ctx, uint32_t handle, const ibv_qp_attr& attr, int mask, uint64_t now) {
  set_time(now);
  Qp* qp = owned(qps_, ctx, handle);
  if (!qp) qp = opened_qp(ctx, handle);  // an XRC TGT QP opened with ibv_open_qp
  if (!qp) return EINVAL;
  mask = int(xrc_ignored_attrs_removed(qp->type, uint32_t(mask)));
  ibv_qp_state cur = (mask & IBV_QP_CUR_STATE) ? attr.cur_qp_state : qp->state;
  ibv_qp_state next = (mask & IBV_QP_STATE) ? attr.qp_state : cur;
  std::string why;
  // Every refusal is logged and traced with the rule that was broken, and the application is
  // told the same (take_refusal).
  auto reject = [&](const std::string&) {
    refusal_ = "QP " + hex(qp->qpn) + " " + qp_state_name(cur) + "->" + qp_state_name(next) + ": " + why;
    log(LogLevel::kWarn, "modify_qp " + refusal_ + " (EINVAL)");
    tracer_.event(TraceKind::kError).u("qp", qp->qpn).s("status", "EINVAL").s("rule", why);
    return EINVAL;
  };
  if (!qp_modify_is_ok(cur, next, qp->type, uint32_t(mask), &why)) return reject("");
  // While an SQD QP is still draining, it may only go to ERR or RESET: resuming (rxe refuses
  // the same) or changing attributes (IBA 11.2.4.2: SQD->SQD once drained) must wait for
  // IBV_EVENT_SQ_DRAINED, or for sq_draining = 0 in ibv_query_qp.
  if (cur == IBV_QPS_SQD && qp->state == IBV_QPS_SQD && qp->sq_draining &&
      (next == IBV_QPS_RTS || (next == IBV_QPS_SQD && (mask & ~IBV_QP_STATE & ~IBV_QP_EN_SQD_ASYNC_NOTIFY)))) {
    why = next == IBV_QPS_RTS ? "the send queue is still draining: wait for IBV_EVENT_SQ_DRAINED before SQD->RTS"
                              : "attributes can change in SQD only once the send queue has drained";
    return reject("");
  }
  if (check_qp_attr_values(*qp, attr, mask, &why)) return reject("");
  apply_qp_attr(*qp, attr, mask, now);
  return 0;
}

void Device::apply_qp_attr(Qp& qp, const ibv_qp_attr& a, int mask, uint64_t now) {
  (void)now;
  ibv_qp_attr& q = qp.attr;
  if (mask & IBV_QP_PKEY_INDEX) q.pkey_index = a.pkey_index;
  if (mask & IBV_QP_PORT) q.port_num = a.port_num;
  if (mask & IBV_QP_QKEY) q.qkey = a.qkey;
  if (mask & IBV_QP_ACCESS_FLAGS) q.qp_access_flags = a.qp_access_flags;
  if (mask & IBV_QP_PATH_MTU) q.path_mtu = a.path_mtu;
  if (mask & IBV_QP_AV) q.ah_attr = a.ah_attr;
  if (mask & IBV_QP_DEST_QPN) q.dest_qp_num = a.dest_qp_num;
  if (mask & IBV_QP_RQ_PSN) q.rq_psn = a.rq_psn & proto::kPsnMask;
  if (mask & IBV_QP_SQ_PSN) q.sq_psn = a.sq_psn & proto::kPsnMask;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) q.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) q.max_rd_atomic = a.max_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) q.min_rnr_timer = a.min_rnr_timer;
  if (mask & IBV_QP_TIMEOUT) q.timeout = a.timeout;
  if (mask & IBV_QP_RETRY_CNT) q.retry_cnt = a.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) q.rnr_retry = a.rnr_retry;
  // The SQ Drained event is asked for per RTS->SQD move, not remembered from an earlier one.
  if ((mask & IBV_QP_STATE) && a.qp_state == IBV_QPS_SQD && qp.state == IBV_QPS_RTS)
    q.en_sqd_async_notify = (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) ? a.en_sqd_async_notify : 0;
  if (mask & IBV_QP_SQ_PSN) {
    qp.req.next_psn = qp.comp.una_psn = qp.comp.rd_psn = q.sq_psn;
  }
  if (mask & IBV_QP_RQ_PSN) qp.resp.epsn = q.rq_psn;
  if (mask & IBV_QP_AV) {
    std::string unused;  // check_qp_attr_values resolved it a moment ago
    resolve_av(q.ah_attr, &qp.remote_ip, &unused);
  }
  if (mask & IBV_QP_PATH_MTU) qp.mtu_bytes = std::min(mtu_to_bytes(q.path_mtu), config_.mtu_bytes);
  if (mask & IBV_QP_RETRY_CNT) qp.comp.retry_left = q.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) qp.comp.rnr_retry_left = q.rnr_retry;

  if (!(mask & IBV_QP_STATE) && tracer_.on()) {
    // Attributes changed within a state (IBA 11.2.4.2 allows some in RTS and SQD): traced as a
    // move to the same state, so a viewer's attribute panel stays true.
    tracer_.event(TraceKind::kQpState)
        .u("qp", qp.qpn)
        .s("from", qp_state_name(qp.state))
        .s("to", qp_state_name(qp.state))
        .s("mask", qp_attr_mask_names(uint32_t(mask)))
        .s("cause", "modify_qp")
        .raw("attr", qp_attr_json(qp));
  }
  if (mask & IBV_QP_STATE) {
    ibv_qp_state from = qp.state;
    set_qp_state(qp, a.qp_state, "modify_qp", uint32_t(mask));
    char line[160];
    std::snprintf(line, sizeof line, "QP 0x%x %s->%s", qp.qpn, qp_state_name(from), qp_state_name(a.qp_state));
    log(LogLevel::kInfo, line);
  }
}

void Device::set_qp_state(Qp& qp, ibv_qp_state state, const char* cause, uint32_t mask) {
  ibv_qp_state from = qp.state;
  if (tracer_.on())
    tracer_.event(TraceKind::kQpState)
        .u("qp", qp.qpn)
        .s("from", qp_state_name(from))
        .s("to", qp_state_name(state))
        .s("mask", mask ? qp_attr_mask_names(mask) : "")
        .s("cause", cause)
        .raw("attr", qp_attr_json(qp));
  if (state == IBV_QPS_RESET) qp.error_reason.clear();
  if ((state == IBV_QPS_ERR || state == IBV_QPS_SQE) && qp.error_reason.empty())
    qp.error_reason = std::string_view(cause) == "modify_qp"
                          ? "the application moved it to " + std::string(qp_state_name(state)) + " with ibv_modify_qp"
                          : std::string(cause);
  if (state == IBV_QPS_ERR && from != IBV_QPS_ERR && std::string_view(cause) != "modify_qp")
    log(LogLevel::kWarn, "QP " + hex(qp.qpn) + " " + qp_state_name(from) + "->ERR (" + cause +
                             "): its work requests, posted and still to come, complete with IBV_WC_WR_FLUSH_ERR "
                             "until it is reset (IBA 10.3.1.1)");
  qp.state = state;
  qp.attr.qp_state = state;
  qp.shm->state.store(state, std::memory_order_release);
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
        qp.comp.una_psn = qp.req.next_psn = qp.comp.rd_psn = qp.attr.sq_psn;
        qp.req.msn_started = qp.comp.msn_retired = 0;  // the peer's MSN starts at 0 in RTR too
        qp.comp.retry_left = qp.attr.retry_cnt;
        qp.comp.rnr_retry_left = qp.attr.rnr_retry;
      }
      requester_.mark_busy(qp);  // WQEs may have been posted before RTS
      break;
    case IBV_QPS_SQD:
      if (from == IBV_QPS_RTS) {
        qp.sq_draining = true;
        check_sq_drained(qp);  // nothing in flight: drained at once
      }
      break;
    case IBV_QPS_ERR:
      qp.comp.timer_deadline_ns = 0;
      requester_.not_busy(qp);
      flush_qp(qp);
      break;
    case IBV_QPS_SQE:
      requester_.idle(qp);
      flush_sq(qp);
      break;
    default: break;
  }
  // Out of RTS/SQD (ERR, SQE, RESET) a QP holds no credit towards its peer (congestion.h).
  congestion_.sync(qp, true);
}

// SQD: once every WQE that had begun has completed, the drain is over; the SQ Drained
// affiliated event goes out if the RTS->SQD modify asked for it (IBV_QP_EN_SQD_ASYNC_NOTIFY).
void Device::check_sq_drained(Qp& qp) {
  if (qp.state != IBV_QPS_SQD || !qp.sq_draining || qp.comp.sq_consumer != qp.req.sq_started) return;
  qp.sq_draining = false;
  char line[96];
  std::snprintf(line, sizeof line, "QP 0x%x SQ drained%s", qp.qpn,
                qp.attr.en_sqd_async_notify ? " (IBV_EVENT_SQ_DRAINED sent)" : "");
  log(LogLevel::kInfo, line);
  if (qp.attr.en_sqd_async_notify) send_async_event(qp.ctx, IBV_EVENT_SQ_DRAINED, qp.handle);
}

// RESET discards every WQE without a completion and forgets all transport state.
void Device::reset_qp(Qp& qp) {
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
  qp.comp.sq_consumer = qp.req.sq_next = sq_prod;
  qp.req.sq_started = qp.req.sq_fetched = qp.req.sq_seen = sq_prod;
  qp.resp.rq_seen = qp.rq_entries ? qp.shm->rq.producer.value.load(std::memory_order_acquire) : 0;
  requester_.not_busy(qp);
  ibv_qp_cap cap = qp.cap;
  qp.attr = ibv_qp_attr{};
  qp.attr.cap = cap;
  qp.attr.qp_state = IBV_QPS_RESET;
  qp.attr.path_mtu = IBV_MTU_1024;
  qp.attr.path_mig_state = IBV_MIG_MIGRATED;
}

int Device::query_qp(Context* ctx, uint32_t handle, ibv_qp_attr* attr, Qp** out) {
  Qp* qp = owned(qps_, ctx, handle);
  if (!qp) qp = opened_qp(ctx, handle);  // an XRC TGT QP opened with ibv_open_qp
  if (!qp) return EINVAL;
  *attr = qp->attr;
  attr->qp_state = qp->state;
  attr->cur_qp_state = qp->state;
  attr->cap = qp->cap;
  attr->sq_draining = qp->sq_draining;
  *out = qp;
  return 0;
}

}  // namespace simnic::core
