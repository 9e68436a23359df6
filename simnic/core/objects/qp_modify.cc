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

int QueueVerbs::check_qp_attr_values(const Qp& qp, const ibv_qp_attr& a, int mask, std::string* why) {
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
    if (dev_.addressing().resolve_av(a.ah_attr, &ip, why)) return EINVAL;
  }
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a.max_rd_atomic > DeviceLimits::kMaxRdAtomic)
    return fail("max_rd_atomic " + std::to_string(a.max_rd_atomic) + " exceeds max_qp_init_rd_atom " +
                std::to_string(DeviceLimits::kMaxRdAtomic));
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a.max_dest_rd_atomic > DeviceLimits::kMaxRdAtomic)
    return fail("max_dest_rd_atomic " + std::to_string(a.max_dest_rd_atomic) + " exceeds max_qp_rd_atom " +
                std::to_string(DeviceLimits::kMaxRdAtomic));
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

int QueueVerbs::modify_qp(Context* ctx, uint32_t handle, const ibv_qp_attr& attr, int mask, uint64_t now) {
  dev_.set_time(now);
  Qp* qp = dev_.tables().owned(dev_.qps_, ctx, handle);
  if (!qp) qp = dev_.xrc_verbs().opened_qp(ctx, handle);  // an XRC TGT QP opened with ibv_open_qp
  if (!qp) return EINVAL;
  mask = int(xrc_ignored_attrs_removed(qp->type, uint32_t(mask)));
  ibv_qp_state cur = (mask & IBV_QP_CUR_STATE) ? attr.cur_qp_state : qp->state;
  ibv_qp_state next = (mask & IBV_QP_STATE) ? attr.qp_state : cur;
  std::string why;
  // Every refusal is logged and traced with the rule that was broken, and the application is
  // told the same (take_refusal).
  auto reject = [&](const std::string&) {
    std::string refusal = "QP " + hex(qp->qpn) + " " + qp_state_name(cur) + "->" + qp_state_name(next) + ": " + why;
    dev_.journal().log(LogLevel::kWarn, "modify_qp " + refusal + " (EINVAL)");
    dev_.tracer_.event(TraceKind::kError).u("qp", qp->qpn).s("status", "EINVAL").s("rule", why);
    return dev_.journal().refuse(EINVAL, std::move(refusal));
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

void QueueVerbs::apply_qp_attr(Qp& qp, const ibv_qp_attr& a, int mask, uint64_t now) {
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
    qp.req.next_psn = qp.req.psn_end = qp.comp.una_psn = qp.comp.rd_psn = q.sq_psn;
  }
  if (mask & IBV_QP_RQ_PSN) qp.resp.epsn = q.rq_psn;
  if (mask & IBV_QP_AV) {
    std::string unused;  // check_qp_attr_values resolved it a moment ago
    dev_.addressing().resolve_av(q.ah_attr, &qp.remote_ip, &unused);
  }
  if (mask & IBV_QP_PATH_MTU) qp.mtu_bytes = std::min(mtu_to_bytes(q.path_mtu), dev_.config_.mtu_bytes);
  if (mask & IBV_QP_RETRY_CNT) qp.comp.retry_left = q.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) qp.comp.rnr_retry_left = q.rnr_retry;

  if (!(mask & IBV_QP_STATE) && dev_.tracer_.on()) {
    // Attributes changed within a state (IBA 11.2.4.2 allows some in RTS and SQD): traced as a
    // move to the same state, so a viewer's attribute panel stays true.
    dev_.tracer_.event(TraceKind::kQpState)
        .u("qp", qp.qpn)
        .s("from", qp_state_name(qp.state))
        .s("to", qp_state_name(qp.state))
        .s("mask", qp_attr_mask_names(uint32_t(mask)))
        .s("cause", "modify_qp")
        .raw("attr", dev_.trace_points().qp_attr_json(qp));
  }
  if (mask & IBV_QP_STATE) {
    ibv_qp_state from = qp.state;
    dev_.qp_states().set_qp_state(qp, a.qp_state, "modify_qp", uint32_t(mask));
    char line[160];
    std::snprintf(line, sizeof line, "QP 0x%x %s->%s", qp.qpn, qp_state_name(from), qp_state_name(a.qp_state));
    dev_.journal().log(LogLevel::kInfo, line);
  }
}

int QueueVerbs::query_qp(Context* ctx, uint32_t handle, ibv_qp_attr* attr, Qp** out) {
  Qp* qp = dev_.tables().owned(dev_.qps_, ctx, handle);
  if (!qp) qp = dev_.xrc_verbs().opened_qp(ctx, handle);  // an XRC TGT QP opened with ibv_open_qp
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
