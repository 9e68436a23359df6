// Posts that send themselves: lending a QP's next PSN to its program, and taking it back
// (direct_send.h; the protocol and its argument in abi/direct_send.h).
#include "simnic/core/engines/direct_send.h"

#include "simnic/core/device.h"
#include "simnic/proto/psn.h"

namespace simnic::core {

// A lend is made only where the program's packet is exactly the one the NIC would send next,
// and the NIC would send it now.
bool DirectSend::may_lend(const Qp& qp) const {
  // The program holds the NIC's socket (Op::OpenDirectSend); no fault, capture or trace.
  if (!qp.ctx || !qp.ctx->direct_send || !lends_allowed()) return false;
  // RC in RTS, not waiting out an RNR NAK, not in step mode (where each packet is a step).
  if (qp.type != IBV_QPT_RC || qp.state != IBV_QPS_RTS || qp.comp.rnr_wait || requester_.burst() == 1) return false;
  // The last lend's packet has left the program (a new offer would overwrite the word that
  // says when it does).
  if (program_holds_packet(qp)) return false;
  // Nothing of its own to send: every posted WQE started and sent whole, no resend under way, no
  // READ or atomic outstanding (a FENCE would wait for them).
  const uint32_t produced = qp.shm->sq.producer.value.load(std::memory_order_acquire);
  if (produced != qp.req.sq_next || qp.req.sq_started != qp.req.sq_next || qp.req.sq_fetched != qp.req.sq_next ||
      qp.req.pkt_in_wqe || qp.req.rd_atomic_outstanding)
    return false;
  // Room for one more packet in the QP's window and in the peer's (congestion.h).
  if (proto::psn_diff(qp.req.next_psn, qp.comp.una_psn) + 1 >= int32_t(requester_.window_packets(qp))) return false;
  if (!congestion_.room_for_one_more(qp)) return false;
  return Transmit::path_tos(qp) == 0;  // the program's datagram carries the socket's TOS, 0
}

// The wire sends packets as they are (no fault to inject, no capture file that would miss
// them), and the NIC does not trace (a --trace file, a viewer, or the history ring kept for a
// viewer that may attach later, on unless --no-history): a trace records each packet when the
// NIC sends it, and a program's packet is recorded only when the NIC adopts it, at its ACK or
// later, so the trace would show it received before it was sent and simnic-viz could not pair
// it with its pkt_rx.
bool DirectSend::lends_allowed() const { return dev_.env_.wire.takes_direct_sends() && !dev_.tracer_.on(); }

void DirectSend::offer(Qp& qp, uint64_t now) {
  if (qp.req.lent || !may_lend(qp)) return;
  // What the QP owes its peer (coalesced ACKs) goes first: the program's packet must not reach
  // the peer before the answers to the requests that led to it. Not while READ responses stream.
  if (!responder_.send_answers_now(qp)) return;
  drop_ended();
  if (++epoch_ >= (1u << 30)) epoch_ = 1;  // the word keeps 30 bits of it; 0 never names a lend
  qp.req.lent = true;
  qp.req.lend_epoch = epoch_;
  // The program's packet will follow every packet sent to the peer so far (PeerProgress), on
  // the wire too: what this turn queued leaves first, or the program's packet could overtake
  // the QP's last ones and meet a sequence NAK (IBA 9.7.5.1.2).
  qp.req.lend_seq = completer_.packets_sent_to(qp.remote_ip);
  dev_.env_.wire.send_queued();
  abi::offer_direct_lend(qp.shm->direct, epoch_,
                         {0, qp.req.sq_next, qp.req.next_psn, qp.attr.dest_qp_num, qp.remote_ip, qp.mtu_bytes});
  lent_.push_back({qp.qpn, epoch_, now + kLendNs});
}

bool DirectSend::on_offer(const Qp& qp) const {
  return qp.req.lent &&
         qp.shm->direct.lend.load(std::memory_order_acquire) == abi::lend_word(qp.req.lend_epoch, abi::kLendOffered);
}

void DirectSend::take_back(Qp& qp, uint64_t now) {
  if (!qp.req.lent) return;
  qp.req.lent = false;
  const uint32_t psn = qp.req.next_psn;  // as lent
  if (abi::end_direct_lend(qp.shm->direct, qp.req.lend_epoch) && requester_.adopt_direct_packet(qp, now) &&
      abi::direct_packet_held(qp.shm->direct, qp.req.lend_epoch)) {  // accounted as sent, not yet sent
    qp.req.held_epoch = qp.req.lend_epoch;
    qp.req.held_psn = psn;
    qp.req.held_since_ns = now;
  }
  drop_ended();
}

bool DirectSend::program_holds_packet(const Qp& qp) const {
  return qp.req.held_epoch && abi::direct_packet_held(qp.shm->direct, qp.req.held_epoch);
}

void DirectSend::take_back_all(uint64_t now) {
  if (lent_.empty()) return;
  while (!lent_.empty()) take_back_oldest(now);
  requester_.run_scheduled(now);  // WQEs the program published that the requester sends itself
}

void DirectSend::sweep(uint64_t now) {
  while (!lent_.empty() && lent_.front().until_ns <= now) take_back_oldest(now);
  drop_ended();
}

void DirectSend::take_back_oldest(uint64_t now) {
  const Lent l = lent_.front();
  lent_.pop_front();
  if (Qp* qp = still_out(l)) take_back(*qp, now);
}

Qp* DirectSend::still_out(const Lent& l) const {
  Qp* qp = dev_.tables().find_qp_by_qpn(l.qpn);
  return qp && qp->req.lent && qp->req.lend_epoch == l.epoch ? qp : nullptr;
}

uint64_t DirectSend::next_deadline() const { return lent_.empty() ? 0 : lent_.front().until_ns; }

// Lends end early, at the next ACK mostly: their entries leave from the front as they are met,
// so the deadline is that of a lend still out.
void DirectSend::drop_ended() {
  while (!lent_.empty() && !still_out(lent_.front())) lent_.pop_front();
}

}  // namespace simnic::core
