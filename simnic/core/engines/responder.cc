// The responder: executes incoming requests in PSN order (IBA 9.7.4, 9.7.5.2). It lands SENDs
// in receive WQEs, WRITEs in MRs, answers READs and atomics, detects duplicates, and ACKs or
// NAKs. Errors cite the rule broken, as a teaching NIC should.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "simnic/core/device.h"
#include "simnic/core/engines/receive_wait.h"
#include "simnic/core/errors.h"
#include "simnic/core/objects/qp_state_table.h"
#include "simnic/core/text.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/psn.h"

namespace simnic::core {

using namespace simnic::proto;

namespace {

constexpr uint8_t kAckCredits = 0x1f;  // "credits invalid": simnic does no end-to-end credits
constexpr size_t kAtomicReplayDepth = DeviceLimits::kMaxRdAtomic;  // remembered atomic results (>= max_dest_rd_atomic)

bool is_plain_ack(const PacketHeaders& h) {
  return h.bth.opcode == kRcAcknowledge && aeth_class(h.aeth.syndrome) == kAethAck;
}

// The SEND's last packet is in: the completion of its receive WQE, which is done with.
ibv_wc finish_send_recv(Qp& qp, const ParsedPacket& pkt) {
  ibv_wc wc{};
  wc.wr_id = qp.resp.recv->wqe.wr_id;
  wc.status = IBV_WC_SUCCESS;
  wc.opcode = IBV_WC_RECV;
  wc.byte_len = qp.resp.recv->offset;
  wc.qp_num = qp.qpn;
  wc.src_qp = qp.attr.dest_qp_num;
  if (pkt.mask & kHasImm) {
    wc.wc_flags |= IBV_WC_WITH_IMM;
    wc.imm_data = pkt.h.imm_be;
  }
  if (pkt.mask & kHasIeth) {
    wc.wc_flags |= IBV_WC_WITH_INV;
    wc.invalidated_rkey = pkt.h.ieth_rkey;
  }
  qp.resp.recv.reset();
  ++qp.resp.msn;
  return wc;
}

}  // namespace

void Responder::send_ack(Qp& qp, uint8_t syndrome, uint32_t psn) {
  if (!qp.acked()) return;  // UC never answers (IBA 9.8.3)
  PacketHeaders h{};
  h.bth.opcode = kRcAcknowledge;
  h.bth.pkey = 0xffff;
  h.bth.dest_qp = qp.attr.dest_qp_num;
  h.bth.psn = psn;
  h.aeth.syndrome = syndrome;
  h.aeth.msn = qp.resp.msn & kPsnMask;
  // A NAK that ends the QP (IBA 9.9.3.1) goes at once: the QP stops answering after it. An
  // ACK still waiting to be coalesced (below) goes first: it reports what came before.
  const bool fatal = aeth_class(syndrome) == kAethNak && (syndrome & 0x1f) != kNakPsnSeqError;
  if (fatal) {
    send_answers_now(qp);
    send_answer_now(qp, h);
  } else {
    send_answer_in_order(qp, h);
  }
  switch (aeth_class(syndrome)) {
    case kAethAck: break;  // counted as it leaves (send_answer_now): coalesced ones never do
    case kAethRnrNak:
      ++dev_.counters_.rnr_naks_sent;
      ++qp.counters.rnr_naks_sent;
      break;
    default:
      ++dev_.counters_.naks_sent;
      ++qp.counters.naks_sent;
      break;
  }
}

// An answer goes out only after every READ response owed for earlier requests: the responder
// answers in PSN order (IBA 9.7.5.1), and an ACK acknowledges every earlier request, a READ's
// responses included (9.7.5.1.1, coalesced ACKs). Sent ahead of them, it would tell the
// requester those responses were lost (an implied NAK) and make it ask for the READ again.
//
// An ACK with nothing owed before it waits in the same queue until the end of the event
// (send_waiting_acks, from Device::finish_turn), so that the ACKs a receive batch earns collapse
// into one, the newest (9.7.5.1.1: an ACK acknowledges every earlier PSN; a responder may
// coalesce). Anything the QP answers later queues behind it, so PSN order holds. Not in step
// mode (a burst of 1), where each step shows its own packets. It leaves with the event's other
// answers, in one send: when it waited for the NIC's next turn instead (Requester::run_pending,
// a handler of its own), a NIC preempted between the two on a loaded host could send a batch's
// READ responses and atomic answers tens of ms before the ACKs of WRITEs and SENDs read before
// them, and the requester, hearing answers to packets sent after its own, counted a loss
// (completer_timers.cc, case 1: 3 runs in 8 of the busy-host soak, each a resend of packets the
// peer had).
void Responder::send_answer_in_order(Qp& qp, const PacketHeaders& h) {
  auto& owed = qp.resp.read_responses;
  const bool nothing_owed = owed.empty();
  if (nothing_owed && !(coalescing.on && requester_.burst() > 1 && is_plain_ack(h))) return send_answer_now(qp, h);
  if (!nothing_owed && owed.back().answer && is_plain_ack(*owed.back().answer) && is_plain_ack(h)) {
    owed.back().answer = h;  // the later ACK says all the earlier one did (9.7.5.1.1)
    owed.back().first_psn = h.bth.psn;
    return;
  }
  ReadResponse queued;
  queued.first_psn = h.bth.psn;
  queued.answer = h;
  owed.push_back(queued);
  if (nothing_owed) coalescing.waiting.push_back(qp.qpn);  // a waiting ACK: sent at the end of the event
}

void Responder::send_waiting_acks() {
  std::vector<uint32_t> qpns;
  qpns.swap(coalescing.waiting);
  for (uint32_t qpn : qpns)
    if (Qp* qp = dev_.tables().find_qp_by_qpn(qpn)) send_answers_now(*qp);  // destroyed meanwhile: none
}

// The answers at the head of the queue (ACKs, atomic answers), up to the first READ response.
bool Responder::send_answers_now(Qp& qp) {
  auto& owed = qp.resp.read_responses;
  while (!owed.empty() && owed.front().answer) {
    const PacketHeaders h = *owed.front().answer;
    owed.pop_front();
    send_answer_now(qp, h);
  }
  return owed.empty();
}

void Responder::send_answer_now(Qp& qp, const PacketHeaders& h) {
  dma_.flush_dma_writes();  // what the answer reports is in memory before the requester hears of it
  if (is_plain_ack(h)) ++dev_.counters_.acks_sent;
  transmit_.emit(qp, h, {});
}

// READ and atomic requests the responder still owes an answer for (max_dest_rd_atomic counts
// them; queued ACKs do not).
size_t Responder::rd_atomic_owed(const Qp& qp) const {
  size_t n = 0;
  for (const ReadResponse& r : qp.resp.read_responses) n += !r.answer || r.answer->bth.opcode != kRcAcknowledge;
  return n;
}

// A request the responder cannot execute (IBA 9.9.3.1): RC and XRC NAK it and go to ERR; UC
// drops the message quietly unless a receive WQE completes in error.
void Responder::responder_error(Qp& qp, Error e, uint32_t psn, const std::string& detail) {
  const ErrorInfo& err = error_info(e);
  if (qp.type == IBV_QPT_UC && !err.completes_recv) {
    // UC has no NAKs: a request it cannot execute is silently discarded, with the rest of
    // its message, and the QP carries on (IBA 9.8.3.2).
    uc_discard(qp, psn, detail);
    return;
  }
  const std::string rule = detail + " (" + err.rule + ", " + err.iba_class + ")";
  char line[128];
  if (qp.acked()) {
    const NakInfo& nak = nak_info(uint32_t(err.nak));
    std::snprintf(line, sizeof line, "QP 0x%x PSN %u: NAK %s: ", qp.qpn, psn, nak.text);
    dev_.tracer_.event(TraceKind::kNak)
        .u("qp", qp.qpn)
        .u("psn", psn)
        .s("code", nak.name)
        .s("error", err.name)
        .s("rule", rule);
  } else {
    std::snprintf(line, sizeof line, "QP 0x%x PSN %u: receive failed with %s: ", qp.qpn, psn,
                  wc_status_name(err.status));
    dev_.tracer_.event(TraceKind::kError)
        .u("qp", qp.qpn)
        .s("status", wc_status_name(err.status))
        .s("error", err.name)
        .s("rule", rule);
  }
  dev_.journal().log(LogLevel::kWarn, line + rule);
  qp.error_reason = std::string("it refused a request from its peer (") +
                    (qp.acked() ? "and sent a NAK" : "UC: no NAK") + "): " + rule;
  const bool wqe_reports_it = qp.resp.recv && err.completes_recv;
  if (wqe_reports_it) recv_.complete_recv_in_error(qp, err.status);
  send_ack(qp, aeth_nak(uint32_t(err.nak)), psn);
  // Class A and C errors take the responder's QP to ERROR too (IBA 9.9.3.1).
  dev_.qp_states().set_qp_state(qp, IBV_QPS_ERR, "responder error");
  if (!wqe_reports_it) raise_responder_async_error(qp, err);
}

// IBA 9.9.3.1.3, C9-222.1.1: a class C error that belongs to the QP but to no receive WQE (a
// READ, a WRITE without immediate, an atomic) is reported to the responder's client as an
// affiliated asynchronous error. As rxe ("RDMA/rxe: Generate async error for r_key
// violations"), an R_Key violation on an RC (and here XRC) QP raises IBV_EVENT_QP_ACCESS_ERR
// (a Local Access Violation Work Queue Error, IBA 10.10.2.3); a WRITE with immediate reports
// it in its receive WQE instead. UC sends no NAK and raises nothing, as rxe.
void Responder::raise_responder_async_error(Qp& qp, const ErrorInfo& err) {
  if (!qp.acked() || err.nak != kNakRemoteAccessError) return;
  dev_.journal().log(LogLevel::kWarn,
                     "QP " + hex(qp.qpn) +
                         ": IBV_EVENT_QP_ACCESS_ERR sent to its context: a remote access "
                         "was refused and no receive WQE can carry the error (IBA 9.9.3.1.3, C9-222.1.1)");
  dev_.completions().send_async_event(qp.ctx, IBV_EVENT_QP_ACCESS_ERR, qp.handle);
}

void Responder::uc_discard(Qp& qp, uint32_t psn, const std::string& why) {
  if (!qp.resp.uc_dropping) {
    dev_.journal()
        .drop(Drop::kUcMessage, qp.qpn,
              [&] { return "QP " + hex(qp.qpn) + " PSN " + hex(psn) + ": UC message discarded: " + why; })
        .u("psn", psn);
  }
  qp.resp.uc_dropping = true;
  uc_abandon_message(qp);
}

// A SEND cut short keeps its receive WQE for the next message (as rxe); a WRITE cut short
// leaves what it wrote.
void Responder::uc_abandon_message(Qp& qp) {
  if (qp.resp.recv) qp.resp.recv->offset = 0;
  qp.resp.write_left = 0;
  qp.resp.write_mr = nullptr;
}

// UC PSN rules (IBA 9.8.3.1): in-order packets are executed; a gap discards the message in
// progress; the first packet of a new message resynchronises, whatever its PSN.
bool Responder::uc_accept(Qp& qp, const ParsedPacket& pkt) {
  const uint32_t psn = pkt.h.bth.psn;
  if (psn == qp.resp.epsn && !qp.resp.uc_dropping) return true;
  if (pkt.mask & kIsFirst) {
    uc_abandon_message(qp);
    qp.resp.uc_dropping = false;
    qp.resp.epsn = psn;
    return true;
  }
  uc_discard(qp, psn,
             "PSN " + std::to_string(psn) + " is not the expected " + std::to_string(qp.resp.epsn) +
                 " and not the start of a message (a packet was lost)");
  return false;
}

bool Responder::can_receive(Qp& qp) {
  if (qp.state != IBV_QPS_RESET && qp.state != IBV_QPS_INIT && qp.state != IBV_QPS_ERR) return true;
  dev_.journal().drop(Drop::kRequestState, qp.qpn, [&] {
    return "QP " + hex(qp.qpn) + " dropped a request: it is in " + qp_state_name(qp.state) +
           (qp.state == IBV_QPS_ERR
                ? " (after an error; see the line that moved it there), and receives nothing until reset"
                : ", and a QP receives only from RTR on (IBA 10.3.1): move it to RTR before the peer sends");
  });
  return false;
}

const char* resp_step_name(RespStep step) {
  static constexpr const char* kNames[] = {"CHECK_STATE", "CHECK_PSN", "DUPLICATE", "EXECUTE", "DONE"};
  return kNames[size_t(step)];
}

// The responder, as rxe's: a request walks named steps, each returning the next.
void Responder::receive(Qp& qp, const ParsedPacket& pkt, uint64_t now) {
  (void)now;
  if (wait_.keep_behind(qp, pkt)) return;  // behind a request that waits for its receive WQE
  RespStep step = RespStep::kCheckState;
  StepPath path;
  const bool tracing = dev_.tracer_.engine_steps_on();
  while (step != RespStep::kDone) {
    if (tracing) path.add(step);
    switch (step) {
      case RespStep::kCheckState: step = can_receive(qp) ? RespStep::kCheckPsn : RespStep::kDone; break;
      case RespStep::kCheckPsn: step = resp_check_psn(qp, pkt); break;
      case RespStep::kDuplicate: step = resp_duplicate(qp, pkt); break;
      case RespStep::kExecute: step = resp_execute(qp, pkt); break;
      case RespStep::kDone: break;
    }
  }
  if (tracing) trace_engine_steps(dev_.tracer_, "responder", qp.qpn, pkt.h.bth.psn, path, resp_step_name);
}

RespStep Responder::resp_check_psn(Qp& qp, const ParsedPacket& pkt) {
  if (qp.type == IBV_QPT_UC) return uc_accept(qp, pkt) ? RespStep::kExecute : RespStep::kDone;
  const uint32_t psn = pkt.h.bth.psn;
  const int32_t d = psn_diff(psn, qp.resp.epsn);
  if (d < 0) return RespStep::kDuplicate;
  if (d == 0) {
    qp.resp.nak_sent = false;
    return RespStep::kExecute;
  }
  // A gap: the packet is discarded (counted), and NAKed once with the PSN we expect; the
  // requester goes back to it (IBA 9.7.5.2.2). Later packets of the gap are discarded quietly.
  ++dev_.counters_.rx_drop_out_of_sequence;
  dev_.journal().log_limited(LogLevel::kInfo, "psn_gap", qp.qpn, [&] {
    return "QP " + hex(qp.qpn) + ": expected PSN " + hex(qp.resp.epsn) + ", got " + hex(psn) +
           ": a packet was lost or reordered; NAK (PSN sequence error) sent once, later packets dropped until the "
           "requester goes back";
  });
  if (!qp.resp.nak_sent) {
    qp.resp.nak_sent = true;
    dev_.tracer_.event(TraceKind::kNak)
        .u("qp", qp.qpn)
        .u("psn", qp.resp.epsn)
        .s("code", nak_info(kNakPsnSeqError).name)
        .s("rule", "expected PSN " + std::to_string(qp.resp.epsn) + ", got " + std::to_string(psn) +
                       ": a packet was lost or reordered (IBA 9.7.5.2.2, responder class B)");
    send_ack(qp, aeth_nak(kNakPsnSeqError), qp.resp.epsn);
  }
  return RespStep::kDone;
}

// A duplicate (IBA 9.7.5.2.1): re-ACK SENDs, WRITEs and ATOMIC WRITEs, re-execute READs,
// replay atomics.
RespStep Responder::resp_duplicate(Qp& qp, const ParsedPacket& pkt) {
  ++dev_.counters_.duplicates;
  ++qp.counters.duplicates;
  if (pkt.mask & kIsReadReq) {
    respond_read(qp, pkt, true);
  } else if (pkt.mask & kIsAtomic) {
    respond_atomic(qp, pkt, true);
  } else if (pkt.mask & kIsAtomicWrite) {
    respond_atomic_write(qp, pkt, true);
  } else if (pkt.h.bth.ack_req || (pkt.mask & kIsLast)) {
    send_ack(qp, aeth_ack(kAckCredits), psn_add(qp.resp.epsn, kPsnMask));
  }
  return RespStep::kDone;
}

RespStep Responder::resp_execute(Qp& qp, const ParsedPacket& pkt) {
  if (pkt.mask & kIsSend) respond_send(qp, pkt);
  else if (pkt.mask & kIsWrite) respond_write(qp, pkt);
  else if (qp.type == IBV_QPT_UC) ++dev_.counters_.rx_drop_unexpected;
  else if (pkt.mask & kIsReadReq) respond_read(qp, pkt, false);
  else if (pkt.mask & kIsAtomic) respond_atomic(qp, pkt, false);
  else if (pkt.mask & kIsAtomicWrite) respond_atomic_write(qp, pkt, false);
  else ++dev_.counters_.rx_drop_unexpected;
  return RespStep::kDone;
}

// A SEND's first packet takes a receive WQE (or, none posted, is RNR NAKed: IBA 9.7.5.2.8);
// false when the packet has been dealt with.
bool Responder::resp_begin_send(Qp& qp, const ParsedPacket& pkt) {
  const uint32_t psn = pkt.h.bth.psn;
  if (qp.resp.recv && qp.type == IBV_QPT_UC) {
    qp.resp.recv->offset = 0;  // the unfinished message was abandoned: its WQE takes this one
    return true;
  }
  if (qp.resp.recv) {
    responder_error(qp, Error::kSendOutOfSequence, psn,
                    "a SEND FIRST/ONLY arrived while the previous SEND was unfinished");
    return false;
  }
  RecvInProgress rip;
  if (!recv_.take_recv_wqe(qp, &rip)) {
    if (qp.type == IBV_QPT_UC) {  // no RNR on UC: the message is lost
      ++dev_.counters_.rx_drop_no_wqe;
      uc_discard(qp, psn, "a SEND arrived and no receive WQE was posted");
      return false;
    }
    if (wait_.hold(qp, pkt, "a SEND")) return false;
    send_rnr_nak(qp, psn);
    // The requester goes back to this PSN after the RNR wait: the rest of the message, still
    // in flight, is out of sequence and dropped without a second (sequence) NAK.
    qp.resp.nak_sent = true;
    return false;
  }
  qp.resp.recv = rip;
  // Only the scatter list's size is checked now; each SGE's key, rights and bounds are checked
  // for the bytes placed in it, as they are placed (scatter_recv), as rxe and ConnectX do.
  if (rip.wqe.num_sge > abi::kMaxSge) {
    responder_error(qp, Error::kRecvWqeInvalid, psn,
                    "receive WQE: num_sge " + std::to_string(rip.wqe.num_sge) + " exceeds the NIC's max_sge " +
                        std::to_string(abi::kMaxSge));
    return false;
  }
  return true;
}

// No receive WQE for a SEND: Receiver Not Ready. The requester retries after min_rnr_timer.
void Responder::send_rnr_nak(Qp& qp, uint32_t psn, const char* what) {
  dev_.tracer_.event(TraceKind::kNak)
      .u("qp", qp.qpn)
      .u("psn", psn)
      .s("code", "RNR")
      .s("rule", std::string(what) + " arrived and no receive WQE was posted (receiver not ready, IBA 9.7.5.2.8)");
  dev_.journal().log_limited(LogLevel::kWarn, "rnr_sent", qp.qpn, [&] {
    return "QP " + hex(qp.qpn) + ": " + what +
           " arrived and no receive WQE was posted; sent an RNR NAK, the peer "
           "will retry (post receives with ibv_post_recv before the peer sends)";
  });
  send_ack(qp, aeth_rnr_nak(qp.attr.min_rnr_timer), psn);
}

void Responder::respond_send(Qp& qp, const ParsedPacket& pkt) {
  const uint32_t psn = pkt.h.bth.psn;
  if (pkt.mask & kIsFirst) {
    if (!resp_begin_send(qp, pkt)) return;
  } else if (!qp.resp.recv) {
    responder_error(qp, Error::kSendMissingFirst, psn, "a SEND MIDDLE/LAST arrived with no SEND in progress");
    return;
  }
  RecvInProgress& r = *qp.resp.recv;
  std::string why;
  if (!pkt.payload.empty()) {
    if (int e = recv_.scatter_recv(qp, r, r.offset, pkt.payload.data(), uint32_t(pkt.payload.size()), &why)) {
      const Error err = recv_.recv_scatter_error(e);
      responder_error(qp, err, psn,
                      err == Error::kRecvTooShort ? "the SEND is longer than the receive WQE's buffers (" + why + ")"
                      : err == Error::kRecvWqeInvalid ? "receive WQE: " + why
                                                      : why);
      return;
    }
  }
  r.offset += uint32_t(pkt.payload.size());
  if ((pkt.mask & kIsLast) && (pkt.mask & kHasIeth) &&
      !windows_.invalidate_mw(qp, pkt.h.ieth_rkey, "SEND_WITH_INV", &why)) {
    // The receive completes in error and the requester hears NAK invalid request (IBA 9.9.3.1.2).
    responder_error(qp, Error::kInvalidateFailed, psn, why);
    return;
  }
  qp.resp.epsn = psn_add(qp.resp.epsn, 1);
  if (pkt.mask & kIsLast) return complete_receive(qp, finish_send_recv(qp, pkt), pkt);
  if (pkt.h.bth.ack_req) send_ack(qp, aeth_ack(kAckCredits), psn);
}

// A receive WQE completes, its request acknowledged: first the CQE, then the ACK (which waits
// for the end of the event, coalesced) - or, on a QP whose next PSN is lent to its program
// (direct_send.h), first the ACK and whatever else the NIC owes the peer, on the wire. That
// program may post the moment it sees the CQE, and its packet leaves past the NIC: were the
// NIC's answers still queued, the peer would hear the program's next request before the ACK of
// the request that made it (its send completing after its next receive), an order no RNIC
// shows, since one acknowledges a request before it completes the receive.
void Responder::complete_receive(Qp& qp, const ibv_wc& wc, const ParsedPacket& pkt) {
  const bool ack = pkt.h.bth.ack_req;
  if (!qp.req.lent) {
    dev_.completions().push_cqe(*qp.recv_cq, wc, pkt.h.bth.solicited);
    if (ack) send_ack(qp, aeth_ack(kAckCredits), pkt.h.bth.psn);
    return;
  }
  if (ack) send_ack(qp, aeth_ack(kAckCredits), pkt.h.bth.psn);
  if (!send_answers_now(qp)) requester_.end_lend(qp, dev_.now());  // READ responses first: the NIC keeps order
  dev_.env_.wire.send_queued();
  dev_.completions().push_cqe(*qp.recv_cq, wc, pkt.h.bth.solicited);
}

// A WRITE's first packet checks its RETH's rkey (a zero-length WRITE needs none); every packet
// must fit what the RETH announced. False when the packet has been refused.
bool Responder::resp_check_write(Qp& qp, const ParsedPacket& pkt) {
  const uint32_t psn = pkt.h.bth.psn;
  std::string why;
  if (pkt.mask & kIsFirst) {
    if (qp.resp.write_left) {
      responder_error(qp, Error::kWriteOutOfSequence, psn,
                      "a WRITE FIRST/ONLY arrived while the previous WRITE was unfinished");
      return false;
    }
    const Reth& r = pkt.h.reth;
    qp.resp.write_mr = nullptr;
    uint64_t mr_va = r.va;
    if (r.dma_len) {
      qp.resp.write_mr = dma_.check_rkey(qp, r.rkey, r.va, r.dma_len, IBV_ACCESS_REMOTE_WRITE, &mr_va, &why);
      if (!qp.resp.write_mr) {
        responder_error(qp, write_rkey_error(qp), psn, why);
        return false;
      }
    }
    qp.resp.write_va = mr_va;
    qp.resp.write_left = r.dma_len;
    qp.resp.write_len = r.dma_len;
  } else if (!qp.resp.write_mr && qp.resp.write_left == 0 && !pkt.payload.empty()) {
    responder_error(qp, Error::kWriteOutOfSequence, psn, "a WRITE MIDDLE/LAST arrived with no WRITE in progress");
    return false;
  }
  if (pkt.payload.size() > qp.resp.write_left || ((pkt.mask & kIsLast) && pkt.payload.size() != qp.resp.write_left)) {
    responder_error(qp, Error::kWriteLength, psn,
                    "the WRITE's payload does not match the length in its RETH (" + std::to_string(qp.resp.write_len) +
                        " bytes)");
    return false;
  }
  return true;
}

// An R_Key violation of a WRITE. On RC and XRC, a WRITE with immediate that holds its receive
// WQE completes that WQE with IBV_WC_REM_ACCESS_ERR (rxe: RESPST_ERR_RKEY_VIOLATION after
// check_resource took the WQE, then do_complete); the error belongs to that WQE, so no
// async event (IBA 9.9.3.1.3, C9-222.1.1). UC keeps the WQE for the next message (class D).
Error Responder::write_rkey_error(const Qp& qp) const {
  return qp.acked() && qp.resp.recv ? Error::kRkeyViolationWithImm : Error::kRkeyViolation;
}

// WRITE with immediate consumes a receive WQE. It is held in qp.resp.recv until the CQE, so an
// error on the way completes it (or flushes it) rather than losing it; on UC it may be the WQE
// an abandoned SEND left behind. False when there is none: RNR NAK, and nothing of the request
// is kept, since the requester sends it again (IBA 9.7.5.2.8); UC drops the message.
bool Responder::resp_take_write_imm_wqe(Qp& qp, const ParsedPacket& pkt) {
  if (qp.resp.recv) return true;
  RecvInProgress rip;
  if (!recv_.take_recv_wqe(qp, &rip)) {
    if (qp.type == IBV_QPT_UC) {
      ++dev_.counters_.rx_drop_no_wqe;
      uc_discard(qp, pkt.h.bth.psn, "a WRITE with immediate arrived and no receive WQE was posted");
      return false;
    }
    if (wait_.hold(qp, pkt, "a WRITE with immediate")) return false;
    send_rnr_nak(qp, pkt.h.bth.psn, "a WRITE with immediate");
    // As after a SEND's RNR NAK: requests behind it are out of sequence until the retry, and
    // are dropped without a sequence NAK.
    qp.resp.nak_sent = true;
    return false;
  }
  qp.resp.recv = rip;
  return true;
}

// The payload into the MR the first packet's rkey named, at the next VA.
bool Responder::resp_write_payload(Qp& qp, const ParsedPacket& pkt) {
  if (pkt.payload.empty()) return true;
  if (!qp.resp.write_mr) {
    responder_error(qp, write_rkey_error(qp), pkt.h.bth.psn, "the MR of this WRITE was deregistered");
    return false;
  }
  const Mr& mr = *qp.resp.write_mr;
  dev_.trace_points().trace_dma(qp.qpn, "write", mr.rkey, qp.resp.write_va, pkt.payload.size());
  if (int e = dma_.dma_write(mr, mr.addr + (qp.resp.write_va - mr.iova), pkt.payload.data(), pkt.payload.size())) {
    remote_dma_failed(qp, mr, qp.resp.write_va, pkt.payload.size(), pkt.h.bth.psn,
                      "DMA write into MR rkey " + hex(mr.rkey), e);
    return false;
  }
  return true;
}

void Responder::respond_write(Qp& qp, const ParsedPacket& pkt) {
  const bool with_imm = (pkt.mask & kIsLast) && (pkt.mask & kHasImm);
  // A WRITE ONLY with immediate takes its receive WQE before its RETH is looked at, as rxe's
  // check_resource runs before check_rkey: an RNR NAK then leaves no WRITE begun (the retry
  // is a new WRITE ONLY, IBA 9.7.5.2.8), and an R_Key violation completes the WQE in error.
  // A WRITE LAST with immediate keeps what its FIRST began: its retry continues that WRITE.
  const bool only_with_imm = with_imm && (pkt.mask & kIsFirst);
  if (only_with_imm && !resp_take_write_imm_wqe(qp, pkt)) return;
  if (!resp_check_write(qp, pkt)) return;
  if (with_imm && !only_with_imm && !resp_take_write_imm_wqe(qp, pkt)) return;
  if (!resp_write_payload(qp, pkt)) return;
  qp.resp.write_va += pkt.payload.size();
  qp.resp.write_left -= uint32_t(pkt.payload.size());
  qp.resp.epsn = psn_add(qp.resp.epsn, 1);
  if (pkt.mask & kIsLast) {
    qp.resp.write_mr = nullptr;
    ++qp.resp.msn;
    if (with_imm) {
      ibv_wc wc{};
      wc.wr_id = qp.resp.recv->wqe.wr_id;
      qp.resp.recv.reset();
      wc.status = IBV_WC_SUCCESS;
      wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
      wc.byte_len = qp.resp.write_len;
      wc.qp_num = qp.qpn;
      wc.src_qp = qp.attr.dest_qp_num;
      wc.wc_flags = IBV_WC_WITH_IMM;
      wc.imm_data = pkt.h.imm_be;
      return complete_receive(qp, wc, pkt);
    }
  }
  if (pkt.h.bth.ack_req) send_ack(qp, aeth_ack(kAckCredits), pkt.h.bth.psn);
}

void Responder::respond_read(Qp& qp, const ParsedPacket& pkt, bool duplicate) {
  const uint32_t psn = pkt.h.bth.psn;
  const Reth& r = pkt.h.reth;
  std::string why;
  const Mr* mr = nullptr;
  uint64_t mr_va = r.va;
  if (r.dma_len) {
    mr = dma_.check_rkey(qp, r.rkey, r.va, r.dma_len, IBV_ACCESS_REMOTE_READ, &mr_va, &why);
    if (!mr) {
      if (!duplicate) responder_error(qp, Error::kRkeyViolation, psn, why);
      return;
    }
  }
  if (!duplicate && rd_atomic_owed(qp) >= std::max<uint32_t>(1, qp.attr.max_dest_rd_atomic)) {
    responder_error(qp, Error::kTooManyRdAtomic, psn,
                    "more READ/atomic requests outstanding than max_dest_rd_atomic=" +
                        std::to_string(qp.attr.max_dest_rd_atomic));
    return;
  }
  ReadResponse rr;
  rr.first_psn = psn;
  rr.npkts = std::max<uint32_t>(1, (r.dma_len + qp.mtu_bytes - 1) / qp.mtu_bytes);
  rr.va = mr_va;
  rr.length = r.dma_len;
  rr.mr = mr;
  if (duplicate) {
    // Re-execute (9.7.5.2.1): drop any older stream of the same READ still being sent.
    std::erase_if(qp.resp.read_responses, [&](const ReadResponse& x) {
      return !x.answer && psn_diff(psn, x.first_psn) >= 0 && psn_diff(psn, psn_add(x.first_psn, x.npkts)) < 0;
    });
  } else {
    qp.resp.epsn = psn_add(qp.resp.epsn, rr.npkts);
    ++qp.resp.msn;
  }
  rr.msn = qp.resp.msn;
  dma_.drop_stage(&qp, dma_.read_stage_tag(rr));  // a READ (a duplicate too) reads the memory afresh
  qp.resp.read_responses.push_back(rr);
  if (!send_read_responses(qp, requester_.burst())) requester_.mark_busy(qp);
}

bool Responder::send_read_responses(Qp& qp, uint32_t budget) {
  while (!qp.resp.read_responses.empty() && budget) {
    ReadResponse& rr = qp.resp.read_responses.front();
    if (rr.answer) {  // an ACK or atomic answer that waited for the READs before it
      const PacketHeaders h = *rr.answer;
      qp.resp.read_responses.pop_front();
      send_answer_now(qp, h);
      --budget;
      continue;
    }
    while (rr.sent < rr.npkts && budget) {
      uint32_t k = rr.sent;
      uint32_t offset = k * qp.mtu_bytes;
      uint32_t n = std::min(qp.mtu_bytes, rr.length - std::min(rr.length, offset));
      PacketHeaders h{};
      h.bth.opcode = rr.npkts == 1       ? kRcReadResponseOnly
                     : k == 0            ? kRcReadResponseFirst
                     : k + 1 == rr.npkts ? kRcReadResponseLast
                                         : kRcReadResponseMiddle;
      h.bth.pkey = 0xffff;
      h.bth.dest_qp = qp.attr.dest_qp_num;
      h.bth.psn = psn_add(rr.first_psn, k);
      h.aeth.syndrome = aeth_ack(kAckCredits);
      h.aeth.msn = rr.msn & kPsnMask;
      const uint8_t* payload = nullptr;  // read_response_payload points it at the bytes
      if (n) {
        if (!rr.mr) {
          qp.resp.read_responses.pop_front();
          responder_error(qp, Error::kRkeyViolation, h.bth.psn, "the MR of this READ was deregistered");
          return true;
        }
        if (int e = dma_.read_response_payload(qp, rr, offset, n, &payload)) {
          const Mr& mr = *rr.mr;
          const uint64_t va = rr.va + offset;
          qp.resp.read_responses.pop_front();
          remote_dma_failed(qp, mr, va, n, h.bth.psn, "DMA read for a READ response", e);
          return true;
        }
      }
      transmit_.emit(qp, h, std::span<const uint8_t>(payload, n));
      ++rr.sent;
      --budget;
    }
    if (rr.sent == rr.npkts) qp.resp.read_responses.pop_front();
  }
  return qp.resp.read_responses.empty();
}

void Responder::respond_atomic(Qp& qp, const ParsedPacket& pkt, bool duplicate) {
  const uint32_t psn = pkt.h.bth.psn;
  auto reply = [&](uint64_t orig) {
    PacketHeaders h{};
    h.bth.opcode = kRcAtomicAcknowledge;
    h.bth.pkey = 0xffff;
    h.bth.dest_qp = qp.attr.dest_qp_num;
    h.bth.psn = psn;
    h.aeth.syndrome = aeth_ack(kAckCredits);
    h.aeth.msn = qp.resp.msn & kPsnMask;
    h.atomic_ack.orig = orig;
    send_answer_in_order(qp, h);
  };
  if (duplicate) {
    // Never apply an atomic twice: answer from the result we kept (IBA 9.7.5.2.1).
    for (const AtomicResult& a : qp.resp.atomic_results)
      if (a.psn == psn) return reply(a.orig);
    return;  // too old to replay; the requester will time out
  }
  const AtomicEth& a = pkt.h.atomic;
  if (a.va % 8) {
    responder_error(qp, Error::kMisalignedAtomic, psn, "atomic target " + hex(a.va) + " is not 8-byte aligned");
    return;
  }
  std::string why;
  uint64_t mr_va = a.va;
  const Mr* mr = dma_.check_rkey(qp, a.rkey, a.va, 8, IBV_ACCESS_REMOTE_ATOMIC, &mr_va, &why);
  if (!mr) {
    responder_error(qp, Error::kRkeyViolation, psn, why);
    return;
  }
  uint64_t addr = mr->addr + (mr_va - mr->iova);
  uint64_t orig = 0;
  dev_.trace_points().trace_dma(qp.qpn, "read", a.rkey, a.va, 8);
  // Atomic with respect to other RDMA atomics on this NIC (one event loop); not against the
  // host CPU's own accesses to the same word, like IBV_ATOMIC_HCA on real hardware.
  if (int e = dma_.dma_read(mr->ctx->pid, addr, &orig, 8)) {
    remote_dma_failed(qp, *mr, a.va, 8, psn, "atomic DMA read", e);
    return;
  }
  uint64_t next = rc_of_xrc(pkt.h.bth.opcode) == kRcCompareSwap ? (orig == a.compare ? a.swap_add : orig)
                                                                : orig + a.swap_add;
  if (next != orig) {
    dev_.trace_points().trace_dma(qp.qpn, "write", a.rkey, a.va, 8);
    if (int e = dma_.dma_write_now(mr->ctx->pid, addr, &next, 8)) {
      remote_dma_failed(qp, *mr, a.va, 8, psn, "atomic DMA write", e);
      return;
    }
  }
  qp.resp.atomic_results.push_back({psn, orig});
  if (qp.resp.atomic_results.size() > kAtomicReplayDepth) qp.resp.atomic_results.pop_front();
  qp.resp.epsn = psn_add(qp.resp.epsn, 1);
  ++qp.resp.msn;
  reply(orig);
}

// RDMA ATOMIC WRITE (IBA Annex A19; rxe's atomic_write_reply): the 8-byte payload lands at the
// RETH's address in one 8-byte store, after every request before it (the responder executes
// in PSN order, so it is ordered as an atomic is), and the answer is an RDMA READ RESPONSE
// ONLY with no payload. A duplicate is answered again and never written again: a later
// request may have changed the word since.
void Responder::respond_atomic_write(Qp& qp, const ParsedPacket& pkt, bool duplicate) {
  const uint32_t psn = pkt.h.bth.psn;
  if (duplicate) return send_atomic_write_ack(qp, psn);
  uint64_t mr_va = 0;
  const Mr* mr = resp_check_atomic_write(qp, pkt, &mr_va);
  if (!mr) return;
  uint64_t value;
  std::memcpy(&value, pkt.payload.data(), 8);  // as on the wire: the requester's 8 bytes, unchanged
  dev_.trace_points().trace_dma(qp.qpn, "write", pkt.h.reth.rkey, pkt.h.reth.va, 8);
  // One 8-byte aligned process_vm_writev: atomic with respect to every other RDMA access of
  // this NIC (one event loop); like IBV_ATOMIC_HCA, not against the host CPU's own stores.
  if (int e = dma_.dma_write_now(mr->ctx->pid, mr->addr + (mr_va - mr->iova), &value, 8)) {
    remote_dma_failed(qp, *mr, mr_va, 8, psn, "ATOMIC WRITE DMA", e);
    return;
  }
  qp.resp.epsn = psn_add(qp.resp.epsn, 1);
  ++qp.resp.msn;
  send_atomic_write_ack(qp, psn);
}

// The checks of IBA Annex A19 and rxe, in rxe's order: a responder resource, 8 bytes (RETH
// and payload), the rkey with REMOTE_WRITE on the QP and the MR (as rxe's check_qp_attr_access
// and check_rkey), and an 8-byte aligned target. On failure the NAK is sent here.
const Mr* Responder::resp_check_atomic_write(Qp& qp, const ParsedPacket& pkt, uint64_t* mr_va) {
  const uint32_t psn = pkt.h.bth.psn;
  const Reth& r = pkt.h.reth;
  if (qp.attr.max_dest_rd_atomic == 0) {
    responder_error(qp, Error::kTooManyRdAtomic, psn, "an ATOMIC WRITE arrived and max_dest_rd_atomic is 0");
    return nullptr;
  }
  if (r.dma_len != 8 || pkt.payload.size() != 8) {
    responder_error(qp, Error::kAtomicWriteLength, psn,
                    "an ATOMIC WRITE carries exactly 8 bytes; its RETH says " + std::to_string(r.dma_len) +
                        " and its payload has " + std::to_string(pkt.payload.size()));
    return nullptr;
  }
  std::string why;
  *mr_va = r.va;
  const Mr* mr = dma_.check_rkey(qp, r.rkey, r.va, 8, IBV_ACCESS_REMOTE_WRITE, mr_va, &why);
  if (!mr) {
    responder_error(qp, Error::kRkeyViolation, psn, "ATOMIC WRITE: " + why);
    return nullptr;
  }
  if (r.va % 8 || (mr->addr + (*mr_va - mr->iova)) % 8) {  // the address asked for, and where it lands
    responder_error(qp, Error::kMisalignedAtomic, psn,
                    "ATOMIC WRITE target " + hex(r.va) + " is not 8-byte aligned (IBA A19.4.2)");
    return nullptr;
  }
  return mr;
}

void Responder::send_atomic_write_ack(Qp& qp, uint32_t psn) {
  PacketHeaders h{};
  h.bth.opcode = kRcReadResponseOnly;  // with no payload: the ATOMIC WRITE's response (Annex A19)
  h.bth.pkey = 0xffff;
  h.bth.dest_qp = qp.attr.dest_qp_num;
  h.bth.psn = psn;
  h.aeth.syndrome = aeth_ack(kAckCredits);
  h.aeth.msn = qp.resp.msn & kPsnMask;
  send_answer_in_order(qp, h);
}

// The responder's DMA into or out of `mr` failed with `err`: NAK remote access error for an
// ODP page fault, remote operational error otherwise.
void Responder::remote_dma_failed(Qp& qp, const Mr& mr, uint64_t va, uint64_t len, uint32_t psn,
                                  const std::string& what, int err) {
  ++dev_.counters_.dma_errors;
  if (!is_odp_mr(mr) || err != EFAULT) {
    responder_error(qp, Error::kRemoteDmaFailed, psn, what + " failed: " + std::strerror(err));
    return;
  }
  dma_.note_odp_fault(qp, mr, va, len, true);
  responder_error(qp, Error::kOdpPageFault, psn,
                  what + ": page fault in [" + hex(va) + ", +" + std::to_string(len) + ") of an ODP MR (lkey " +
                      hex(mr.lkey) + ")" + ", a page the program has not mapped");
}

// dereg_mr (and rereg_mr of the translation): a WRITE or READ in flight through `mr` loses it.
void Responder::forget_mr(const Mr* mr) {
  for (auto& [h, qp] : dev_.qps_) {
    if (qp->resp.write_mr == mr) qp->resp.write_mr = nullptr, qp->resp.write_left = 0;
    for (auto& rr : qp->resp.read_responses)
      if (rr.mr == mr) rr.mr = nullptr;
  }
}

}  // namespace simnic::core
