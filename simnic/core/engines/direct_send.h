// Posts that send themselves (issue 26 point 4; abi/direct_send.h has the protocol, and
// docs/architecture.md why). While an RC QP's requester has nothing left to send, this unit lends
// the QP's next PSN to its program, whose ibv_post_send then sends a one-packet SEND or WRITE, a
// one-response READ or an atomic from the NIC's socket without waking the NIC. The lend ends before
// the requester or the completer touches the QP again (an ACK, a doorbell, a timer, a state
// change), and a packet the program sent under it becomes the NIC's own there
// (Requester::adopt_direct_packet). A lend nobody ends lasts kLendNs: then the sweep ends it, so a
// packet the program sent and the wire lost is resent kLendNs later than the NIC's own would be,
// and an idle QP stops costing timer wake-ups.
//
// Owns the lends that are out (their QPNs, oldest first). Calls Requester (adopt), Responder
// (what the QP owes its peer leaves before a lend) and reads the Completer's and
// CongestionHooks' view of the peer.
#pragma once
#include <cstdint>
#include <deque>

#include "simnic/core/objects/objects.h"

namespace simnic::core {

class Device;
class Requester;
class Completer;
class CongestionHooks;
class Responder;

class DirectSend {
 public:
  DirectSend(Device& dev, Requester& requester, Completer& completer, CongestionHooks& congestion, Responder& responder)
      : dev_(dev), requester_(requester), completer_(completer), congestion_(congestion), responder_(responder) {}

  // The requester has nothing to send on `qp`: lend its next PSN, where the program may use it.
  void offer(Qp& qp, uint64_t now);
  // Before the engines read or change qp's send side: the lend ends, and a packet its program
  // sent under it is accounted for.
  void take_back(Qp& qp, uint64_t now);
  // No fault injected, no pcap, no trace: lends may be offered (else every
  // lend is taken back at the end of the event, Device::finish_turn).
  bool lends_allowed() const;
  // Whether qp's lend is out and untaken.
  bool on_offer(const Qp& qp) const;
  // Whether the program took qp's last lend and has not yet sent its packet (handed it to the
  // kernel): the NIC accounts it as sent, but it is not on the wire yet.
  bool program_holds_packet(const Qp& qp) const;
  // Step mode on, a fault set: no program sends past the NIC from now on (an event entry point:
  // what adoption scheduled runs before it returns).
  void take_back_all(uint64_t now);

  // --- Timer ---
  void sweep(uint64_t now);        // ends the lends whose time is up
  uint64_t next_deadline() const;  // 0 when no lend is out

  // Twice the shortest ACK timeout here (Completer::ack_timeout_ns): a program that posts
  // within it after each completion sends every packet itself.
  static constexpr uint64_t kLendNs = 16'000'000;

 private:
  bool may_lend(const Qp& qp) const;
  struct Lent {
    uint32_t qpn;
    uint32_t epoch;
    uint64_t until_ns;
  };
  void drop_ended();                    // forgets lends that ended before their time
  void take_back_oldest(uint64_t now);  // the first entry, if its lend is still out
  Qp* still_out(const Lent& l) const;   // its QP, if that lend has not ended

  Device& dev_;
  Requester& requester_;
  Completer& completer_;
  CongestionHooks& congestion_;
  Responder& responder_;
  std::deque<Lent> lent_;  // in the order offered, which is the order they are due
  uint32_t epoch_ = 0;     // the last offer's (per NIC: a QP recreated under a known QPN cannot match)
};

}  // namespace simnic::core
