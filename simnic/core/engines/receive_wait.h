// Requests that wait for a receive WQE instead of an RNR NAK at once, while the program that
// will post it is behind on its completions (receive_wait.cc says why and for how long). Owns
// the list of waiting QPs (their requests are kept in qp.resp.held). Calls Responder (to hand
// the requests back, in order) and Requester (step mode: a burst of 1).
#pragma once
#include <cstdint>
#include <vector>

#include "simnic/core/objects/objects.h"
#include "simnic/proto/packet.h"

namespace simnic::core {

class Device;
class Requester;
class Responder;

class ReceiveWait {
 public:
  ReceiveWait(Device& dev, Requester& requester, Responder& responder)
      : dev_(dev), requester_(requester), responder_(responder) {}

  // The responder found no receive WQE for `pkt` (a SEND, a WRITE with immediate): true when it
  // waits for one; false, the responder RNR NAKs it.
  bool hold(Qp& qp, const proto::ParsedPacket& pkt, const char* what);
  // True when `pkt` was kept behind the QP's waiting requests, in arrival order. With no room
  // left, the wait ends at once (RNR NAK) and the responder handles `pkt` itself.
  bool keep_behind(Qp& qp, const proto::ParsedPacket& pkt);
  // The end of each event: the QPs that now have the receives their requests take (or that can
  // no longer receive) hand them back to the responder.
  void release_posted();
  // Windows that are over: another for a program that has not run, else handed back, the first
  // RNR NAKed; and the notices due.
  void expire(uint64_t now);
  uint64_t next_deadline() const;  // 0 if nothing waits

 private:
  bool may_hold(const Qp& qp) const;
  bool keep(Qp& qp, const proto::ParsedPacket& pkt);  // false: no room
  void release(Qp& qp, bool expired);
  bool extend(Qp& qp, uint64_t now);  // a window is over: another for a program that has not run
  void notify(Qp& qp, uint64_t now);  // the 0-credit ACK that tells the requester the wait goes on
  static bool takes_receive_wqe(uint32_t mask);
  static uint32_t receives_wanted(const Qp& qp);

  Device& dev_;
  Requester& requester_;
  Responder& responder_;
  std::vector<uint32_t> holding_;  // QPNs of the QPs whose requests wait
  bool holds_off_ = false;         // handing back the requests of a wait that is over: no new one
};

}  // namespace simnic::core
