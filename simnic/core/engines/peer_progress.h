// How far a peer NIC has read what this NIC sent it: what an ACK timer needs to tell a packet
// that waits from one that was lost (issue 26; completer_timers.cc, "A queue is not a loss").
#pragma once
#include <algorithm>
#include <cstdint>

#include "simnic/core/env.h"

namespace simnic::core {

struct PeerProgress {
  uint64_t sent = 0;      // packets this NIC's RC/XRC requesters sent the peer, numbered from 1
  uint64_t answered = 0;  // the highest of those the peer is known to have acknowledged
  // Packets numbered up to this one may have been lost on their way: the fault injector dropped
  // or held one back, or the kernel counted a drop towards the peer.
  uint64_t lost_seq = 0;

  // A peer on this host (PacketSink::peer_end): its socket as last looked at.
  PacketSink::PeerEnd end;
  bool looked = false;
  uint64_t read_seq = 0;  // its queue was seen empty with this many packets sent: it had read them
  uint64_t read_ns = 0;   // ... at this time
  uint64_t moved_ns = 0;  // its last sign of life: an answer, its queue shrinking or empty

  // Before a packet is sent: a peer that held nothing of ours (everything read or answered)
  // had nothing to move, so a stall is measured from now, not from its last answer, which may
  // be seconds old after a pause (between two programs, or before the first of a run's QPs).
  void note_sending(uint64_t now) {
    if (std::max(answered, read_seq) >= sent) moved_ns = now;
  }

  // Takes in the socket as the kernel shows it now.
  void look(const PacketSink::PeerEnd& e, uint64_t now) {
    const bool same_socket = looked && end.open && e.open && e.socket == end.socket;
    // A drop not seen before (the first look does not know when earlier ones happened), or a
    // socket gone or new: whatever was sent so far may be lost.
    if (!e.open || (looked && !same_socket) || e.drops > (looked ? end.drops : 0)) lost_seq = sent;
    if (!same_socket || e.queued == 0 || e.queued < end.queued) moved_ns = now;
    if (e.open && e.queued == 0 && read_seq != sent) {  // a FIFO, empty: it read everything sent
      read_seq = sent;
      read_ns = now;
    }
    end = e;
    looked = true;
  }
};

// What an expired ACK timer found: the packet still waits (the timer is armed again, no retry)
// or may be lost (a timeout); `why` says which case (a trace field, a log line).
struct AckWait {
  bool waiting = false;
  const char* why = "";
  bool unanswered = false;  // a loss judged from the peer's answers, not from its socket
  bool passed = false;      // ... because it answered packets sent after this QP's (case 1)
};

}  // namespace simnic::core
