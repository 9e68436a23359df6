// The completer (IBA 9.7.5.1; rxe_comp.c): takes one QP's responses (ACKs, NAKs, READ response
// data, atomic ACKs), retires the send WQEs they acknowledge with their CQEs, and keeps the
// requester's timers (the ACK timeout and the RNR wait, completer_timers.cc). Owns how far each
// peer NIC has read what this NIC sent it (peer_progress_), by which an ACK timeout tells a
// lost packet from a busy host. Calls Requester (go_back_n, schedule, idle), MemoryAccess
// (response data into the WQE's buffers) and CongestionHooks (credit, loss).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>

#include "simnic/core/engines/engine_steps.h"
#include "simnic/core/engines/peer_progress.h"
#include "simnic/core/env.h"
#include "simnic/core/errors.h"
#include "simnic/core/objects/objects.h"
#include "simnic/proto/packet.h"

namespace simnic::core {

class Device;
class Requester;
class MemoryAccess;
class CongestionHooks;

class Completer {
 public:
  Completer(Device& dev, Requester& requester, MemoryAccess& dma, CongestionHooks& congestion)
      : dev_(dev), requester_(requester), dma_(dma), congestion_(congestion) {}

  // --- Event entry points (Device hands them over) ---
  void on_timer(uint64_t now);     // time passed: fire due timers (ACK timeout, RNR wait)
  uint64_t next_deadline() const;  // the earliest timer deadline, 0 if none

  // --- Responses and completions ---
  void receive(Qp& qp, const proto::ParsedPacket& pkt, uint64_t now);
  void complete_send_wqe(Qp& qp, ibv_wc_status status);  // the oldest SQ WQE
  void requester_error(Qp& qp, Error e, const std::string& detail);

  // --- The requester's timers ---
  static uint64_t rnr_timer_ns(uint32_t timer_field);  // IBA Table 45
  static uint64_t ack_timeout_ns(const Qp& qp);        // IBA 9.7.6.1, at least 8 ms here
  void arm_ack_timer(Qp& qp, uint64_t now);
  void stop_ack_timer(Qp& qp);
  void arm_rnr_timer(Qp& qp, uint32_t psn, uint32_t timer_field, uint64_t now);
  // `lent_at_seq`: the program sent the packet under a PSN lent when the peer NIC had been
  // handed that many packets (direct_send.h), at some moment since; kNotLent: this NIC sends it.
  static constexpr uint64_t kNotLent = ~uint64_t(0);
  void note_request_sent(Qp& qp, SendWqeState& st, uint32_t pkt_in_wqe, bool last_packet, SendOutcome outcome,
                         uint64_t lent_at_seq = kNotLent);
  uint64_t packets_sent_to(uint32_t peer_ip) const;  // RC/XRC request packets, so far (PeerProgress::sent)

 private:
  // --- The completer's steps ---
  struct CompletionWork {  // one response on its way through the completer's steps
    Qp& qp;
    const proto::ParsedPacket& pkt;
    uint64_t now;
    SendWqeState* wqe = nullptr;  // the READ/atomic it answers
  };
  bool ack_msn_plausible(const Qp& qp, uint32_t psn, uint32_t msn, bool is_nak) const;
  CompStep run_step(CompletionWork& c, CompStep step);
  CompStep comp_check_state(CompletionWork& c);
  CompStep comp_check_psn(CompletionWork& c);
  CompStep comp_find_wqe(CompletionWork& c);
  CompStep comp_atomic_ack(CompletionWork& c);
  CompStep comp_read_data(CompletionWork& c);
  CompStep comp_read_atomic_done(CompletionWork& c);
  CompStep comp_check_msn(CompletionWork& c);
  CompStep comp_rnr_nak(CompletionWork& c);
  CompStep comp_nak(CompletionWork& c);
  void complete_acked(Qp& qp, uint32_t psn, uint64_t now);  // all WQEs ending at or before psn

  // --- An ACK timeout counts a lost packet, not a busy host ---
  void timer_fired(Qp& qp, uint64_t now);
  void note_peer_answered(Qp& qp, const SendWqeState& st, uint64_t now);
  AckWait judge_ack_wait(Qp& qp, uint64_t now);
  bool program_still_sending(Qp& qp, uint64_t now);
  AckWait judge_peer(Qp& qp, uint64_t now);
  AckWait judge_local_peer(const Qp& qp, const PeerProgress& peer, uint64_t now) const;
  std::string waiting_wqe_text(const Qp& qp) const;
  // Goes back N from `psn` (Requester::go_back_n), noting where the resend starts among the
  // packets towards the peer: a drop before it is answered by the resend.
  void resend_from(Qp& qp, uint32_t psn, uint64_t now, const char* cause);

  // --- The units it calls ---
  Device& dev_;
  Requester& requester_;
  MemoryAccess& dma_;
  CongestionHooks& congestion_;

  // --- State ---
  // How far each peer NIC has read what this NIC sent it, by the peer's IPv4 address.
  std::unordered_map<uint32_t, PeerProgress> peer_progress_;
};

}  // namespace simnic::core
