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
// How long unread datagrams in this NIC's own socket may keep a QP's answer-based loss verdict
// off (the grace, below): as long as a peer's queue that does not move (kStalledPeerNs).
constexpr uint64_t kUnreadGraceNs = 3'000'000'000;
// How long a NIC on this host may sit on a queue that does not move before it counts as dead,
// and a program on a PSN it took before it sends the packet (abi/direct_send.h).
constexpr uint64_t kStalledPeerNs = 3'000'000'000;

}  // namespace

// The local ACK timeout the QP's `timeout` attribute asks for (4.096 µs * 2^timeout, IBA
// 9.7.6.1), never below kMinAckTimeoutNs.
uint64_t Completer::ack_timeout_ns(const Qp& qp) {
  return std::max(uint64_t(4096) << qp.attr.timeout, kMinAckTimeoutNs);
}

// RNR NAK timer field -> nanoseconds (IBA Table 45: 0 is 655.36 ms, 1 is 0.01 ms, ...,
// 31 is 491.52 ms). The table is in units of 10 µs.
uint64_t Completer::rnr_timer_ns(uint32_t t) {
  static const uint32_t k10Us[32] = {65536, 1,    2,    3,    4,    6,     8,     12,    16,    24,   32,
                                     48,    64,   96,   128,  192,  256,   384,   512,   768,   1024, 1536,
                                     2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
  return uint64_t(k10Us[t & 31]) * 10'000;
}

void Completer::arm_ack_timer(Qp& qp, uint64_t now) {
  if (qp.attr.timeout == 0) {  // 0 means "wait forever" (IBA 11.2.4.2)
    qp.comp.timer_deadline_ns = 0;
    return;
  }
  bool was_idle = qp.comp.timer_deadline_ns == 0;
  qp.comp.timer_deadline_ns = now + ack_timeout_ns(qp);
  qp.comp.timer_answered_seq = peer_progress_[qp.remote_ip].answered;
  if (was_idle)
    dev_.tracer_.event(TraceKind::kTimer)
        .u("qp", qp.qpn)
        .s("what", "ack_timeout")
        .s("action", "armed")
        .u("due_ns", qp.comp.timer_deadline_ns);
}

void Completer::stop_ack_timer(Qp& qp) {
  if (qp.comp.timer_deadline_ns)
    dev_.tracer_.event(TraceKind::kTimer).u("qp", qp.qpn).s("what", "ack_timeout").s("action", "stopped");
  qp.comp.timer_deadline_ns = 0;
}

// The requester waits out an RNR NAK's timer, then resends from `psn`.
void Completer::arm_rnr_timer(Qp& qp, uint32_t psn, uint32_t timer_field, uint64_t now) {
  qp.comp.rnr_wait = true;
  qp.comp.una_psn = psn;
  qp.comp.timer_deadline_ns = now + rnr_timer_ns(timer_field);
  congestion_.sync(qp, true);  // the responder dropped what followed: nothing in flight while waiting
  dev_.tracer_.event(TraceKind::kTimer)
      .u("qp", qp.qpn)
      .s("what", "rnr_wait")
      .s("action", "armed")
      .u("due_ns", qp.comp.timer_deadline_ns);
  requester_.idle(qp);
}

uint64_t Completer::next_deadline() const {
  uint64_t best = dev_.cm_->next_deadline();
  for (const auto& [h, qp] : dev_.qps_)
    if (qp->comp.timer_deadline_ns && (!best || qp->comp.timer_deadline_ns < best)) best = qp->comp.timer_deadline_ns;
  return best;
}

void Completer::on_timer(uint64_t now) {
  dev_.set_time(now);
  dev_.cm_->on_timer(now);
  std::vector<Qp*> due;
  for (auto& [h, qp] : dev_.qps_)
    if (qp->comp.timer_deadline_ns && qp->comp.timer_deadline_ns <= now) due.push_back(qp.get());
  for (Qp* qp : due) timer_fired(*qp, now);
  requester_.run_scheduled(now);
}

void Completer::timer_fired(Qp& qp, uint64_t now) {
  qp.comp.timer_deadline_ns = 0;
  requester_.end_lend(qp, now);  // a resend moves next_psn
  if (!qp.sq_running()) return;  // SQD still retransmits what it is draining
  if (qp.comp.rnr_wait) {        // the RNR wait is over: try again from the NAKed PSN
    qp.comp.rnr_wait = false;
    dev_.tracer_.event(TraceKind::kTimer).u("qp", qp.qpn).s("what", "rnr_wait").s("action", "fired");
    resend_from(qp, qp.comp.una_psn, now, "rnr");
    return;
  }
  if (qp.comp.sq_consumer == qp.req.sq_started) return;  // everything was acknowledged meanwhile
  // Nothing unacknowledged: the QP is waiting for credit towards its peer (congestion.h), or for
  // its turn, not for the peer. No retry is spent; the next packet sent arms the timer again.
  if (qp.comp.una_psn == qp.req.next_psn) return;
  const AckWait wait = judge_ack_wait(qp, now);
  if (wait.waiting) {
    arm_ack_timer(qp, now);
    ++dev_.counters_.timeouts_deferred;
    dev_.tracer_.event(TraceKind::kTimer)
        .u("qp", qp.qpn)
        .s("what", "ack_timeout")
        .s("action", "deferred")
        .s("why", wait.why)
        .u("due_ns", qp.comp.timer_deadline_ns);
    return;
  }
  dev_.journal().log_limited(LogLevel::kWarn, "ack_timeout", qp.qpn, [&] {
    return "QP " + hex(qp.qpn) + ": no ACK from " + ip_string(qp.remote_ip) + " for PSN " + hex(qp.comp.una_psn) +
           " within the ACK timeout; " +
           (qp.comp.retry_left ? "retransmitting (" + std::to_string(qp.comp.retry_left) +
                                     " of retry_cnt=" + std::to_string(qp.attr.retry_cnt) + " retries left)"
                               : std::string("no retries left")) +
           " (" + wait.why + "; " + waiting_wqe_text(qp) +
           "). Is the peer's QP in RTR/RTS, with this QP's QPN as its dest_qp_num?";
  });
  ++dev_.counters_.timeouts;
  ++qp.counters.timeouts;
  congestion_.loss(qp);
  dev_.tracer_.event(TraceKind::kTimer).u("qp", qp.qpn).s("what", "ack_timeout").s("action", "fired");
  if (qp.comp.retry_left == 0) {
    requester_error(qp, Error::kRetryExceeded,
                    "no ACK within the local ACK timeout (4.096us * 2^" + std::to_string(qp.attr.timeout) +
                        ") after retry_cnt=" + std::to_string(qp.attr.retry_cnt) + " retries");
    return;
  }
  --qp.comp.retry_left;
  resend_from(qp, qp.comp.una_psn, now, "timeout");
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
// remembers its first and last packets' numbers, and when an ACK retires the WQE the peer has
// read at least that far (PeerProgress::answered). When a QP's ACK timer expires:
//  1. the peer answered a packet sent after this QP's latest one: it read past all of ours
//     (the last packet before a QP pauses always asks for an ACK), so unless it is still
//     working on it (the grace below) a packet of ours or its ACK was lost: a timeout, a
//     retry spent, as IBA 9.7.5.1 says.
//  2. the peer is on this host (its socket is in this network namespace: the wire's peer_end):
//     the kernel says whether the packet could have been lost. A datagram sent to a live local
//     socket is either in its queue or counted in its drops. So the packet is not lost but
//     waiting, and the timer is armed again without a retry, unless
//       - the peer's socket is gone (its NIC died): a timeout at once;
//       - a packet of this QP's still unacknowledged ones may have been lost: the kernel counted
//         a drop towards the peer, or the fault injector dropped or held one back
//         (PeerProgress::lost_seq), since the oldest unacknowledged WQE's first packet and
//         since the QP's last retransmission (a drop before that was answered by the resend,
//         and counting it again would spend the retries of a busy host on one old loss): a
//         timeout, exactly as without this rule;
//       - the peer has read it (its queue was seen empty since it was sent) and has not
//         answered for a whole timeout since: it dropped it (no such QP, a QP in error) or its
//         ACK was lost: a timeout; unless its NIC process is running or waiting for a CPU
//         (PeerEnd::busy: a NIC that read a batch and was preempted before it answered, which on
//         a host with several busy loops per CPU lasts longer than 8 ms), for up to
//         kStalledPeerNs, as a queue that does not move;
//       - the peer's queue has not moved (no answer, the queue not shrinking) for
//         kStalledPeerNs: a NIC that was stopped (SIGSTOP) counts as a dead link does.
//  3. a peer on another host: its queue cannot be seen. The timer is armed again without a
//     retry only while the peer answered packets sent before ours, more of them than when the
//     timer was armed (it is alive and still reading the queue ahead of ours); a peer that
//     answered nothing is counted as lost at once.
// The grace. A verdict of loss that rests on the peer's answers (cases 1, 2's "read it and
// did not answer", 3) is put off:
//  - once, until the next expiry, in case 1: the peer read ours but may still be working on it
//    while it answers later packets (a READ whose responses it streams over several turns, an
//    ACK queued behind them);
//  - while this NIC's own socket holds unread datagrams, for up to kUnreadGraceNs: the answer
//    may be among them. A NIC that was not scheduled reads one bounded batch (512) before its
//    timers run, and a busy one can hold thousands; the peer sends its coalesced ACKs in its
//    own QPN order, so an ACK for a later packet can be read while the one this QP waits for is
//    still in the socket. The bound keeps a socket kept full by a flood from hiding a lost ACK.
// An answer or a resend starts the grace over. A real loss costs one more timeout.
// Each case ends: a queue ahead of a packet is finite and a local peer that stops reading is
// found by its stalled queue. Reordering (--reorder) breaks the FIFO; a reordered packet is held
// back by the fault injector (lost_seq) and is resent as before. A packet its program sent
// itself (direct_send.h) is not late while the program still holds it (preempted between taking
// its PSN and its sendto), up to kStalledPeerNs; once it has left it is numbered as sent then.
// Nor is a request the peer holds for a receive WQE its program has not posted yet (a program
// that has not run: receive_wait.cc), which the peer says every few ms with a 0-credit ACK of
// the PSN before it (Completer::comp_check_psn notes it), again up to kStalledPeerNs.

void Completer::note_request_sent(Qp& qp, SendWqeState& st, uint32_t pkt_in_wqe, bool last_packet, SendOutcome outcome,
                                  uint64_t lent_at_seq) {
  if (!qp.acked()) return;
  PeerProgress& peer = peer_progress_[qp.remote_ip];
  peer.note_sending(dev_.now());
  const uint64_t seq = ++peer.sent;
  qp.req.last_seq = seq;
  if (pkt_in_wqe == 0 || st.first_seq == 0) st.first_seq = seq;
  if (last_packet) st.last_seq = seq;  // the last packet always asks for an ACK
  if (outcome == SendOutcome::kDropped || outcome == SendOutcome::kDelayed) peer.lost_seq = seq;
  // A packet the program sent itself left at some moment between the lend and now, maybe ahead
  // of packets this NIC had queued but not yet flushed: it is numbered now (the latest it can
  // be) where a number says what was sent after it (rule 1, "it read ours"); any drop since the
  // lend may have been its own; and its ACK proves nothing about what the peer read before it.
  // No verdict rests on an order the NIC did not see.
  if (lent_at_seq != kNotLent) {
    st.first_seq = lent_at_seq + 1;
    st.last_seq = 0;
  } else if (qp.req.held_epoch && !requester_.program_holds_packet(qp)) {
    qp.req.held_epoch = 0;  // the program's packet left before this one
  }
}

// The QP's latest packet is one its program took a PSN for (direct_send.h) and may still hold:
// not sent, it cannot be late. Once it has left, it is numbered anew, as sent now (the latest
// it can have left): what the peer answered before says nothing about it.
bool Completer::program_still_sending(Qp& qp, uint64_t now) {
  if (!qp.req.held_epoch) return false;
  if (requester_.program_holds_packet(qp) && now - qp.req.held_since_ns < kStalledPeerNs) return true;
  qp.req.held_epoch = 0;
  PeerProgress& peer = peer_progress_[qp.remote_ip];
  peer.note_sending(now);
  qp.req.last_seq = ++peer.sent;
  qp.comp.grace = {};
  return false;
}

// What a timeout's log line says of the packet it gave up on: the oldest unacknowledged WQE and
// where its packets stand among those sent to the peer, so a CI failure names its case.
std::string Completer::waiting_wqe_text(const Qp& qp) const {
  const SendWqeState& st = qp.sq_state[qp.comp.sq_consumer & (qp.sq_entries - 1)];
  auto it = peer_progress_.find(qp.remote_ip);
  const PeerProgress peer = it == peer_progress_.end() ? PeerProgress{} : it->second;
  return std::string("oldest WQE ") + wr_opcode_name(st.wqe.opcode) + " of " + std::to_string(st.npkts) +
         " packets, numbered " + std::to_string(st.first_seq) + "-" + std::to_string(st.last_seq) +
         ", the QP's latest " + std::to_string(qp.req.last_seq) + ", the peer answered up to " +
         std::to_string(peer.answered) + " of " + std::to_string(peer.sent) + " sent";
}

uint64_t Completer::packets_sent_to(uint32_t peer_ip) const {
  auto it = peer_progress_.find(peer_ip);
  return it == peer_progress_.end() ? 0 : it->second.sent;
}

// An ACK retires `st`: the peer has read every packet this NIC sent it up to st's last one.
void Completer::note_peer_answered(Qp& qp, const SendWqeState& st, uint64_t now) {
  qp.comp.grace = {};
  if (!st.last_seq) return;
  PeerProgress& peer = peer_progress_[qp.remote_ip];
  peer.answered = std::max(peer.answered, st.last_seq);
  peer.moved_ns = now;
}

void Completer::resend_from(Qp& qp, uint32_t psn, uint64_t now, const char* cause) {
  qp.comp.grace = {};
  qp.comp.resent_from_seq = peer_progress_[qp.remote_ip].sent + 1;  // the resend's first packet
  requester_.go_back_n(qp, psn, now, cause);
}

// The cases above, in order; then the grace a verdict resting on the peer's answers gets.
AckWait Completer::judge_ack_wait(Qp& qp, uint64_t now) {
  if (program_still_sending(qp, now)) return {true, "its program has not sent it yet"};
  // The peer said, within this timeout, that the packet waits there for a receive WQE; for up
  // to kStalledPeerNs, as a queue that does not move (a responder's wait is shorter).
  const QpCompleter& comp = qp.comp;
  if (comp.peer_holds_ns && now - comp.peer_holds_ns < ack_timeout_ns(qp) &&
      now - comp.peer_holds_since_ns < kStalledPeerNs)
    return {true, "the peer holds it until the program posts a receive (a 0-credit ACK)"};
  const AckWait wait = judge_peer(qp, now);
  if (!wait.unanswered) return wait;
  if (wait.passed && !qp.comp.grace.passed_used) {
    qp.comp.grace.passed_used = true;
    return {true, "the peer answered later packets and may still be working on it"};
  }
  if (dev_.env_.wire.holds_unread()) {
    if (!qp.comp.grace.unread_since_ns) qp.comp.grace.unread_since_ns = now;
    if (now - qp.comp.grace.unread_since_ns < kUnreadGraceNs)
      return {true, "answers wait unread in this NIC's own socket"};
  }
  return wait;
}

AckWait Completer::judge_peer(Qp& qp, uint64_t now) {
  PeerProgress& peer = peer_progress_[qp.remote_ip];
  if (peer.answered > qp.req.last_seq) return {false, "the peer answered packets sent after it", true, true};
  const PacketSink::PeerEnd end = dev_.env_.wire.peer_end(qp.remote_ip, dev_.config_.udp_port);
  if (end.local) {
    peer.look(end, now);
    return judge_local_peer(qp, peer, now);
  }
  if (peer.answered != qp.comp.timer_answered_seq) return {true, "the peer is still answering packets sent before it"};
  return {false, "the peer answered nothing meanwhile", true};
}

// Case 2: a peer on this host, whose socket the kernel shows.
AckWait Completer::judge_local_peer(const Qp& qp, const PeerProgress& peer, uint64_t now) const {
  if (!peer.end.open) return {false, "the peer NIC's socket is gone"};
  const SendWqeState& oldest = qp.sq_state[qp.comp.sq_consumer & (qp.sq_entries - 1)];
  if (peer.lost_seq >= std::max(oldest.first_seq, qp.comp.resent_from_seq))
    return {false, "a packet towards the peer was dropped"};
  if (peer.read_seq >= qp.req.last_seq) {  // it read ours: a timeout to answer from then
    if (now - peer.read_ns < ack_timeout_ns(qp)) return {true, "the peer has just read it"};
    if (peer.end.busy && now - peer.read_ns < kStalledPeerNs)
      return {true, "the peer read it and its NIC is running or waiting for a CPU"};
    return {false, "the peer read it and did not answer", true};
  }
  if (now - peer.moved_ns >= kStalledPeerNs) return {false, "the peer NIC has read nothing for 3 s"};
  return {true, "it waits in the peer NIC's socket"};
}

}  // namespace simnic::core
