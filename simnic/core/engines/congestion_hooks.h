// Where the engines meet the per-peer window (congestion.h): the requester asks before each
// packet, and every change to a QP's PSNs or state sets its charge again. Owns the
// CongestionControl; calls the Requester to wake QPs that freed credit lets go.
#pragma once
#include <cstdint>

#include "simnic/core/engines/congestion.h"
#include "simnic/core/objects/objects.h"

namespace simnic::core {

class Device;
class Requester;

class CongestionHooks {
 public:
  CongestionHooks(Device& dev, Requester& requester, uint64_t peer_window_bytes)
      : dev_(dev), requester_(requester), cc_(CongestionConfig{peer_window_bytes}) {}

  const CongestionControl& control() const { return cc_; }
  // Caps the bytes in flight towards each peer (simnicd: below its UDP receive buffer).
  void set_cap(uint64_t bytes) { cc_.set_cap(bytes); }

  bool admit(Qp& qp);  // false: the QP waits for credit (queued)
  // Whether one more packet of the QP's would pass admit now and leave room after it, asking
  // nothing of the queue (a lent PSN, direct_send.h).
  bool room_for_one_more(const Qp& qp) const;
  // Whether the packet about to leave asks for an ACK: `asked` (the requester's own rule), or
  // because the QP would have to wait after it, and what it holds must come back without an
  // ACK timeout (CongestionControl::would_wait, note_ack_req).
  bool ack_req(const Qp& qp, bool asked);
  void sync(Qp& qp, bool rewound);  // after its PSNs or state changed
  void loss(Qp& qp);                // a timeout or sequence NAK: halve the window
  void end_turn(Qp& qp);            // end of a requester turn
  void forget(Qp& qp);              // destroyed

 private:
  uint64_t charge_of(const Qp& qp) const;  // what the QP holds in flight now
  void wake();                             // resume QPs that freed credit lets go

  Device& dev_;
  Requester& requester_;
  CongestionControl cc_;
};

}  // namespace simnic::core
