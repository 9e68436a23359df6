// A stream's posts ride on its ACKs (issue 26 point 2): while an RC QP has packets in flight
// and a timer armed, simnicd sets QpShared::sq_watched and ibv_post_send rings no doorbell
// (abi::send_must_ring); the turn each ACK brings reads the SQ producer index and sends what
// was posted meanwhile. What must hold: no WQE posted without a doorbell is left unsent, on the
// last ACK too; the word is cleared when nothing is in flight, on any state change (an ERR QP
// flushes what was posted silently) and never set in step mode.
#include <gtest/gtest.h>

#include "qp_pair.h"

namespace simnic::testing {
namespace {

class WatchedSq : public QpPair {
 protected:
  void SetUp() override { start(); }
  // What the shim does when send_must_ring says no: the WQEs and the producer index, no doorbell.
  void post_without_doorbell(const std::vector<abi::SendWqe>& ws) {
    ASSERT_FALSE(abi::send_must_ring(*a->qp->shm));
    auto& ring = a->qp->shm->sq;
    uint32_t p = ring.producer.value.load();
    for (const abi::SendWqe& w : ws) a->qp->sq[p++ & (a->qp->sq_entries - 1)] = w;
    ring.producer.value.store(p);
  }
  // B reads what A sent; A reads B's answers, one packet at a time.
  void one_round_trip() {
    fabric.deliver_all(now, [](const WirePacket& w) { return w.src_ip == kIpA; });
  }
  bool watched() const { return a->qp->shm->sq_watched.load() != 0; }
  // A's completions are those of small_writes(0, n), in order and successful, and B has the bytes.
  void expect_all_landed(size_t n) {
    ASSERT_NO_FATAL_FAILURE(expect_in_order_success(poll(*a), n));
    EXPECT_TRUE(same(*a, 0, *b, 8192, n * 64));
  }
};

// Send: four WRITEs with a doorbell; while they are in flight, three more without one.
// Expect: the word is set while packets are in flight; B's ACK gives A the turn that sends the
// three; all seven complete in order and land; the word is clear once all are acknowledged.
TEST_F(WatchedSq, WritesPostedWhilePacketsAreInFlightGoOutWithTheNextAck) {
  post_sends(*a, small_writes(0, 4));
  EXPECT_TRUE(watched());
  ASSERT_NO_FATAL_FAILURE(post_without_doorbell(small_writes(4, 3)));
  fabric.deliver_all(now);
  expect_all_landed(7);
  EXPECT_FALSE(watched());
  EXPECT_TRUE(abi::send_must_ring(*a->qp->shm));
  EXPECT_EQ(a->dev.counters().retransmits, 0u);
}

// Send: one WRITE; B's ACK for it is lost, and A's timer resends it. A WQE posted without a
// doorbell meanwhile.
// Expect: the timer's turn (not only an ACK's) reads the SQ: both WRITEs complete and land.
TEST_F(WatchedSq, APostHiddenBehindALostAckGoesOutWithTheResend) {
  post_sends(*a, small_writes(0, 1));
  fabric.deliver_all(now, [](const WirePacket& w) { return w.src_ip == kIpA; });  // the ACK is lost
  EXPECT_TRUE(watched());
  ASSERT_NO_FATAL_FAILURE(post_without_doorbell(small_writes(1, 1)));
  now += 100'000'000;
  a->dev.on_timer(now);
  run_pending();
  fabric.deliver_all(now);
  expect_all_landed(2);
  EXPECT_EQ(a->dev.counters().timeouts, 1u);
  EXPECT_FALSE(watched());
}

// Send: one WRITE; while it is in flight, the program moves the QP to ERR after posting one
// more without a doorbell.
// Expect: the state change clears the word and the ERR QP flushes both WQEs (IBA 10.3.1.1:
// posted work completes with WR_FLUSH_ERR), the hidden one included.
TEST_F(WatchedSq, AStateChangeClearsTheWordAndFlushesWhatWasPostedSilently) {
  post_sends(*a, small_writes(0, 1));
  ASSERT_NO_FATAL_FAILURE(post_without_doorbell(small_writes(1, 1)));
  ASSERT_EQ(a->modify_state(IBV_QPS_ERR, 0, 0, now), 0);
  EXPECT_FALSE(watched());
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 2u);
  for (const ibv_wc& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << wc.wr_id;
}

// Send: four WRITEs in step mode (a burst of 1).
// Expect: the word is never set: each post rings, and each doorbell is a step a student sees.
TEST_F(WatchedSq, StepModeNeverSetsTheWord) {
  a->dev.set_burst(1);
  post_sends(*a, small_writes(0, 4));
  EXPECT_FALSE(watched());
  fabric.deliver_all(now);
  expect_all_landed(4);
}

}  // namespace
}  // namespace simnic::testing
