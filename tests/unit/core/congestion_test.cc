// The NIC-wide window towards each peer (simnic/core/engines/congestion.h): many QPs sending to one
// peer never put more than the window in flight, all complete, and credit always comes back to
// zero: after completion, go-back-N, a timeout, ERR, RESET and destroy. AIMD halves the window
// on loss. First the class alone, then two Devices on the in-memory fabric.
#include <algorithm>
#include <set>

#include "qp_pair.h"
#include "simnic/core/engines/congestion.h"

namespace simnic::testing {
namespace {

using core::CongestionConfig;
using core::CongestionControl;

constexpr uint32_t kPeer = 0x7f000002;

TEST(CongestionControl, QueuesWhatDoesNotFitAndWakesInArrivalOrder) {
  CongestionControl cc(CongestionConfig{8192});
  ASSERT_TRUE(cc.admit(1, kPeer, 4096));
  cc.set_charge(1, kPeer, 8192, false);
  EXPECT_FALSE(cc.admit(2, kPeer, 4096));  // full
  EXPECT_FALSE(cc.admit(3, kPeer, 4096));
  EXPECT_FALSE(cc.admit(1, kPeer, 4096));  // the holder too, behind them
  EXPECT_TRUE(cc.queued(2) && cc.queued(3) && cc.queued(1));
  EXPECT_TRUE(cc.take_wakeups().empty());  // nothing freed yet
  cc.set_charge(1, kPeer, 4096, false);    // an ACK frees one packet's worth
  EXPECT_EQ(cc.take_wakeups(), std::vector<uint32_t>{2});
  EXPECT_FALSE(cc.admit(4, kPeer, 4096));  // a newcomer waits behind QP 3 although it would fit
  EXPECT_TRUE(cc.admit(2, kPeer, 4096));   // the woken one passes
  cc.set_charge(2, kPeer, 4096, false);
  cc.end_turn(2);
  cc.set_charge(1, kPeer, 0, false);
  cc.set_charge(2, kPeer, 0, false);
  EXPECT_EQ(cc.take_wakeups(), std::vector<uint32_t>{3});  // granted the whole window
  EXPECT_EQ(cc.in_flight(kPeer), 0u);
  cc.end_turn(3);  // it sent nothing: the next in line gets its chance
  EXPECT_EQ(cc.take_wakeups(), std::vector<uint32_t>{1});
  EXPECT_EQ(cc.stats().waiting, 1u);  // QP 4
}

TEST(CongestionControl, NothingInFlightAlwaysAdmitsOnePacket) {
  CongestionControl cc(CongestionConfig{1000});
  EXPECT_TRUE(cc.admit(1, kPeer, 4096));  // a window below one packet cannot stall the peer
  cc.set_charge(1, kPeer, 4096, false);
  EXPECT_FALSE(cc.admit(2, kPeer, 4096));
  cc.set_charge(1, kPeer, 0, false);
  EXPECT_EQ(cc.take_wakeups(), std::vector<uint32_t>{2});
}

TEST(CongestionControl, AQpHoldingUnaskedPacketsMaySendOneMoreThatAsks) {
  CongestionControl cc(CongestionConfig{8192});
  ASSERT_TRUE(cc.admit(1, kPeer, 4096));
  EXPECT_FALSE(cc.would_wait(1, kPeer, 4096));  // the next fits, nobody waits: no ACK needed
  cc.note_ack_req(1, false);
  cc.set_charge(1, kPeer, 4096, false);
  ASSERT_TRUE(cc.admit(2, kPeer, 4096));
  EXPECT_TRUE(cc.would_wait(2, kPeer, 4096));  // this one fills the window: it asks
  cc.note_ack_req(2, true);
  cc.set_charge(2, kPeer, 4096, false);
  EXPECT_FALSE(cc.admit(3, kPeer, 4096));  // full: QP 3 waits
  // QP 1's packet did not ask: without one more that asks, its credit would come back only
  // with its ACK timeout.
  EXPECT_TRUE(cc.admit(1, kPeer, 4096));
  EXPECT_TRUE(cc.would_wait(1, kPeer, 4096));
  cc.note_ack_req(1, true);
  cc.set_charge(1, kPeer, 8192, false);
  EXPECT_FALSE(cc.admit(1, kPeer, 4096));  // and then it waits like the others
  EXPECT_FALSE(cc.admit(2, kPeer, 4096));
  EXPECT_EQ(cc.stats().waiting, 3u);
}

TEST(CongestionControl, ForgetReleasesTheChargeAndLeavesTheQueue) {
  CongestionControl cc(CongestionConfig{8192});
  ASSERT_TRUE(cc.admit(1, kPeer, 4096));
  cc.set_charge(1, kPeer, 8192, false);
  EXPECT_FALSE(cc.admit(2, kPeer, 4096));
  EXPECT_FALSE(cc.admit(3, kPeer, 4096));
  cc.forget(2);  // destroyed while waiting
  cc.forget(1);  // destroyed while holding credit
  EXPECT_EQ(cc.in_flight(kPeer), 0u);
  EXPECT_EQ(cc.take_wakeups(), std::vector<uint32_t>{3});
  EXPECT_EQ(cc.stats().waiting, 0u);
}

TEST(CongestionControl, HalvesOncePerWindowOnLossAndGrowsBackWithAcks) {
  CongestionControl cc(CongestionConfig{1 << 20, 64 << 10});
  cc.set_charge(1, kPeer, 512 << 10, false);
  cc.on_loss(kPeer);
  EXPECT_EQ(cc.window(kPeer), 512u << 10);
  cc.on_loss(kPeer);  // the same loss event seen by another QP: no second cut
  EXPECT_EQ(cc.window(kPeer), 512u << 10);
  EXPECT_EQ(cc.stats().cuts, 1u);
  cc.set_charge(1, kPeer, 0, true);  // a rewind is no acknowledgement: no growth
  EXPECT_EQ(cc.window(kPeer), 512u << 10);
  for (int i = 0; i < 5; ++i) {  // a window's worth acknowledged: about +64 KiB, then more
    cc.set_charge(1, kPeer, 128 << 10, false);
    cc.set_charge(1, kPeer, 0, false);
  }
  const uint64_t grown = cc.window(kPeer);  // +16 KiB per quarter window, the window growing meanwhile
  EXPECT_GT(grown, 560u << 10);
  EXPECT_LE(grown, 592u << 10);
  cc.on_loss(kPeer);  // a new loss, a window later: cut again
  EXPECT_EQ(cc.window(kPeer), grown / 2);
  for (int i = 0; i < 10; ++i)
    cc.on_loss(kPeer), cc.set_charge(1, kPeer, 1 << 20, false), cc.set_charge(1, kPeer, 0, false);
  EXPECT_GE(cc.window(kPeer), 64u << 10);  // never below the floor
}

// N RC QP pairs between hosts A and B on the fabric; A's window towards B is small.
class PeerWindow : public QpPair {
 protected:
  static constexpr uint32_t kMtu = 1024;
  static constexpr uint64_t kWindow = 16 * kMtu;
  static constexpr uint32_t kMsg = 8192;  // 8 packets
  static constexpr int kPerQp = 4;

  void start_pairs(int n, uint8_t retry = 7) {
    make_hosts();
    a->dev.set_peer_window_cap(kWindow);
    for (int i = 0; i < n; ++i) {
      if (i) add_qps();
      qa.push_back(a->qp);
      qb.push_back(b->qp);
      LinkOptions l;
      l.retry = retry;
      connect_both(l);
    }
  }
  void add_qps() {
    for (Host* h : {a.get(), b.get()}) {
      ibv_qp_init_attr init{};
      init.qp_type = IBV_QPT_RC;
      init.cap.max_send_wr = 16;
      init.cap.max_recv_wr = 16;
      init.cap.max_send_sge = 1;
      init.cap.max_recv_sge = 1;
      ASSERT_EQ(h->dev.queue_verbs().create_qp(h->ctx, init, h->pd, h->cq->handle, h->cq->handle, 0, &h->qp), 0);
    }
  }
  // kPerQp WRITEs of kMsg bytes on pair i, each to its own place in B's memory.
  void post_writes(int i) {
    a->qp = qa[i];
    std::vector<abi::SendWqe> ws;
    for (int k = 0; k < kPerQp; ++k) {
      const size_t off = size_t(i * kPerQp + k) * kMsg;
      fill(*a, off, kMsg, uint8_t(i * 13 + k));
      ws.push_back(rdma(*a, *b, IBV_WR_RDMA_WRITE, uint64_t(i) << 8 | k, off, kMsg, off));
    }
    post_sends(*a, ws);
  }
  uint64_t in_flight() const { return a->dev.congestion().in_flight(kIpB); }
  // Data packets from A on the wire now: what B's socket buffer would hold.
  size_t a_packets_on_wire() const {
    return size_t(
        std::count_if(fabric.queue.begin(), fabric.queue.end(), [](const WirePacket& p) { return p.src_ip == kIpA; }));
  }
  // Delivers everything, one packet at a time, checking the window after each.
  void deliver_checking(const std::function<bool(const WirePacket&)>& keep = {}) {
    for (int n = 0; !fabric.queue.empty() && n < 100000; ++n) {
      ASSERT_LE(in_flight(), kWindow);
      if (wire_bounded) {
        ASSERT_LE(a_packets_on_wire() * kMtu, kWindow);
      }
      if (keep && !keep(fabric.queue.front())) {
        fabric.queue.pop_front();
        continue;
      }
      deliver_one();
    }
  }
  void expect_all_written(int n) {
    for (int i = 0; i < n * kPerQp; ++i) EXPECT_TRUE(same(*a, size_t(i) * kMsg, *b, size_t(i) * kMsg, kMsg)) << i;
  }
  std::vector<ibv_wc> successes(const std::vector<ibv_wc>& wcs) {
    std::vector<ibv_wc> out;
    for (const ibv_wc& wc : wcs) {
      EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << "wr_id " << wc.wr_id;
      out.push_back(wc);
    }
    return out;
  }
  void expect_no_credit_held() {
    EXPECT_EQ(in_flight(), 0u);
    const core::CongestionStats s = a->dev.congestion().stats();
    EXPECT_EQ(s.in_flight, 0u);
    EXPECT_EQ(s.waiting, 0u);
    for (core::Qp* q : qa) EXPECT_EQ(a->dev.congestion().charge(q->qpn), 0u);
  }
  void fire_timers() {
    now += 200 * kMs;
    a->dev.on_timer(now);
    b->dev.on_timer(now);
    run_pending();
  }

  std::vector<core::Qp*> qa, qb;
  // Whether A's packets on the wire stay within the window. Not after a QP holding credit
  // leaves: its packets already sent stay on the wire while others reuse its credit (one
  // window more, once).
  bool wire_bounded = true;
};

TEST_F(PeerWindow, ManyQpsNeverExceedTheWindowAllCompleteAndTakeTurns) {
  constexpr int kQps = 8;
  start_pairs(kQps);
  for (int i = 0; i < kQps; ++i) post_writes(i);
  EXPECT_GT(a->dev.congestion().stats().waiting, 0u) << "the window should make QPs wait";
  std::vector<ibv_wc> wcs;
  bool every_qp_started_before_one_finished = true;
  std::map<uint32_t, int> done;
  for (int n = 0; !fabric.queue.empty() && n < 100000; ++n) {
    ASSERT_LE(in_flight(), kWindow);
    ASSERT_LE(a_packets_on_wire() * kMtu, kWindow);
    deliver_one();
    for (const ibv_wc& wc : poll(*a)) {
      wcs.push_back(wc);
      if (++done[wc.qp_num] == kPerQp)  // the first QP to finish: had every QP had a turn?
        for (core::Qp* q : qa)
          if (q->req.next_psn == 0) every_qp_started_before_one_finished = false;
    }
  }
  EXPECT_EQ(successes(wcs).size(), size_t(kQps * kPerQp));
  EXPECT_TRUE(every_qp_started_before_one_finished) << "waiting QPs are served in order, not starved";
  expect_all_written(kQps);
  expect_no_credit_held();
  EXPECT_GT(a->dev.congestion().stats().wakeups, 0u);
  EXPECT_EQ(a->dev.counters().retransmits, 0u);
}

TEST_F(PeerWindow, GoBackNRechargesWhatItResendsAndHalvesTheWindow) {
  constexpr int kQps = 4;
  start_pairs(kQps);
  for (int i = 0; i < kQps; ++i) post_writes(i);
  int seen = 0;
  deliver_checking([&](const WirePacket& p) { return !(p.src_ip == kIpA && ++seen == 5); });  // lose one
  EXPECT_EQ(successes(poll(*a)).size(), size_t(kQps * kPerQp));
  EXPECT_GT(a->dev.counters().retransmits, 0u);
  EXPECT_EQ(a->dev.counters().naks_received, 1u);
  EXPECT_EQ(a->dev.congestion().stats().cuts, 1u);
  expect_all_written(kQps);
  expect_no_credit_held();
}

TEST_F(PeerWindow, TimeoutHalvesTheWindowAndTheResendIsCharged) {
  constexpr int kQps = 3;
  start_pairs(kQps);
  for (int i = 0; i < kQps; ++i) post_writes(i);
  const uint64_t held = in_flight();
  ASSERT_GT(held, 0u);
  fabric.queue.clear();  // everything lost: only the ACK timer can tell
  fire_timers();
  EXPECT_GT(a->dev.counters().timeouts, 0u);
  EXPECT_EQ(a->dev.congestion().stats().cuts, 1u);
  EXPECT_EQ(a->dev.congestion().window(kIpB), kWindow / 2);
  EXPECT_LE(in_flight(), kWindow / 2);  // resent under the halved window
  EXPECT_GT(in_flight(), 0u);
  deliver_checking();
  EXPECT_EQ(successes(poll(*a)).size(), size_t(kQps * kPerQp));
  expect_all_written(kQps);
  expect_no_credit_held();
}

// A QP holding credit goes to ERR, RESET or is destroyed: its credit comes back at once and the
// QPs waiting behind it finish.
class PeerWindowRelease : public PeerWindow, public ::testing::WithParamInterface<const char*> {};

TEST_P(PeerWindowRelease, ALeavingQpGivesItsCreditBack) {
  const std::string how = GetParam();
  constexpr int kQps = 4;
  start_pairs(kQps);
  for (int i = 0; i < kQps; ++i) post_writes(i);
  core::Qp* holder = qa[0];
  const uint64_t held = a->dev.congestion().charge(holder->qpn);
  ASSERT_GT(held, 0u);
  const uint64_t before = in_flight();
  ASSERT_GT(a->dev.congestion().stats().waiting, 0u);
  const uint32_t holder_qpn = holder->qpn;
  a->qp = holder;
  if (how == "err") {
    ASSERT_EQ(a->modify_state(IBV_QPS_ERR), 0);
  } else if (how == "reset") {
    ASSERT_EQ(a->modify_state(IBV_QPS_RESET), 0);
  } else {
    ASSERT_EQ(a->dev.queue_verbs().destroy_qp(a->ctx, holder->handle), 0);
    qa.erase(qa.begin());
  }
  EXPECT_EQ(a->dev.congestion().charge(holder_qpn), 0u);
  wire_bounded = false;
  // Credit freed went to the QPs in line (they may have sent already): nothing is held for the holder.
  EXPECT_LE(in_flight(), before - held + kWindow);
  EXPECT_LE(in_flight(), kWindow);
  deliver_checking();
  size_t ok = 0, flushed = 0;
  for (const ibv_wc& wc : poll(*a)) {
    if (wc.qp_num == holder_qpn) {
      EXPECT_NE(wc.status, IBV_WC_SUCCESS);
      ++flushed;
    } else {
      EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
      ++ok;
    }
  }
  EXPECT_EQ(ok, size_t((kQps - 1) * kPerQp));
  // ERR flushes the holder's WQEs (IBV_WC_WR_FLUSH_ERR); RESET and destroy complete nothing.
  EXPECT_EQ(flushed, how == "err" ? size_t(kPerQp) : 0u);
  expect_no_credit_held();
}

INSTANTIATE_TEST_SUITE_P(Ways, PeerWindowRelease, ::testing::Values("err", "reset", "destroy"),
                         [](const auto& info) { return std::string(info.param); });

// A READ is charged its whole response, which lands in A's own socket buffer.
TEST_F(PeerWindow, AReadIsChargedItsResponse) {
  start_pairs(1);
  fill(*b, 0, kMsg, 9);
  a->qp = qa[0];
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_READ, 1, 0, kMsg, 0));
  EXPECT_EQ(in_flight(), uint64_t(kMsg));  // one request packet, eight response packets
  deliver_checking();
  EXPECT_EQ(successes(poll(*a)).size(), 1u);
  EXPECT_TRUE(same(*a, 0, *b, 0, kMsg));
  expect_no_credit_held();
}

// An RNR NAK: the responder dropped everything after it, so nothing is held while waiting.
TEST_F(PeerWindow, AnRnrWaitHoldsNoCredit) {
  start_pairs(1);
  a->qp = qa[0];
  fill(*a, 0, 2048, 3);
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 2048));
  fabric.deliver_all(now);  // B has no receive posted: RNR NAK
  EXPECT_EQ(a->dev.counters().rnr_naks_received, 1u);
  EXPECT_EQ(in_flight(), 0u);
  b->qp = qb[0];
  post_recv(*b, 7, 0, 4096);
  fire_timers();
  deliver_checking();
  EXPECT_EQ(successes(poll(*a)).size(), 1u);
  expect_no_credit_held();
}

}  // namespace
}  // namespace simnic::testing
