// The completer's timers (IBA 9.7.6.1: the requester's ACK timeout, and the RNR wait of
// IBA 9.7.5.2.8): armed when packets go out or an RNR NAK comes in, stopped when everything is
// acknowledged, fired from on_timer. A fired timer goes back N; the requester resends what
// that scheduled when the event ends.
#include <algorithm>

#include "simnic/core/device.h"
#include "simnic/core/errors.h"
#include "simnic/core/text.h"

namespace simnic::core {

namespace {

constexpr uint64_t kMinAckTimeoutNs = 8'000'000;  // a loopback RTT is tens of µs; don't spin

}  // namespace

// RNR NAK timer field -> nanoseconds (IBA Table 45: 0 is 655.36 ms, 1 is 0.01 ms, ...,
// 31 is 491.52 ms). The table is in units of 10 µs.
uint64_t Device::rnr_timer_ns(uint32_t t) {
  static const uint32_t k10Us[32] = {
      65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768,
      1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
  return uint64_t(k10Us[t & 31]) * 10'000;
}

void Device::arm_ack_timer(Qp& qp, uint64_t now) {
  if (qp.attr.timeout == 0) {  // 0 means "wait forever" (IBA 11.2.4.2)
    qp.comp.timer_deadline_ns = 0;
    return;
  }
  uint64_t ns = 4096ull << qp.attr.timeout;  // 4.096 µs * 2^timeout
  bool was_idle = qp.comp.timer_deadline_ns == 0;
  qp.comp.timer_deadline_ns = now + std::max(ns, kMinAckTimeoutNs);
  qp.comp.timer_answered_seq = peer_progress_[qp.remote_ip].answered;
  qp.comp.timer_cpu_wait_ns = host_cpu_wait_ns_;
  if (was_idle)
    tracer_.event(TraceKind::kTimer).u("qp", qp.qpn).s("what", "ack_timeout").s("action", "armed").u("due_ns", qp.comp.timer_deadline_ns);
}

void Device::stop_ack_timer(Qp& qp) {
  if (qp.comp.timer_deadline_ns)
    tracer_.event(TraceKind::kTimer).u("qp", qp.qpn).s("what", "ack_timeout").s("action", "stopped");
  qp.comp.timer_deadline_ns = 0;
}

// The requester waits out an RNR NAK's timer, then resends from `psn`.
void Device::arm_rnr_timer(Qp& qp, uint32_t psn, uint32_t timer_field, uint64_t now) {
  qp.comp.rnr_wait = true;
  qp.comp.una_psn = psn;
  qp.comp.timer_deadline_ns = now + rnr_timer_ns(timer_field);
  cc_sync(qp, true);  // the responder dropped what followed: nothing in flight while waiting
  tracer_.event(TraceKind::kTimer).u("qp", qp.qpn).s("what", "rnr_wait").s("action", "armed").u("due_ns", qp.comp.timer_deadline_ns);
  busy_qps_.erase(qp.qpn);
}

uint64_t Device::next_deadline() const {
  uint64_t best = cm_->next_deadline();
  for (const auto& [h, qp] : qps_)
    if (qp->comp.timer_deadline_ns && (!best || qp->comp.timer_deadline_ns < best)) best = qp->comp.timer_deadline_ns;
  return best;
}

void Device::on_timer(uint64_t now) {
  set_time(now);
  cm_->on_timer(now);
  std::vector<Qp*> due;
  for (auto& [h, qp] : qps_)
    if (qp->comp.timer_deadline_ns && qp->comp.timer_deadline_ns <= now) due.push_back(qp.get());
  for (Qp* qp : due) completer_timer_fired(*qp, now);
  run_scheduled(now);
}

void Device::completer_timer_fired(Qp& qp, uint64_t now) {
  qp.comp.timer_deadline_ns = 0;
  if (!qp.sq_running()) return;  // SQD still retransmits what it is draining
  if (qp.comp.rnr_wait) {  // the RNR wait is over: try again from the NAKed PSN
    qp.comp.rnr_wait = false;
    tracer_.event(TraceKind::kTimer).u("qp", qp.qpn).s("what", "rnr_wait").s("action", "fired");
    go_back_n(qp, qp.comp.una_psn, now, "rnr");
    return;
  }
  if (qp.comp.sq_consumer == qp.req.sq_started) return;  // everything was acknowledged meanwhile
  // Nothing unacknowledged: the QP is waiting for credit towards its peer (congestion.h), or for
  // its turn, not for the peer. No retry is spent; the next packet sent arms the timer again.
  if (qp.comp.una_psn == qp.req.next_psn) return;
  if (ack_wait_is_a_queue(qp, now) || peer_may_be_waiting_for_a_cpu(qp, now)) return;
  qp.comp.silent_since_ns = 0;
  log_limited(LogLevel::kWarn, "ack_timeout", qp.qpn, [&] {
    return "QP " + hex(qp.qpn) + ": no ACK from " + ip_string(qp.remote_ip) + " for PSN " + hex(qp.comp.una_psn) +
           " within the ACK timeout (" +
           (peer_progress_[qp.remote_ip].answered > qp.req.last_seq ? "the peer answered packets sent after it"
                                                                      : "the peer answered nothing meanwhile") +
           "); " +
           (qp.comp.retry_left ? "retransmitting (" + std::to_string(qp.comp.retry_left) + " of retry_cnt=" +
                                std::to_string(qp.attr.retry_cnt) + " retries left)"
                          : std::string("no retries left")) +
           ". Is the peer's QP in RTR/RTS, with this QP's QPN as its dest_qp_num?";
  });
  ++counters_.timeouts;
  ++qp.counters.timeouts;
  cc_loss(qp);
  tracer_.event(TraceKind::kTimer).u("qp", qp.qpn).s("what", "ack_timeout").s("action", "fired");
  if (qp.comp.retry_left == 0) {
    requester_error(qp, Error::kRetryExceeded,
                    "no ACK within the local ACK timeout (4.096us * 2^" + std::to_string(qp.attr.timeout) +
                        ") after retry_cnt=" + std::to_string(qp.attr.retry_cnt) + " retries");
    return;
  }
  --qp.comp.retry_left;
  go_back_n(qp, qp.comp.una_psn, now, "timeout");
}

// --- A queue is not a loss ---
//
// Between simnicds the "wire" is the peer NIC's UDP socket: one FIFO per peer, read as fast as
// the host lets the peer NIC run. Everything this NIC has in flight towards the peer (up to the
// peer window, all QPs together: congestion.h) is read before a packet sent after it, so on a
// busy host the wait for an ACK is the time the peer takes to read that whole queue, and it can
// exceed the Local ACK Timeout (IBA 9.7.6.1.3; 8 ms at least here) with nothing lost. A real
// RNIC's wire never waits for a host, so the timer must not count that wait: retries
// (retry_cnt, IBA 9.7.5.1, C9-140 ff.) are for lost packets.
//
// Every packet an RC/XRC requester sends to a peer gets a number (PeerProgress::sent); a WQE
// remembers its last packet's, and when an ACK retires the WQE the peer has read at least that
// far (PeerProgress::answered). When a QP's ACK timer expires:
//  - the peer answered a packet sent after this QP's latest one: it read past all of ours (the
//    last packet before a QP pauses always asks for an ACK), so a packet of ours or its ACK was
//    lost: a timeout, a retry spent, exactly as before;
//  - the peer answered nothing since the timer was armed: it is gone, or everything towards it
//    was lost: a timeout, a retry spent, exactly as before (a single QP's lost last packet);
//  - the peer answered packets sent before ours, and more of them than when the timer was
//    armed: it is alive and still reading the queue ahead of our packet. The timer is armed
//    again for a full timeout from now, without a retry (counted in timeouts_deferred).
// The third case ends: the queue ahead of a packet is finite, so the peer either reaches it
// (ACK, or an answer past it: the first case) or stops answering (the second). Fault
// injection's losses are detected as before: a lost packet is followed by others the peer
// answers. Reordering (--reorder) breaks the FIFO; then a late packet may be resent, as before.

void Device::note_request_sent(Qp& qp, SendWqeState& st, bool last_packet) {
  if (!qp.acked()) return;
  const uint64_t seq = ++peer_progress_[qp.remote_ip].sent;
  qp.req.last_seq = seq;
  if (last_packet) st.last_seq = seq;  // the last packet always asks for an ACK
}

// An ACK retires `st`: the peer has read every packet this NIC sent it up to st's last one.
void Device::note_peer_answered(Qp& qp, const SendWqeState& st) {
  if (!st.last_seq) return;
  PeerProgress& peer = peer_progress_[qp.remote_ip];
  peer.answered = std::max(peer.answered, st.last_seq);
}

// The third case above: a full timeout again from now.
bool Device::ack_wait_is_a_queue(Qp& qp, uint64_t now) {
  const PeerProgress& peer = peer_progress_[qp.remote_ip];
  if (peer.answered > qp.req.last_seq) return false;              // read past ours: lost
  if (peer.answered == qp.comp.timer_answered_seq) return false;  // silent: lost or gone
  qp.comp.silent_since_ns = 0;
  arm_ack_timer(qp, now);
  ++counters_.timeouts_deferred;
  tracer_.event("timer").u("qp", qp.qpn).s("what", "ack_timeout").s("action", "deferred")
      .u("queued_ahead", qp.req.last_seq - peer.answered).u("due_ns", qp.comp.timer_deadline_ns);
  return true;
}

// A silent peer on a busy host. When some task waited for a CPU during at least half of the
// timeout (PSI), the peer NIC may be one of them: it has read nothing, so it answers nothing.
// The timer is put off, for at most kMaxSilentWaitNs of silence per lost-packet decision; a peer
// silent longer is counted as gone (a timeout, a retry), as it is at once on a quiet host.
bool Device::peer_may_be_waiting_for_a_cpu(Qp& qp, uint64_t now) {
  constexpr uint64_t kMaxSilentWaitNs = 500'000'000;
  const uint64_t timeout = std::max(uint64_t(4096) << qp.attr.timeout, kMinAckTimeoutNs);
  const uint64_t waited = host_cpu_wait_ns_ - std::min(host_cpu_wait_ns_, qp.comp.timer_cpu_wait_ns);
  if (waited * 2 < timeout) return false;  // a quiet host: silence means loss
  if (!qp.comp.silent_since_ns) qp.comp.silent_since_ns = now;
  if (now - qp.comp.silent_since_ns >= kMaxSilentWaitNs) return false;
  const uint64_t since = qp.comp.silent_since_ns;
  arm_ack_timer(qp, now);
  qp.comp.silent_since_ns = since;
  ++counters_.timeouts_deferred;
  tracer_.event("timer").u("qp", qp.qpn).s("what", "ack_timeout").s("action", "deferred")
      .s("why", "host_busy").u("due_ns", qp.comp.timer_deadline_ns);
  return true;
}

}  // namespace simnic::core
