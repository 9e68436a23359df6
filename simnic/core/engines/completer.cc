// The completer: consumes ACKs, NAKs, READ responses and atomic ACKs, retires send WQEs in
// order and writes their CQEs (IBA 9.7.5.1; rxe_comp.c plays the same role).
#include <algorithm>
#include <cstring>

#include "simnic/abi/wr_opcodes.h"
#include "simnic/core/device.h"
#include "simnic/core/errors.h"
#include "simnic/core/objects/qp_state_table.h"
#include "simnic/core/text.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/psn.h"

namespace simnic::core {

using namespace simnic::proto;

namespace {

// A responder's notice that our oldest request waits there for a receive WQE (receive_wait.cc):
// an ACK of the PSN just before it that advertises 0 credits (IBA 9.7.7.2; simnic's ACKs
// otherwise say "credits invalid"), while that request takes a receive WQE.
bool is_hold_notice(const Qp& qp, const ParsedPacket& pkt) {
  if (pkt.h.bth.opcode != kRcAcknowledge || pkt.h.aeth.syndrome != aeth_ack(0)) return false;
  if (pkt.h.bth.psn != psn_add(qp.comp.una_psn, kPsnMask) || qp.comp.sq_consumer == qp.req.sq_started) return false;
  switch (qp.sq_state[qp.comp.sq_consumer & (qp.sq_entries - 1)].wqe.opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_SEND_WITH_INV:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return true;
    default: return false;
  }
}

// An ATOMIC WRITE is answered by a READ RESPONSE ONLY with no payload (IBA Annex A19), and
// only by that; a READ never by an atomic ACK, an atomic never by READ data: a response that
// does not fit its WQE is dropped, never scattered into the WQE's buffer.
bool response_fits_wqe(uint32_t wr_opcode, const ParsedPacket& pkt) {
  if (abi::wr_has(wr_opcode, abi::kWrAtomicWrite))
    return rc_of_xrc(pkt.h.bth.opcode) == kRcReadResponseOnly && pkt.payload.empty();
  return (pkt.mask & kHasAtomicAckEth) ? abi::wr_has(wr_opcode, abi::kWrAtomic) : abi::wr_has(wr_opcode, abi::kWrRead);
}

// Why a READ or atomic failed with LOC_PROT_ERR after the peer executed it: the local buffer
// is checked when the response lands in it, not before the request leaves (as rxe's completer).
std::string response_not_placed(const char* what, const std::string& why) {
  return std::string(what) + " came back but cannot be placed in the work request's local buffer (" + why +
         "); the remote operation was carried out";
}

}  // namespace

void Completer::complete_send_wqe(Qp& qp, ibv_wc_status status) {
  const abi::SendWqe& w = requester_.fetch_send_wqe(qp, qp.comp.sq_consumer);  // a flushed WQE may be unfetched
  SendWqeState& st = qp.sq_state[qp.comp.sq_consumer & (qp.sq_entries - 1)];
  bool started = qp.comp.sq_consumer != qp.req.sq_started;
  if (started && st.rd_atomic && qp.req.rd_atomic_outstanding) --qp.req.rd_atomic_outstanding;
  // Errors complete even when unsignaled (IBA 10.7.3.1).
  const bool signaled = status != IBV_WC_SUCCESS || qp.sq_sig_all || (w.send_flags & IBV_SEND_SIGNALED);
  ibv_wc wc{};
  if (signaled) {
    wc.wr_id = w.wr_id;
    wc.status = status;
    const abi::WrOpcodeInfo* wr = abi::wr_opcode_info(w.opcode);
    wc.opcode = wr ? wr->wc_opcode : IBV_WC_SEND;  // a flushed WQE may carry any value
    wc.qp_num = qp.qpn;
    if (status == IBV_WC_SUCCESS && st.rd_atomic) wc.byte_len = st.length;
  }
  if (!started) ++qp.req.sq_started;
  else if (st.npkts) qp.comp.msn_retired = st.msn;
  if (qp.req.sq_next == qp.comp.sq_consumer) {
    ++qp.req.sq_next;
    qp.req.pkt_in_wqe = 0;
  }
  const uint32_t index = qp.comp.sq_consumer++;
  // Free the slot before the CQE is visible: an application that polls the completion may post
  // into the slot at once (perftest's latency tests run with a send queue of one).
  qp.shm->sq.consumer.value.store(qp.comp.sq_consumer, std::memory_order_release);
  if (signaled && qp.send_cq) dev_.completions().push_cqe(*qp.send_cq, wc, false);  // an XRC TGT QP has no send CQ
  dev_.tracer_.event(TraceKind::kWqeDone).u("qp", qp.qpn).s("queue", "sq").u("index", index);
  dev_.qp_states().check_sq_drained(qp);
}

// A send WQE failed (IBA 9.9.2): it completes with the error's status, even unsignaled.
void Completer::requester_error(Qp& qp, Error e, const std::string& detail) {
  const ErrorInfo& err = error_info(e);
  const char* status = wc_status_name(err.status);
  const std::string rule = detail + " (" + err.rule + ", " + err.iba_class + ")";
  char line[96];
  std::snprintf(line, sizeof line, "QP 0x%x send WQE failed with %s: ", qp.qpn, status);
  qp.error_reason = std::string("a send work request failed with ") + status + ": " + rule;
  dev_.journal().log(LogLevel::kWarn, line + rule);
  dev_.tracer_.event(TraceKind::kError).u("qp", qp.qpn).s("status", status).s("error", err.name).s("rule", rule);
  if (qp.comp.sq_consumer != qp.shm->sq.producer.value.load(std::memory_order_acquire))
    complete_send_wqe(qp, err.status);
  // RC: the whole QP is in error. UC/UD: only the send queue stops (SQE); receives go on, and
  // modify_qp SQE->RTS resumes sending (IBA 10.3.1.8, 11.6.2).
  dev_.qp_states().set_qp_state(qp, qp.acked() ? IBV_QPS_ERR : IBV_QPS_SQE, status);
}

// Retire WQEs whose every packet is acknowledged by an ACK for `psn` (coalesced ACKs).
void Completer::complete_acked(Qp& qp, uint32_t psn, uint64_t now) {
  const uint32_t mask = qp.sq_entries - 1;
  const bool progress = psn_diff(psn, qp.comp.una_psn) >= 0;
  if (progress) qp.comp.una_psn = psn_add(psn, 1);
  while (qp.comp.sq_consumer != qp.req.sq_started) {
    SendWqeState& st = qp.sq_state[qp.comp.sq_consumer & mask];
    uint32_t last = psn_add(st.first_psn, st.npkts - 1);
    if (psn_diff(last, psn) > 0) break;
    if (qp.comp.sq_consumer == qp.req.sq_next && !requester_.skip_acked_wqe(qp)) break;  // not fully sent yet
    if (st.rd_atomic && !st.done) {
      // Later requests were acknowledged but this READ/atomic has no answer: its responses
      // were lost (IBA 9.7.5.1.1, implied NAK). Ask again, and keep expecting the responses
      // from the first missing one: the ACK must not carry una_psn past them, or the
      // re-requested responses would be dropped as old and a lost re-request never retried.
      const uint32_t missing = psn_add(st.first_psn, st.rcvd_pkts);
      qp.comp.una_psn = missing;
      resend_from(qp, missing, now, "implied_nak");
      return;
    }
    note_peer_answered(qp, st, now);
    complete_send_wqe(qp, IBV_WC_SUCCESS);
    if (!qp.sq_running()) return;
  }
  // Only progress resets the retry budgets: a NAK for the oldest PSN is none.
  if (progress) {
    requester_.skip_acked_packets(qp);  // a resend in this WQE goes on after what was ACKed
    qp.comp.retry_left = qp.attr.retry_cnt;
    qp.comp.rnr_retry_left = qp.attr.rnr_retry;
  }
  if (qp.comp.sq_consumer == qp.req.sq_started && qp.req.sq_next == qp.req.sq_started) {
    stop_ack_timer(qp);
  } else arm_ack_timer(qp, now);
}

// Whether an ACK/NAK's MSN could come from our responder (IBA 9.7.5.1: the responder returns
// the count of request messages it completed). It completed at least every message wholly
// before the acknowledged PSN (up to `psn` for an ACK, before it for a NAK), and at most every
// message we started; a duplicate's ACK carries the newer MSN, so only these bounds are exact.
bool Completer::ack_msn_plausible(const Qp& qp, uint32_t psn, uint32_t msn, bool is_nak) const {
  const uint32_t mask = qp.sq_entries - 1;
  const uint32_t covered = is_nak ? psn_add(psn, kPsnMask) : psn;
  uint32_t least = qp.comp.msn_retired;
  for (uint32_t idx = qp.comp.sq_consumer; idx != qp.req.sq_started; ++idx) {
    const SendWqeState& st = qp.sq_state[idx & mask];
    if (st.npkts == 0) continue;  // a local operation: no message
    if (psn_diff(psn_add(st.first_psn, st.npkts - 1), covered) > 0) break;
    least = st.msn;
  }
  return psn_diff(msn, least) >= 0 && psn_diff(qp.req.msn_started, msn) >= 0;
}

const char* comp_step_name(CompStep step) {
  static constexpr const char* kNames[] = {"CHECK_STATE",      "CHECK_PSN", "FIND_WQE", "ATOMIC_ACK", "READ_DATA",
                                           "READ_ATOMIC_DONE", "CHECK_MSN", "ACK",      "RNR_NAK",    "NAK",
                                           "RUN_REQUESTER",    "DONE"};
  return kNames[size_t(step)];
}

// The completer, as rxe's: a packet walks named steps, each returning the next, from the
// cheap checks to retiring WQEs (IBA 9.7.5.1).
void Completer::receive(Qp& qp, const ParsedPacket& pkt, uint64_t now) {
  requester_.end_lend(qp, now);  // the ACK may answer the program's own packet (direct_send.h)
  // An answer at or past the PSN of a packet its program held has proof it left (no NAK: that
  // names what the peer still waits for).
  if (qp.req.held_epoch && !((pkt.mask & kHasAeth) && aeth_class(pkt.h.aeth.syndrome) != kAethAck) &&
      psn_diff(pkt.h.bth.psn, qp.req.held_psn) >= 0)
    qp.req.held_epoch = 0;
  CompletionWork c{qp, pkt, now};
  CompStep step = CompStep::kCheckState;
  StepPath path;
  const bool tracing = dev_.tracer_.engine_steps_on();
  while (step != CompStep::kDone) {
    if (tracing) path.add(step);
    step = run_step(c, step);
  }
  if (tracing) trace_engine_steps(dev_.tracer_, "completer", qp.qpn, pkt.h.bth.psn, path, comp_step_name);
  congestion_.sync(qp, false);  // credit the acknowledged PSNs freed goes back to the peer's window
}

CompStep Completer::run_step(CompletionWork& c, CompStep step) {
  switch (step) {
    case CompStep::kCheckState: return comp_check_state(c);
    case CompStep::kCheckPsn: return comp_check_psn(c);
    case CompStep::kFindWqe: return comp_find_wqe(c);
    case CompStep::kAtomicAck: return comp_atomic_ack(c);
    case CompStep::kReadData: return comp_read_data(c);
    case CompStep::kReadAtomicDone: return comp_read_atomic_done(c);
    case CompStep::kCheckMsn: return comp_check_msn(c);
    case CompStep::kAck:
      // Before the CQEs it brings, which let a program post again at once: the PSN is on offer
      // by then (direct_send.h). An ACK retires WQEs and stops a timer, nothing the offer rests on.
      requester_.offer_lend(c.qp, c.now);
      complete_acked(c.qp, c.pkt.h.bth.psn, c.now);
      return CompStep::kRunRequester;
    case CompStep::kRnrNak: return comp_rnr_nak(c);
    case CompStep::kNak: return comp_nak(c);
    case CompStep::kRunRequester: requester_.schedule(c.qp, Requester::kWorkRequester); return CompStep::kDone;
    case CompStep::kDone: break;
  }
  return CompStep::kDone;
}

// Only a QP that sends hears responses.
CompStep Completer::comp_check_state(CompletionWork& c) {
  Qp& qp = c.qp;
  if (qp.state == IBV_QPS_RTS || qp.state == IBV_QPS_SQD || qp.state == IBV_QPS_SQE) return CompStep::kCheckPsn;
  dev_.journal().drop(Drop::kResponseState, qp.qpn, [&] {
    return "QP " + hex(qp.qpn) + " dropped a response: it is in " + qp_state_name(qp.state) + ", not sending";
  });
  return CompStep::kDone;
}

// A response must be for a PSN we have sent and not yet retired.
CompStep Completer::comp_check_psn(CompletionWork& c) {
  const uint32_t psn = c.pkt.h.bth.psn;
  // Up to the highest PSN ever sent, not the resend's cursor (next_psn): after a go-back-N the
  // responder may already have everything up to a later PSN, and its (coalesced) ACK says so.
  if (psn_diff(psn, c.qp.comp.una_psn) < 0 || psn_diff(psn, c.qp.req.psn_end) >= 0) {
    if (is_hold_notice(c.qp, c.pkt)) {
      c.qp.comp.peer_holds_ns = c.now;
      if (!c.qp.comp.peer_holds_since_ns) c.qp.comp.peer_holds_since_ns = c.now;
    } else if (c.pkt.mask & kIsAck) ++dev_.counters_.duplicates;  // a late or repeated ACK
    else ++dev_.counters_.rx_drop_unexpected;
    return CompStep::kDone;
  }
  c.qp.comp.peer_holds_ns = c.qp.comp.peer_holds_since_ns = 0;  // an answer to ours: it no longer waits
  return (c.pkt.mask & (kIsReadResp | kHasAtomicAckEth)) ? CompStep::kFindWqe : CompStep::kCheckMsn;
}

// The READ/atomic WQE a response belongs to; everything before it is implicitly acknowledged.
CompStep Completer::comp_find_wqe(CompletionWork& c) {
  Qp& qp = c.qp;
  const uint32_t psn = c.pkt.h.bth.psn, mask = qp.sq_entries - 1;
  uint32_t idx = qp.comp.sq_consumer;
  for (; idx != qp.req.sq_started; ++idx) {
    const SendWqeState& st = qp.sq_state[idx & mask];
    int32_t d = psn_diff(psn, st.first_psn);
    if (d >= 0 && d < int32_t(st.npkts)) break;
  }
  if (idx == qp.req.sq_started || !qp.sq_state[idx & mask].rd_atomic) {
    ++dev_.counters_.rx_drop_unexpected;
    return CompStep::kDone;
  }
  c.wqe = &qp.sq_state[idx & mask];
  if (!response_fits_wqe(c.wqe->wqe.opcode, c.pkt)) {
    ++dev_.counters_.rx_drop_unexpected;
    return CompStep::kDone;
  }
  complete_acked(qp, psn_add(c.wqe->first_psn, uint32_t(-1) & kPsnMask), c.now);
  if (!qp.sq_running()) return CompStep::kDone;
  return (c.pkt.mask & kHasAtomicAckEth) ? CompStep::kAtomicAck : CompStep::kReadData;
}

// The original value lands in the WQE's buffer (the NIC's copy of the WQE: the ring may have
// been rewritten since); a duplicate ACK changes nothing.
CompStep Completer::comp_atomic_ack(CompletionWork& c) {
  SendWqeState& st = *c.wqe;
  if (!st.done) {
    uint64_t orig = c.pkt.h.atomic_ack.orig;
    std::string why;
    if (dma_.scatter(c.qp, st.wqe.sge, st.wqe.num_sge, 0, reinterpret_cast<const uint8_t*>(&orig), 8, &why)) {
      requester_error(c.qp, Error::kLocalProtection, response_not_placed("the atomic's original value", why));
      return CompStep::kDone;
    }
    st.done = true;
    st.rcvd_pkts = 1;
  }
  return CompStep::kReadAtomicDone;
}

// READ response data, in order: a gap is re-requested once from the first missing packet;
// the rest of the old stream still in flight is dropped, not re-requested again (the ACK
// timeout covers a lost re-request).
CompStep Completer::comp_read_data(CompletionWork& c) {
  Qp& qp = c.qp;
  SendWqeState& st = *c.wqe;
  const uint32_t psn = c.pkt.h.bth.psn, expect = psn_add(st.first_psn, st.rcvd_pkts);
  if (psn != expect) {
    if (psn_diff(psn, expect) <= 0) {
      ++dev_.counters_.duplicates;
    } else if (qp.comp.read_gap_asked != expect) {
      qp.comp.read_gap_asked = expect;
      resend_from(qp, expect, c.now, "read_gap");
    } else {
      ++dev_.counters_.rx_drop_unexpected;
    }
    return CompStep::kDone;
  }
  qp.comp.read_gap_asked.reset();
  if (!c.pkt.payload.empty()) {
    std::string why;
    if (dma_.scatter(qp, st.wqe.sge, st.wqe.num_sge, st.rcvd_pkts * qp.mtu_bytes, c.pkt.payload.data(),
                     uint32_t(c.pkt.payload.size()), &why)) {
      requester_error(qp, Error::kLocalProtection, response_not_placed("the READ response's data", why));
      return CompStep::kDone;
    }
  }
  if (++st.rcvd_pkts == st.npkts) st.done = true;
  return CompStep::kReadAtomicDone;
}

CompStep Completer::comp_read_atomic_done(CompletionWork& c) {
  SendWqeState& st = *c.wqe;
  if (st.done) {
    complete_acked(c.qp, psn_add(st.first_psn, st.npkts - 1), c.now);
  } else {
    if (psn_diff(c.pkt.h.bth.psn, c.qp.comp.una_psn) >= 0) c.qp.comp.una_psn = psn_add(c.pkt.h.bth.psn, 1);
    arm_ack_timer(c.qp, c.now);
  }
  return CompStep::kRunRequester;
}

// An ACK or NAK must carry an MSN our responder could have sent (ack_msn_plausible).
CompStep Completer::comp_check_msn(CompletionWork& c) {
  Qp& qp = c.qp;
  const uint32_t psn = c.pkt.h.bth.psn;
  const uint8_t syndrome = c.pkt.h.aeth.syndrome;
  if (!ack_msn_plausible(qp, psn, c.pkt.h.aeth.msn, aeth_class(syndrome) != kAethAck)) {
    dev_.journal().drop(Drop::kBadMsn, qp.qpn, [&] {
      return "QP " + hex(qp.qpn) + " dropped an ACK/NAK for PSN " + hex(psn) + " with MSN " + hex(c.pkt.h.aeth.msn) +
             ": it counts messages this QP never sent (forged, or from an old connection)";
    });
    return CompStep::kDone;
  }
  ++dev_.counters_.acks_received;
  switch (aeth_class(syndrome)) {
    case kAethAck: return CompStep::kAck;
    case kAethRnrNak: return CompStep::kRnrNak;
    case kAethNak: return CompStep::kNak;
    default: ++dev_.counters_.rx_drop_malformed; return CompStep::kDone;
  }
}

// Receiver not ready: everything before the PSN is done; wait out the NAK's timer, then go back
// to it, at most rnr_retry times (7: forever).
CompStep Completer::comp_rnr_nak(CompletionWork& c) {
  Qp& qp = c.qp;
  const uint32_t psn = c.pkt.h.bth.psn, timer = aeth_value(c.pkt.h.aeth.syndrome);
  ++dev_.counters_.rnr_naks_received;
  ++qp.counters.rnr_naks_received;
  complete_acked(qp, psn_add(psn, kPsnMask), c.now);
  if (!qp.sq_running()) return CompStep::kDone;
  if (qp.attr.rnr_retry != 7) {
    if (qp.comp.rnr_retry_left == 0) {
      requester_error(qp, Error::kRnrRetryExceeded,
                      "the responder had no receive WQE (RNR NAK) more than rnr_retry=" +
                          std::to_string(qp.attr.rnr_retry) + " times");
      return CompStep::kDone;
    }
    --qp.comp.rnr_retry_left;
  }
  arm_rnr_timer(qp, psn, timer, c.now);
  dev_.journal().log_limited(LogLevel::kWarn, "rnr_received", qp.qpn, [&] {
    return "QP " + hex(qp.qpn) + ": the peer had no receive WQE for PSN " + hex(psn) + " (RNR NAK); retrying in " +
           std::to_string(rnr_timer_ns(timer) / 1000) + " us" +
           (qp.attr.rnr_retry == 7 ? std::string(", forever (rnr_retry=7)")
                                   : ", " + std::to_string(qp.comp.rnr_retry_left) + " RNR retries left") +
           ". The peer must post receives before this side sends";
  });
  return CompStep::kDone;
}

// A NAK: a sequence error goes back N (costing a retry, as a timeout does: rxe counts both;
// progress acknowledged by this very NAK has already renewed the budget); any other code
// fails the WQE with the status the NAK table gives it.
CompStep Completer::comp_nak(CompletionWork& c) {
  Qp& qp = c.qp;
  const uint32_t psn = c.pkt.h.bth.psn, code = aeth_value(c.pkt.h.aeth.syndrome);
  ++dev_.counters_.naks_received;
  ++qp.counters.naks_received;
  complete_acked(qp, psn_add(psn, kPsnMask), c.now);
  if (!qp.sq_running()) return CompStep::kDone;
  if (code == kNakPsnSeqError) {
    congestion_.sync(qp, false);  // credit for what this NAK acknowledged, before the rewind
    congestion_.loss(qp);
    if (qp.comp.retry_left == 0) {
      requester_error(qp, Error::kRetryExceeded,
                      "the responder NAKed PSN " + hex(psn) + " (a packet was lost) more than retry_cnt=" +
                          std::to_string(qp.attr.retry_cnt) + " times without progress");
      return CompStep::kDone;
    }
    --qp.comp.retry_left;
    resend_from(qp, psn, c.now, "nak_seq");
    return CompStep::kDone;
  }
  const NakInfo& nak = nak_info(code);
  const char* xrc = qp.type == IBV_QPT_XRC_SEND && code == kNakInvalidRequest
                        ? "; on XRC, also a remote_srqn naming no XRC SRQ of the TGT QP's XRC domain"
                        : "";
  requester_error(qp, nak.at_requester,
                  "the responder, QP " + hex(qp.attr.dest_qp_num) + " at " + ip_string(qp.remote_ip) +
                      ", refused it with a NAK: " + nak.meaning + xrc +
                      "; the peer's NIC log, and its program, say which rule");
  return CompStep::kDone;
}

}  // namespace simnic::core
