// The requester's two retry budgets (IBA 9.7.5.1): retry_cnt for lost packets (ACK timeouts
// and PSN sequence NAKs) and rnr_retry for RNR NAKs. Only progress renews them.
#include <gtest/gtest.h>

#include "qp_pair.h"

namespace simnic::testing {
namespace {

using namespace simnic::proto;

class RetryBudget : public QpPair {
 protected:
  // Delivers everything and lets every due timer fire, `rounds` times, 10 ms apart.
  void run_rounds(int rounds, const std::function<bool(const WirePacket&)>& keep = {}) {
    for (int i = 0; i < rounds; ++i) {
      fabric.deliver_all(now, keep);
      now += 10 * kMs;
      a->dev.on_timer(now);
      b->dev.on_timer(now);
    }
  }
};

// Receive: RNR NAKs only (B never posts a receive), with rnr_retry = 3.
// Expect: the first try and three retries, then RNR_RETRY_EXC_ERR (it used to retry forever:
// the NAK itself renewed the budget).
TEST_F(RetryBudget, RnrRetryRunsOutAfterRnrRetryTries) {
  LinkOptions l;
  l.rnr_retry = 3;
  start({}, l);
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 64));
  run_rounds(20);
  EXPECT_EQ(a->qp->counters.rnr_naks_received, 4u);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
}

// Receive: every first transmission of PSN 0 is lost, so the responder NAKs a sequence error.
// Expect: with retry_cnt = 0 the first NAK ends the WR with RETRY_EXC_ERR, as in rxe.
TEST_F(RetryBudget, ASequenceNakSpendsARetry) {
  LinkOptions l;
  l.retry = 0;
  start({}, l);
  post_recv(*b, 7, 0, 4096);
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 3000));  // three packets
  ASSERT_EQ(fabric.queue.size(), 3u);
  fabric.queue.pop_front();  // PSN 0 lost: PSN 1 draws the NAK
  run_rounds(3);
  EXPECT_EQ(a->qp->counters.naks_received, 1u);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_RETRY_EXC_ERR);
}

// Expect: with a budget left, the same loss is repaired and the data arrives intact.
TEST_F(RetryBudget, ASequenceNakWithRetriesLeftIsRepaired) {
  LinkOptions l;
  l.retry = 1;
  start({}, l);
  fill(*a, 0, 3000, 5);
  post_recv(*b, 7, 0, 4096);
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 3000));
  fabric.queue.pop_front();
  run_rounds(3);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, 0, 3000));
}

// Receive: a three-packet SEND with no receive WQE posted.
// Expect: one RNR NAK for its first packet, and no sequence NAK for the two behind it.
TEST_F(RetryBudget, AnRnrNakIsNotFollowedByASequenceNak) {
  start();
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 3000));
  fabric.deliver_all(now);
  EXPECT_EQ(b->qp->counters.rnr_naks_sent, 1u);
  EXPECT_EQ(b->qp->counters.naks_sent, 0u);
  EXPECT_EQ(b->dev.counters().rx_drop_out_of_sequence, 2u);
  // Once a receive is posted, the retry after the RNR wait delivers the whole message.
  post_recv(*b, 7, 0, 4096);
  run_rounds(3);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
}

}  // namespace
}  // namespace simnic::testing
