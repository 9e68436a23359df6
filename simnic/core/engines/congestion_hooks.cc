// Where the engines meet the per-peer window (congestion.h): the requester asks before each
// packet, and every change to a QP's PSNs or state sets its charge again, so what it holds is
// always what it has sent and not had acknowledged: nothing in RESET, ERR or an RNR wait, and
// nothing of what go-back-N is about to resend.
#include "simnic/core/device.h"
#include "simnic/proto/psn.h"

namespace simnic::core {

// Packets sent and not acknowledged, at the path MTU each (an upper bound on the bytes the
// peer's socket buffer may hold for them). A READ counts its response packets: they are the
// bytes that come back, into this NIC's buffer, and this NIC decides how many it asks for.
uint64_t CongestionHooks::charge_of(const Qp& qp) const {
  if (!qp.acked() || !qp.sq_running() || qp.comp.rnr_wait) return 0;
  const int32_t d = proto::psn_diff(qp.req.next_psn, qp.comp.una_psn);
  return d > 0 ? uint64_t(d) * qp.mtu_bytes : 0;
}

bool CongestionHooks::admit(Qp& qp) {
  if (!qp.acked()) return true;  // UC and UD have no ACKs to return credit (as RoCE: PFC only)
  return cc_.admit(qp.qpn, qp.remote_ip, qp.mtu_bytes);
}

bool CongestionHooks::room_for_one_more(const Qp& qp) const {
  return !qp.acked() || !cc_.would_wait(qp.qpn, qp.remote_ip, qp.mtu_bytes);
}

bool CongestionHooks::ack_req(const Qp& qp, bool asked) {
  if (!qp.acked()) return false;
  asked = asked || cc_.would_wait(qp.qpn, qp.remote_ip, qp.mtu_bytes);
  cc_.note_ack_req(qp.qpn, asked);
  return asked;
}

void CongestionHooks::sync(Qp& qp, bool rewound) {
  if (!qp.acked()) return;
  cc_.set_charge(qp.qpn, qp.remote_ip, charge_of(qp), rewound);
  wake();
}

void CongestionHooks::loss(Qp& qp) {
  const uint64_t before = cc_.window(qp.remote_ip);
  cc_.on_loss(qp.remote_ip);
  if (cc_.window(qp.remote_ip) != before)
    dev_.tracer_.event(TraceKind::kCcCut).u("qp", qp.qpn).u("window", cc_.window(qp.remote_ip));
}

void CongestionHooks::end_turn(Qp& qp) {
  if (!qp.acked()) return;
  cc_.end_turn(qp.qpn);
  wake();
}

void CongestionHooks::forget(Qp& qp) {
  cc_.forget(qp.qpn);
  wake();
}

// Each QP woken runs when the current event ends (schedule) and is also listed as having work
// (busy_qps_), so an event that runs nothing scheduled (a verb) still gets it going. One that
// can no longer send gives its turn to the next in line at once.
void CongestionHooks::wake() {
  for (;;) {  // ends: every round takes at least one QP off a queue
    std::vector<uint32_t> woken = cc_.take_wakeups();
    if (woken.empty()) return;
    for (uint32_t qpn : woken) {
      Qp* qp = dev_.tables().find_qp_by_qpn(qpn);
      if (qp && qp->sq_running() && !qp->comp.rnr_wait) {
        requester_.schedule(*qp, Requester::kWorkRequester);
        requester_.mark_busy(*qp);
      } else {
        cc_.end_turn(qpn);
      }
    }
  }
}

}  // namespace simnic::core
