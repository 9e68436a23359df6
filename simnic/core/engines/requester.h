// The requester (IBA 9.7.4; rxe_req.c): turns the WQEs of one QP's send queue into request
// packets, within the QP's window and the peer's (CongestionHooks), and goes back N when the
// completer or a timer asks. It also schedules the engines: a doorbell, a completion or a
// timer sets a QP's work flag, and the event entry point runs what was scheduled before it
// returns (engine_events.cc); QPs that stopped early to let the event loop breathe are "busy".
// Owns the schedule, the busy set and the burst size. Calls Transmit (packets out),
// MemoryAccess (checks, payload), WindowBinding (BIND_MW, LOCAL_INV), CongestionHooks,
// Completer (ACK timer, errors, completions), Responder (owed READ responses, run_pending) and
// DirectSend (a PSN lent to the program: ended before each turn, offered after one that ran dry).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "simnic/core/errors.h"
#include "simnic/core/objects/objects.h"
#include "simnic/proto/packet.h"

namespace simnic::core {

class Device;
class Transmit;
class MemoryAccess;
class WindowBinding;
class CongestionHooks;
class Completer;
class Responder;
class DirectSend;

class Requester {
 public:
  Requester(Device& dev, Transmit& transmit, MemoryAccess& dma, WindowBinding& windows, CongestionHooks& congestion,
            Completer& completer, Responder& responder, DirectSend& direct)
      : dev_(dev),
        transmit_(transmit),
        dma_(dma),
        windows_(windows),
        congestion_(congestion),
        completer_(completer),
        responder_(responder),
        direct_(direct) {}

  // --- Event entry points (Device hands them over) ---
  // The application rang its doorbell `rings` times since the NIC last looked.
  void on_doorbell(Context* ctx, uint64_t now, uint64_t rings);
  void run_pending(uint64_t now);  // a turn for the busy QPs
  bool has_pending_work() const { return !busy_qps_.empty(); }
  // Packets an engine may send per turn; step mode sets 1 so a user sees them one by one.
  void set_burst(uint32_t packets) { burst_ = packets ? packets : 1; }
  uint32_t burst() const { return burst_; }

  // --- Scheduling: an engine schedules another on a QP; the event entry points run it ---
  enum WorkBits : uint8_t { kWorkRequester = 1 };
  void schedule(Qp& qp, uint8_t work);
  void run_scheduled(uint64_t now);
  void mark_busy(Qp& qp) { busy_qps_[qp.qpn] = &qp; }  // has more to send, or READ responses owed
  void not_busy(const Qp& qp) { busy_qps_.erase(qp.qpn); }

  // --- What the completer, timers and QP state changes ask of it ---
  void run(Qp& qp, uint64_t now);
  // Before anything reads or changes the QP's send side: a PSN lent to its program comes back
  // (DirectSend::take_back), with the packet the program sent under it.
  void end_lend(Qp& qp, uint64_t now);
  void offer_lend(Qp& qp, uint64_t now);          // DirectSend::offer
  bool program_holds_packet(const Qp& qp) const;  // DirectSend::program_holds_packet
  void idle(Qp& qp);                              // out of the busy set unless the responder owes answers
  void watch_sq(Qp& qp);  // posts need no doorbell while an ACK is sure to come (abi::send_must_ring)
  void go_back_n(Qp& qp, uint32_t psn, uint64_t now, const char* cause);
  const abi::SendWqe& fetch_send_wqe(Qp& qp, uint32_t index);
  // An ACK covers the whole WQE at the cursor, which a go-back-N is resending: every packet of
  // it was sent before, so the resend moves on to the next WQE. False if the WQE was never
  // sent whole (the ACK cannot cover it).
  bool skip_acked_wqe(Qp& qp);
  // The same within the WQE at the cursor: the resend goes on after what the ACK covers.
  void skip_acked_packets(Qp& qp);
  // The program sent the WQE at sq_next under a lent PSN (direct_send.h): account for it. False
  // when there was none, or the requester sends it itself.
  bool adopt_direct_packet(Qp& qp, uint64_t now);
  // What may_send allows a QP in flight: its window, in packets.
  uint32_t window_packets(const Qp& qp) const;

 private:
  // --- Sending a WQE's packets ---
  enum class WqeStart { kWait, kDoneLocally, kBegun };
  bool send_packet(Qp& qp, uint64_t now, bool sent_by_program = false);  // false when nothing more may go now
  bool may_send(Qp& qp);
  uint32_t request_headers(const Qp& qp, const SendWqeState& st, uint32_t i, proto::PacketHeaders& h);
  bool packet_sent(Qp& qp, const SendWqeState& st, uint32_t mask, uint64_t now);
  WqeStart start_wqe(Qp& qp, SendWqeState& st);
  // Whether the requester can carry the WQE out; if not, *err and *why say why.
  bool check_send_wqe(const Qp& qp, const abi::SendWqe& w, uint64_t* total, uint32_t* dst_ip, Error* err,
                      std::string* why);
  bool local_op(Qp& qp, const abi::SendWqe& w, SendWqeState& st);
  bool ud_destination(const Qp& qp, const abi::SendWqe& w, uint32_t* dst_ip, std::string* why);

  // --- The units it calls ---
  Device& dev_;
  Transmit& transmit_;
  MemoryAccess& dma_;
  WindowBinding& windows_;
  CongestionHooks& congestion_;
  Completer& completer_;
  Responder& responder_;
  DirectSend& direct_;

  // --- State ---
  std::vector<uint32_t> scheduled_;   // QPNs whose work flag is set
  std::map<uint32_t, Qp*> busy_qps_;  // QPs with more to send right now, by QPN
  uint32_t burst_ = 64;
};

}  // namespace simnic::core
