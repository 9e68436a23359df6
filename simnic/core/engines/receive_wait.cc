// A request that finds no receive WQE while its program is behind waits for the program's next
// receive instead of being RNR NAKed at once (issue 26; docs/performance.md, "A request that
// waits for its receive").
//
// Why: simnicd shares the host's CPUs with the programs it serves. A receiver that re-posts one
// receive per completion it polls (perftest, most servers) and loses its CPU for a scheduler
// slice finds, when it runs again, that the NIC has used up every receive it had posted: the next
// SEND was RNR NAKed, the sender waited its RNR timer and then sent again everything behind it.
// A real RNIC never takes its host's CPU, so this is the simulation's cost, not the program's
// mistake. What the NIC sees tells the two apart: completions on the receive CQ the program has
// not polled yet, or a receive the NIC took from this RQ moments ago (a program preempted between
// polling a batch and posting it again), say it is behind on work the NIC gave it and will post
// receives as it catches up; neither says it has not been receiving and did not post, and that
// is answered by an RNR NAK at once, as rxe does, so labs and tests that provoke RNR see it as
// before.
//
// The wait is what a slow responder looks like to the requester (IBA 9.7.5.2.8 says what to do
// when the request is handled, not how soon), and it ends the moment the receives are posted.
// It lasts at most half the QP's own Local ACK Timeout (IBA 9.7.6.1: 4.096 us * 2^timeout),
// since both ends of an RC connection set it alike (perftest, rdma_cm, the labs) and the
// requester's ACK timer must not fire on a request that only waits; never less than 4 ms (half
// the shortest timeout a simnic requester runs, completer_timers.cc) nor more than 64 ms; 8 ms
// for a QP that only receives (RTR, as perftest's bandwidth servers), which has no timeout of
// its own. On a loaded 2-vCPU machine a receiver waits several ms for a CPU: waits of 0.64, 2
// and 4 ms still ended in RNR NAKs and resends beside busy loops (docs/performance.md). It does
// not follow min_rnr_timer: a short RNR timer would only turn the wait back into a storm of NAKs
// and resends. When it is over, the request is handled as before: RNR NAK, and the requests
// behind it dropped as out of sequence. Not in step mode (a burst of 1), where a student steps to
// see the RNR NAK; not on UC (no RNR), nor for an SRQ (posting to it rings no doorbell).
//
// A program that has not run at all. On a loaded host (busy loops beside other NICs' traffic) a
// receiver can wait longer than one window for a CPU: 4 RNR NAKs in 40 loaded ib_send_bw runs of 4
// KiB, each a wait that fired. So a window that ends with the program's receive side just as it was
// when the window began (it polled no completion and posted no receive) while its process is
// running or waiting for a CPU (state R in any of its threads: a polling program that was not
// scheduled; its main thread may sleep in pthread_join) is followed by another, up to kMaxWaitNs in
// all: a program that has not run made no choice to leave its RQ empty. One that ran and still
// posted too few, or that sleeps (usleep, a blocking call: lab 8 keeps its last receive back that
// way to show an RNR NAK), is RNR NAKed at the end of its window, as before. Beyond half the
// requester's timeout that wait needs the requester's consent: every kNoticeNs the responder sends
// an ACK of the PSN before the waiting request with a credit count of 0 (IBA 9.7.5.1.1: a responder
// may repeat an ACK; 9.7.7.2: its AETH may advertise 0 credits, "no receive WQE"), which
// acknowledges nothing new and tells a simnic requester its packet waits for a receive
// (completer_timers.cc defers its ACK timer on it). A requester that resends the waiting request
// anyway (one that does not read the notice) ends the wait at once in an RNR NAK, so its retry_cnt
// is not spent on a wait it cannot see.
#include <algorithm>

#include "simnic/core/engines/receive_wait.h"

#include "simnic/core/device.h"
#include "simnic/core/text.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/psn.h"

namespace simnic::core {

using namespace simnic::proto;

namespace {

constexpr uint64_t kMaxHoldNs = 64'000'000;       // 64 ms
constexpr uint64_t kNoTimeoutHoldNs = 8'000'000;  // a QP that only receives (RTR) has no timeout of its own
constexpr uint64_t kRecentNs = 4'000'000;         // a receive taken this recently: the program was receiving
constexpr uint64_t kMaxHeldBytes = 512 << 10;     // per QP: a window of requests behind the first
constexpr size_t kMaxHeldPackets = 1024;          // per QP
constexpr size_t kMaxHoldingQps = 64;             // QPs waiting at once, the NIC's whole
constexpr uint64_t kNoticeNs = 4'000'000;         // half the shortest ACK timeout a simnic requester runs
constexpr uint64_t kMaxWaitNs = 1'000'000'000;    // all windows of a wait together, for a program that did not run

// The program is behind on work the NIC gave it: completions on the QP's receive CQ it has not
// polled yet, or, all polled, the NIC took one of its receives moments ago (a program preempted
// between polling a batch and posting its receives again).
bool program_is_behind(const Qp& qp, uint64_t now) {
  const abi::RingControl& ring = qp.recv_cq->shm->ring;
  if (ring.producer.value.load(std::memory_order_relaxed) != ring.consumer.value.load(std::memory_order_acquire))
    return true;
  return qp.resp.rq_taken_ns && now - qp.resp.rq_taken_ns < kRecentNs;
}

// Half the QP's Local ACK Timeout as its own requester runs it (so at least 4 ms), at most
// kMaxHoldNs; kNoTimeoutHoldNs without one.
uint64_t hold_ns(const Qp& qp) {
  if (qp.attr.timeout == 0) return kNoTimeoutHoldNs;
  return std::min(Completer::ack_timeout_ns(qp) / 2, kMaxHoldNs);
}

// What the program last did on the QP's receive side: its receive CQ's consumer index and its
// RQ's producer index. The same at the end of a window as at its start: it has not run.
uint64_t receive_side_mark(const Qp& qp) {
  const uint64_t polled = qp.recv_cq->shm->ring.consumer.value.load(std::memory_order_acquire);
  const uint64_t posted = qp.shm->rq.producer.value.load(std::memory_order_acquire);
  return polled << 32 | posted;
}

}  // namespace

bool ReceiveWait::may_hold(const Qp& qp) const {
  if (holds_off_ || requester_.burst() <= 1) return false;
  if (qp.type != IBV_QPT_RC || qp.srq || !qp.rq_entries || !qp.recv_cq || !qp.recv_cq->shm) return false;
  return holding_.size() < kMaxHoldingQps && program_is_behind(qp, dev_.now());
}

// True when `pkt` (the request that found no receive WQE) waits; false: the caller RNR NAKs.
bool ReceiveWait::hold(Qp& qp, const ParsedPacket& pkt, const char* what) {
  if (!may_hold(qp) || !keep(qp, pkt)) return false;
  const uint64_t wait = hold_ns(qp);
  qp.resp.held_until = dev_.now() + wait;
  qp.resp.held_since = dev_.now();
  qp.resp.held_notice = dev_.now() + kNoticeNs;
  qp.resp.held_mark = receive_side_mark(qp);
  holding_.push_back(qp.qpn);
  // Before the look at the end of this event (release_posted): the receives posted from
  // here on ring the doorbell once there are enough, those posted before are seen by that look
  // (abi::awaited_receives_posted).
  qp.shm->receives_awaited.store(receives_wanted(qp), std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  ++dev_.counters_.receive_waits;
  dev_.tracer_.event(TraceKind::kTimer)
      .u("qp", qp.qpn)
      .s("what", "receive_wait")
      .s("action", "armed")
      .u("psn", pkt.h.bth.psn)
      .u("due_ns", qp.resp.held_until);
  dev_.journal().log_limited(LogLevel::kInfo, "receive_wait", qp.qpn, [&] {
    return "QP " + hex(qp.qpn) + ": " + what +
           " found no receive WQE while the program was behind (completions to poll, or a receive taken moments "
           "ago); it waits up to " +
           std::to_string(wait / 1000) + " us for the next receive, then RNR NAK (docs/performance.md)";
  });
  return true;
}

bool ReceiveWait::keep_behind(Qp& qp, const ParsedPacket& pkt) {
  if (qp.resp.held.empty()) return false;
  if (pkt.h.bth.psn == qp.resp.held.front().h.bth.psn) {  // the requester resent it: it cannot see the wait
    release(qp, true);
    return true;  // answered by the RNR NAK the release sent
  }
  if (keep(qp, pkt)) return true;
  release(qp, true);  // no room for more: the wait ends now, in an RNR NAK
  return false;
}

// A copy of `pkt` joins the QP's waiting requests; false when they would pass their bounds.
bool ReceiveWait::keep(Qp& qp, const ParsedPacket& pkt) {
  QpResponder& r = qp.resp;
  if (r.held.size() >= kMaxHeldPackets || r.held_bytes + pkt.payload.size() > kMaxHeldBytes) return false;
  r.held.push_back({pkt.h, pkt.mask, {pkt.payload.begin(), pkt.payload.end()}});
  r.held_bytes += pkt.payload.size();
  if (takes_receive_wqe(pkt.mask)) {
    ++r.held_wqes;
    if (r.held_until) qp.shm->receives_awaited.store(receives_wanted(qp), std::memory_order_relaxed);
  }
  return true;
}

// What the waiting requests take: one receive WQE each that begins a SEND or ends a WRITE with
// immediate, up to the RQ's size.
bool ReceiveWait::takes_receive_wqe(uint32_t mask) {
  return ((mask & kIsSend) && (mask & kIsFirst)) || ((mask & kIsWrite) && (mask & kHasImm) && (mask & kIsLast));
}

uint32_t ReceiveWait::receives_wanted(const Qp& qp) {
  return std::max<uint32_t>(1, std::min<uint32_t>(qp.resp.held_wqes, qp.cap.max_recv_wr));
}

// The QP's waiting requests are handled again, in order: found a receive WQE, they go on (and the
// first that finds none may wait again); `expired`, the first is RNR NAKed as it would have been.
void ReceiveWait::release(Qp& qp, bool expired) {
  std::deque<HeldRequest> held;
  held.swap(qp.resp.held);
  qp.resp.held_bytes = 0;
  qp.resp.held_wqes = 0;
  qp.resp.held_until = 0;
  qp.resp.held_notice = 0;
  qp.shm->receives_awaited.store(0, std::memory_order_relaxed);
  std::erase(holding_, qp.qpn);
  dev_.tracer_.event(TraceKind::kTimer)
      .u("qp", qp.qpn)
      .s("what", "receive_wait")
      .s("action", expired ? "fired" : "stopped");
  holds_off_ = expired;
  for (const HeldRequest& r : held) responder_.receive(qp, ParsedPacket{r.h, r.mask, r.payload}, dev_.now());
  holds_off_ = false;
}

// The end of an event: a QP with a receive WQE now, or that can no longer receive, lets its
// requests go on.
void ReceiveWait::release_posted() {
  if (holding_.empty()) return;
  const std::vector<uint32_t> qpns = holding_;
  for (uint32_t qpn : qpns) {
    Qp* qp = dev_.tables().find_qp_by_qpn(qpn);
    if (!qp || qp->resp.held.empty()) {  // destroyed, or reset: nothing waits any more
      std::erase(holding_, qpn);
      continue;
    }
    if (abi::awaited_receives_posted(*qp->shm, qp->recv_cq->shm) || qp->state == IBV_QPS_ERR ||
        qp->state == IBV_QPS_RESET)
      release(*qp, false);
  }
}

void ReceiveWait::expire(uint64_t now) {
  if (holding_.empty()) return;
  const std::vector<uint32_t> qpns = holding_;
  for (uint32_t qpn : qpns) {
    Qp* qp = dev_.tables().find_qp_by_qpn(qpn);
    if (!qp || qp->resp.held.empty()) continue;
    if (qp->resp.held_until <= now) {
      if (!extend(*qp, now)) release(*qp, true);
    } else if (qp->resp.held_notice <= now) {
      notify(*qp, now);
    }
  }
  release_posted();
}

// The window is over. True when another one begins: the program has not run since this one
// began (its receive side is as it was) though it is running or waiting for a CPU (not asleep
// in a call of its own), and the wait has not reached kMaxWaitNs.
bool ReceiveWait::extend(Qp& qp, uint64_t now) {
  const uint64_t mark = receive_side_mark(qp);
  const uint64_t window = hold_ns(qp);
  if (mark != qp.resp.held_mark || now - qp.resp.held_since + window > kMaxWaitNs) return false;
  if (!qp.ctx || !dev_.env_.memory.runnable(qp.ctx->pid)) return false;  // asleep: its choice
  qp.resp.held_until = now + window;
  dev_.tracer_.event(TraceKind::kTimer)
      .u("qp", qp.qpn)
      .s("what", "receive_wait")
      .s("action", "extended")
      .s("why", "the program has not polled or posted since the window began")
      .u("due_ns", qp.resp.held_until);
  notify(qp, now);
  return true;
}

// A 0-credit ACK of the PSN before the waiting request: the requester's packet waits for a
// receive WQE (the file's comment).
void ReceiveWait::notify(Qp& qp, uint64_t now) {
  qp.resp.held_notice = now + kNoticeNs;
  responder_.send_ack(qp, aeth_ack(0), psn_add(qp.resp.epsn, kPsnMask));
}

uint64_t ReceiveWait::next_deadline() const {
  uint64_t due = 0;
  for (uint32_t qpn : holding_) {
    const Qp* qp = dev_.tables().find_qp_by_qpn(qpn);
    if (!qp || !qp->resp.held_until) continue;
    const uint64_t next = std::min(qp->resp.held_until, qp->resp.held_notice);
    due = due ? std::min(due, next) : next;
  }
  return due;
}

}  // namespace simnic::core
