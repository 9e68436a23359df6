// The requester: turns send WQEs into request packets (IBA 9.7.1). Segments messages to the
// path MTU, assigns PSNs, asks for ACKs, keeps a window, and goes back N on NAK or timeout.
#include <algorithm>
#include <cerrno>

#include "simnic/abi/wr_opcodes.h"
#include "simnic/core/device.h"
#include "simnic/core/objects/qp_state_table.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/psn.h"

namespace simnic::core {

using namespace simnic::proto;

namespace {

constexpr uint32_t kAckEvery = 16;  // AckReq at least this often within a message

bool is_local_op(uint32_t opcode) { return abi::wr_has(opcode, abi::kWrLocal); }
// READs, atomics and ATOMIC WRITEs are answered by a response, not an ACK, and count against
// max_rd_atomic (the responder keeps a resource for each: IBA 9.4.4, Annex A19).
bool is_read_or_atomic(uint32_t opcode) {
  return abi::wr_has(opcode, abi::kWrRead | abi::kWrAtomic | abi::kWrAtomicWrite);
}
// READs and atomics bring data back into the local buffer: it needs LOCAL_WRITE, and it cannot
// be inline. An ATOMIC WRITE's 8 bytes go out, from an SGE or inline, as a WRITE's do.
bool lands_locally(uint32_t opcode) { return abi::wr_has(opcode, abi::kWrRead | abi::kWrAtomic); }
bool is_eight_bytes(uint32_t opcode) { return abi::wr_has(opcode, abi::kWrAtomic | abi::kWrAtomicWrite); }

// The transport bits of the packet opcodes a QP type sends (IBA Table 38): the WR opcode
// table holds RC's, and UC, UD and XRC carry the same operations at these offsets.
uint8_t transport_bits(ibv_qp_type type) {
  switch (type) {
    case IBV_QPT_RC: return 0x00;
    case IBV_QPT_UC: return 0x20;
    case IBV_QPT_UD: return 0x60;
    case IBV_QPT_XRC_SEND: return kXrcBase;
    default: return 0xff;
  }
}

// The packet opcode for packet `i` of `n` of a WQE on this transport, or 0xff when the
// transport cannot carry the operation.
uint8_t packet_opcode(ibv_qp_type type, const abi::SendWqe& w, uint32_t i, uint32_t n) {
  const abi::WrOpcodeInfo* wr = abi::wr_opcode_info(w.opcode);
  if (!wr || !abi::wr_opcode_allowed(type, w.opcode) || (wr->props & abi::kWrLocal)) return 0xff;
  const bool first = i == 0, last = i + 1 == n;
  const uint8_t rc = first && last ? wr->only : first ? wr->first : last ? wr->last : wr->middle;
  const uint8_t op = uint8_t(transport_bits(type) | rc);
  return (opcode_info(op).mask & kIsValid) ? op : 0xff;
}

}  // namespace

void Requester::end_lend(Qp& qp, uint64_t now) { direct_.take_back(qp, now); }
void Requester::offer_lend(Qp& qp, uint64_t now) { direct_.offer(qp, now); }
bool Requester::program_holds_packet(const Qp& qp) const { return direct_.program_holds_packet(qp); }

void Requester::run(Qp& qp, uint64_t now) {
  // A PSN on offer to the program stays on offer while nothing new is posted: a turn with
  // nothing to send does not take it back (the program may be about to use it). Anything
  // posted meanwhile ends the offer first, so this turn sends it, or the program's packet
  // is accounted for (DirectSend::take_back).
  if (direct_.on_offer(qp) && qp.shm->sq.producer.value.load(std::memory_order_acquire) == qp.req.sq_next) {
    idle(qp);
    congestion_.end_turn(qp);
    watch_sq(qp);
    return;
  }
  direct_.take_back(qp, now);
  if (!qp.sq_running() || qp.comp.rnr_wait) {
    idle(qp);
    congestion_.end_turn(qp);
    watch_sq(qp);
    return;
  }
  // The engine may find WQEs before their doorbell is handled (it reads the ring): report them
  // as posted before acting on them.
  if (dev_.tracer_.on()) dev_.trace_points().trace_new_wqes(qp);
  uint32_t budget = burst_;  // per turn, so one QP cannot starve the event loop
  bool more = true;
  while (budget && (more = send_packet(qp, now))) --budget;
  if (more && qp.sq_running()) busy_qps_[qp.qpn] = &qp;
  else idle(qp);
  congestion_.end_turn(qp);
  watch_sq(qp);
  if (!more) direct_.offer(qp, now);
}

// While an RC QP has packets in flight and a timer armed (the ACK timeout, or an RNR wait), an
// ACK, a NAK or the timer brings it another turn, which reads the SQ producer index
// (may_send): posts made meanwhile need no doorbell (abi::send_must_ring), and a stream's WQEs
// are taken a batch per ACK. Not in step mode, where each doorbell is a step a student sees;
// not with timeout 0 (no timer: a lost packet would hide the posts behind it). On the last
// ACK, or when it stops for any reason, the producer index is read again after the clear, so
// no post is left unseen.
void Requester::watch_sq(Qp& qp) {
  const bool watch = burst_ > 1 && qp.acked() && qp.state == IBV_QPS_RTS && qp.comp.timer_deadline_ns != 0 &&
                     qp.comp.una_psn != qp.req.next_psn;
  if (watch == qp.req.sq_watched) return;
  qp.req.sq_watched = watch;
  if (watch) return qp.shm->sq_watched.store(1, std::memory_order_relaxed);
  abi::stop_watching_sq(*qp.shm);
  if (qp.shm->sq.producer.value.load(std::memory_order_acquire) != qp.req.sq_fetched) schedule(qp, kWorkRequester);
}

// The requester has nothing to send this turn. The QP leaves the busy set only if its responder
// owes nothing either: a QP waiting out an RNR NAK, or whose SQ is in error (the receive side of
// an SQE QP goes on working), still answers what it received, and the READ responses and the
// answers queued behind them (responder.cc, send_answer_in_order) must keep flowing.
void Requester::idle(Qp& qp) {
  if (qp.resp.read_responses.empty()) busy_qps_.erase(qp.qpn);
}

// The NIC's copy of send WQE `index`, fetched from the shared ring the first time it is asked
// for. Fetches happen in SQ order, so every WQE before sq_fetched has its copy in sq_state.
const abi::SendWqe& Requester::fetch_send_wqe(Qp& qp, uint32_t index) {
  SendWqeState& st = qp.sq_state[index & (qp.sq_entries - 1)];
  if (index == qp.req.sq_fetched) {
    st.wqe = qp.sq[index & (qp.sq_entries - 1)];
    ++qp.req.sq_fetched;
  }
  return st.wqe;
}

// Checks a fetched WQE the first time the requester reaches it: true with its length, or
// false with the error it completes with.
bool Requester::check_send_wqe(const Qp& qp, const abi::SendWqe& w, uint64_t* total, uint32_t* dst_ip, Error* err,
                               std::string* why) {
  const bool lands = lands_locally(w.opcode);
  *total = 0;
  auto fail = [&](Error e, std::string text) {
    *err = e;
    *why = std::move(text);
    return false;
  };
  // The shim takes any opcode but a BIND_MW on UD (as rxe's provider): one the transport cannot
  // carry fails here with LOC_QP_OP_ERR, as rxe_req.c's next_opcode failing (IBA Table 39).
  if (packet_opcode(qp.type, w, 0, 1) == 0xff)
    return fail(Error::kWrNotForQp, std::string(wr_opcode_name(w.opcode)) + " cannot be carried by a " +
                                        qp_type_name(qp.type) +
                                        " QP (UD sends SEND and SEND_WITH_IMM; UC adds RDMA WRITE; READ and "
                                        "atomics need RC or XRC)");
  if (qp.type == IBV_QPT_UD && !ud_destination(qp, w, dst_ip, why)) return fail(Error::kUdAddressInvalid, *why);
  if (w.send_flags & IBV_SEND_INLINE) {
    *total = w.inline_len;
    if (w.inline_len > abi::kMaxInlineData || lands)
      return fail(Error::kWqeMalformed,
                  "inline data on an operation that cannot carry it, or longer than max_inline_data");
  } else if (w.num_sge > abi::kMaxSge) {
    return fail(Error::kWqeMalformed, "num_sge " + std::to_string(w.num_sge) + " exceeds max_send_sge");
  } else if (lands) {
    // A READ or an atomic is sent before its local buffer is looked at: the responder executes
    // it, and a bad lkey, PD, range or missing LOCAL_WRITE fails the WQE with LOC_PROT_ERR only
    // when the response cannot be placed (the L_Key checks of IBA 10.6.3.1, made where rxe
    // makes them: rxe_comp.c do_read/do_atomic -> copy_data fails -> COMPST_ERROR with
    // IB_WC_LOC_PROT_ERR). The remote side effect (a compare-and-swap done) stays done, and the
    // QP goes to ERR.
    *total = abi::sge_bytes(w);
  } else if (!dma_.check_sges(qp, w.sge, w.num_sge, 0, total, why)) {
    return fail(Error::kLocalProtection, *why);
  }
  if (*total > (1ull << 31))
    return fail(Error::kMessageTooLong, "message of " + std::to_string(*total) + " bytes exceeds max_msg_sz (2^31)");
  if (is_eight_bytes(w.opcode) && *total != 8)
    return fail(Error::kMessageTooLong, std::string(wr_opcode_name(w.opcode)) +
                                            " needs exactly 8 bytes of local buffer, got " + std::to_string(*total));
  if (qp.type == IBV_QPT_UD && *total > dev_.config_.mtu_bytes)
    return fail(Error::kMessageTooLong, "a UD message must fit in one packet: " + std::to_string(*total) +
                                            " bytes is more than the port MTU " +
                                            std::to_string(dev_.config_.mtu_bytes));
  return true;
}

// First sight of the WQE at sq_next: check it, then give it its PSNs (kBegun). A BIND_MW or
// LOCAL_INV is carried out at once (kDoneLocally); kWait when it cannot start now (a limit, a
// fence, SQD) or failed.
Requester::WqeStart Requester::start_wqe(Qp& qp, SendWqeState& st) {
  // SQD finishes the WQEs that had begun and starts no new one (as rxe's DRAIN state).
  if (qp.state == IBV_QPS_SQD) return WqeStart::kWait;
  const abi::SendWqe& w = fetch_send_wqe(qp, qp.req.sq_next);
  const bool rd_atomic = is_read_or_atomic(w.opcode);
  if (rd_atomic && qp.req.rd_atomic_outstanding >= std::max<uint32_t>(1, qp.attr.max_rd_atomic)) return WqeStart::kWait;
  // A fenced WQE waits until every READ and atomic before it has completed.
  if ((w.send_flags & IBV_SEND_FENCE) && qp.req.rd_atomic_outstanding) return WqeStart::kWait;
  if (qp.type != IBV_QPT_UD && is_local_op(w.opcode))  // RC, UC (as rxe)
    return local_op(qp, w, st) ? WqeStart::kDoneLocally : WqeStart::kWait;
  std::string why;
  uint64_t total = 0;
  uint32_t dst_ip = qp.remote_ip;
  Error err{};
  if (!check_send_wqe(qp, w, &total, &dst_ip, &err, &why)) {
    // Complete in order: wait until everything before this WQE has completed.
    if (qp.comp.sq_consumer == qp.req.sq_next) completer_.requester_error(qp, err, why);
    return WqeStart::kWait;
  }
  st.begin(qp.req.next_psn);
  dma_.drop_stage(&qp, qp.req.sq_next);  // bytes staged for the slot's previous WQE are not this one's
  st.length = uint32_t(total);
  st.rd_atomic = rd_atomic;
  st.dst_ip = dst_ip;
  st.tos = transmit_.wqe_tos(qp, w);
  // A READ spans the PSNs of its response packets; an atomic one.
  st.npkts = is_eight_bytes(w.opcode) ? 1 : std::max<uint32_t>(1, (st.length + qp.mtu_bytes - 1) / qp.mtu_bytes);
  if (rd_atomic) ++qp.req.rd_atomic_outstanding;
  // Every request message counts once in the responder's MSN (IBA 9.7.7.1), retransmitted or not.
  qp.req.msn_started = psn_add(qp.req.msn_started, 1);
  st.msn = qp.req.msn_started;
  ++qp.req.sq_started;
  qp.req.pkt_in_wqe = 0;
  return WqeStart::kBegun;
}

uint32_t Requester::window_packets(const Qp& qp) const {
  return std::max(4u, std::min(dev_.config_.window_packets, dev_.config_.window_bytes / qp.mtu_bytes));
}

// Whether the requester may send now: there is a WQE, the ring is sane, the window is open.
bool Requester::may_send(Qp& qp) {
  if (!qp.send_cq) return false;  // an XRC TGT QP has no send queue, whatever its ring says
  uint32_t prod = qp.shm->sq.producer.value.load(std::memory_order_acquire);
  if (qp.req.sq_next == prod) return false;
  if (prod - qp.comp.sq_consumer > qp.sq_entries) {
    completer_.requester_error(qp, Error::kWqeMalformed,
                               "the SQ producer index ran past the ring (posted more than max_send_wr)");
    return false;
  }
  if (qp.acked() && psn_diff(qp.req.next_psn, qp.comp.una_psn) >= int32_t(window_packets(qp))) return false;
  // The NIC-wide window towards the peer (congestion.h): a QP that does not fit waits in line.
  return congestion_.admit(qp);
}

// The transport headers of packet `i` of the WQE; the bytes of payload it carries.
uint32_t Requester::request_headers(const Qp& qp, const SendWqeState& st, uint32_t i, PacketHeaders& h) {
  const abi::SendWqe& w = st.wqe;
  h.bth.opcode = packet_opcode(qp.type, w, i, st.npkts);
  h.bth.pkey = 0xffff;
  h.bth.dest_qp = qp.attr.dest_qp_num;
  h.bth.psn = psn_add(st.first_psn, i);
  if (qp.type == IBV_QPT_UD) {
    // To a group, DestQP is the multicast QPN whatever the WR's remote_qpn (IBA 9.2 BTH, 10.5).
    h.bth.dest_qp = is_multicast_ipv4(st.dst_ip) ? kMulticastQpn : w.remote_qpn & kPsnMask;
    // A Q_Key with its high bit set means "use the QP's own" (IBA 10.2.5).
    h.deth.qkey = (w.remote_qkey & 0x80000000u) ? qp.attr.qkey : w.remote_qkey;
    h.deth.src_qp = qp.qpn;
  }
  if (qp.type == IBV_QPT_XRC_SEND) h.xrc_srqn = w.remote_srqn & kPsnMask;  // the XRCETH (24 bits)
  const uint32_t mask = opcode_info(h.bth.opcode).mask, offset = i * qp.mtu_bytes;
  if (mask & kIsReadReq) {
    h.reth = {w.remote_addr + offset, w.rkey, st.length - offset};
    return 0;
  }
  if (mask & kIsAtomic) {
    h.atomic = {w.remote_addr, w.rkey, rc_of_xrc(h.bth.opcode) == kRcCompareSwap ? w.swap : w.compare_add,
                w.compare_add};
    return 0;
  }
  if (mask & kHasReth) h.reth = {w.remote_addr, w.rkey, st.length};
  if (mask & kHasImm) h.imm_be = w.imm_data;
  if (mask & kHasIeth) h.ieth_rkey = w.imm_data;  // invalidate_rkey shares the field
  // SE only means something where the responder completes a receive WQE (as rxe).
  const bool completes_recv = (mask & kIsSend) || (mask & (kIsWrite | kHasImm)) == (kIsWrite | kHasImm);
  if ((mask & kIsLast) && completes_recv && (w.send_flags & IBV_SEND_SOLICITED)) h.bth.solicited = true;
  return std::min(qp.mtu_bytes, st.length - offset);
}

// Sends the next packet of the WQE at sq_next, first checking and starting the WQE; false
// when nothing more may go now. `sent_by_program`: the program already sent it under a lent PSN
// (direct_send.h), so it is accounted for, not sent.
bool Requester::send_packet(Qp& qp, uint64_t now, bool sent_by_program) {
  if (!may_send(qp)) return false;
  SendWqeState& st = qp.sq_state[qp.req.sq_next & (qp.sq_entries - 1)];
  if (qp.req.sq_next == qp.req.sq_started) {
    const WqeStart r = start_wqe(qp, st);
    if (r != WqeStart::kBegun) return r == WqeStart::kDoneLocally;
  }
  if (st.npkts == 0) {  // a local operation met again while going back N: already done
    ++qp.req.sq_next;
    qp.req.pkt_in_wqe = 0;
    return true;
  }
  const uint32_t i = qp.req.pkt_in_wqe;
  PacketHeaders h{};
  const uint32_t payload_len = request_headers(qp, st, i, h);
  std::string why;
  const uint8_t* payload = nullptr;  // send_payload points it at the bytes
  if (payload_len &&
      (sent_by_program ? dma_.check_program_read(qp, st.wqe, payload_len, &why)
                       : dma_.send_payload(qp, qp.req.sq_next, st, i * qp.mtu_bytes, payload_len, &payload, &why))) {
    if (qp.comp.sq_consumer != qp.req.sq_next) return false;
    completer_.requester_error(qp, Error::kLocalProtection, why);
    return false;
  }
  const uint32_t mask = opcode_info(h.bth.opcode).mask;
  const bool last_pkt = (mask & (kIsReadReq | kIsAtomic)) || i + 1 == st.npkts;
  h.bth.ack_req = congestion_.ack_req(qp, last_pkt || (i + 1) % kAckEvery == 0);
  const std::span<const uint8_t> bytes(payload, payload_len);
  const SendOutcome out = sent_by_program ? transmit_.count_sent_by_program(qp, st.dst_ip, h, payload_len)
                                          : transmit_.emit_to(qp, st.dst_ip, h, bytes, st.tos);
  completer_.note_request_sent(qp, st, i, last_pkt, out, sent_by_program ? qp.req.lend_seq : Completer::kNotLent);
  return packet_sent(qp, st, mask, now);
}

// The program sent the first packet of the WQE at sq_next itself, under a PSN the NIC lent it
// (direct_send.cc). The WQE goes through the requester's steps as if this NIC had sent that
// packet: checked, given its PSN (the lent one: next_psn did not move meanwhile), its ACK
// timer armed. Its payload is not read again: the program's post carried it (checked and traced
// as the NIC's read, MemoryAccess::check_program_read). If the requester cannot
// take it now (a check fails, the peer's window filled meanwhile), it is sent again later with
// the same PSN, a duplicate the responder answers and does not execute twice (IBA 9.7.5.1.1).
bool Requester::adopt_direct_packet(Qp& qp, uint64_t now) {
  if (qp.shm->sq.producer.value.load(std::memory_order_acquire) == qp.req.sq_next) return false;  // nothing published
  if (dev_.tracer_.on()) dev_.trace_points().trace_new_wqes(qp);
  const uint64_t sent = dev_.counters_.direct_sends;
  send_packet(qp, now, true);
  if (dev_.counters_.direct_sends != sent) return true;
  schedule(qp, kWorkRequester);  // not taken: the requester sends it
  return false;
}

// Advances past the packet just sent; a UC/UD WQE is done once its last packet is out.
bool Requester::packet_sent(Qp& qp, const SendWqeState& st, uint32_t mask, uint64_t now) {
  if (mask & kIsReadReq) {
    qp.req.pkt_in_wqe = st.npkts;  // one request covers the PSNs of all its responses
    qp.req.next_psn = psn_add(st.first_psn, st.npkts);
  } else {
    qp.req.next_psn = psn_add(st.first_psn, qp.req.pkt_in_wqe + 1);
    ++qp.req.pkt_in_wqe;
  }
  if (psn_diff(qp.req.next_psn, qp.req.psn_end) > 0) qp.req.psn_end = qp.req.next_psn;
  if (qp.req.pkt_in_wqe >= st.npkts) {
    ++qp.req.sq_next;
    qp.req.pkt_in_wqe = 0;
    if (!qp.acked()) {  // UC/UD: done once on the wire
      qp.comp.una_psn = qp.req.next_psn;
      completer_.complete_send_wqe(qp, IBV_WC_SUCCESS);
      return qp.sq_running();
    }
  }
  if (!qp.comp.timer_deadline_ns) completer_.arm_ack_timer(qp, now);
  congestion_.sync(qp, false);
  return true;
}

bool Requester::ud_destination(const Qp& qp, const abi::SendWqe& w, uint32_t* dst_ip, std::string* why) {
  const Ah* ah = dev_.tables().owned(dev_.ahs_, qp.ctx, w.ah);
  if (!ah) {
    *why = "UD send: AH handle " + std::to_string(w.ah) + " names no address handle of this context";
    return false;
  }
  if (ah->pd != qp.pd) {
    *why = "UD send: the AH belongs to another PD than the QP";
    return false;
  }
  *dst_ip = ah->dst_ip;
  return true;
}

// A BIND_MW or LOCAL_INV reached in SQ order: it takes effect now, before any later WQE is
// sent, and completes once everything before it has (it spans no PSN: first_psn - 1 is the
// last PSN of its predecessor, so the ACK that retires that one retires it too).
bool Requester::local_op(Qp& qp, const abi::SendWqe& w, SendWqeState& st) {
  std::string why;
  if (ibv_wc_status status = windows_.execute_local_wqe(qp, w, &why); status != IBV_WC_SUCCESS) {
    if (qp.comp.sq_consumer != qp.req.sq_next) return false;  // complete in order
    // A failed bind is MW_BIND_ERR; a failed LOCAL_INV is LOC_QP_OP_ERR, as in rxe_do_local_ops.
    completer_.requester_error(qp, status == IBV_WC_MW_BIND_ERR ? Error::kMwBindFailed : Error::kWqeMalformed, why);
    return false;
  }
  st.begin(qp.req.next_psn);
  st.npkts = 0;
  ++qp.req.sq_started;
  ++qp.req.sq_next;
  qp.req.pkt_in_wqe = 0;
  if (qp.comp.sq_consumer + 1 == qp.req.sq_next) completer_.complete_send_wqe(qp, IBV_WC_SUCCESS);
  return true;
}

// An ACK past the resend cursor (IBA 9.7.5.1.1): the WQE at the cursor was sent whole before
// the go-back-N and is acknowledged, so the resend goes on with the next one.
bool Requester::skip_acked_wqe(Qp& qp) {
  if (qp.req.sq_next == qp.req.sq_started) return false;
  const SendWqeState& st = qp.sq_state[qp.req.sq_next & (qp.sq_entries - 1)];
  const uint32_t end = psn_add(st.first_psn, st.npkts);
  if (psn_diff(end, qp.req.psn_end) > 0) return false;
  ++qp.req.sq_next;
  qp.req.pkt_in_wqe = 0;
  if (psn_diff(end, qp.req.next_psn) > 0) qp.req.next_psn = end;
  congestion_.sync(qp, true);
  return true;
}

// The same inside the WQE at the cursor (not a READ or atomic: their responses are what is
// awaited): the resend goes on after the last packet the ACK covers.
void Requester::skip_acked_packets(Qp& qp) {
  if (qp.req.sq_next == qp.req.sq_started || psn_diff(qp.comp.una_psn, qp.req.next_psn) <= 0) return;
  const SendWqeState& st = qp.sq_state[qp.req.sq_next & (qp.sq_entries - 1)];
  const int32_t acked = psn_diff(qp.comp.una_psn, st.first_psn);
  if (st.rd_atomic || acked <= int32_t(qp.req.pkt_in_wqe) || acked >= int32_t(st.npkts)) return;
  qp.req.pkt_in_wqe = uint32_t(acked);
  qp.req.next_psn = qp.comp.una_psn;
  congestion_.sync(qp, true);
}

// Resend everything from `psn` on (IBA 9.7.5.1.2: go back N): the requester is scheduled to
// run from there when the current event ends.
void Requester::go_back_n(Qp& qp, uint32_t psn, uint64_t now, const char* cause) {
  const uint32_t mask = qp.sq_entries - 1;
  for (uint32_t idx = qp.comp.sq_consumer; idx != qp.req.sq_started; ++idx) {
    const SendWqeState& st = qp.sq_state[idx & mask];
    int32_t d = psn_diff(psn, st.first_psn);
    if (d >= 0 && d < int32_t(st.npkts)) {
      qp.req.sq_next = idx;
      qp.req.pkt_in_wqe = uint32_t(d);
      if (abi::wr_has(st.wqe.opcode, abi::kWrRead)) {
        // Re-request only what has not arrived.
        qp.req.pkt_in_wqe = st.rcvd_pkts;
        psn = psn_add(st.first_psn, st.rcvd_pkts);
      }
      qp.req.next_psn = psn;
      congestion_.sync(qp, true);  // what is to be resent is charged again as it goes
      dev_.tracer_.event(TraceKind::kRetransmit).u("qp", qp.qpn).u("psn", psn).s("cause", cause);
      ++dev_.counters_.retransmits;
      ++qp.counters.retransmits;
      completer_.arm_ack_timer(qp, now);
      schedule(qp, kWorkRequester);
      return;
    }
  }
  // Nothing outstanding at that PSN: carry on with new WQEs.
  qp.req.sq_next = qp.req.sq_started;
  qp.req.pkt_in_wqe = 0;
  schedule(qp, kWorkRequester);
}

}  // namespace simnic::core
