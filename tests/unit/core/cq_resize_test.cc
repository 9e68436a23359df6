// ibv_resize_cq in the NIC (QueueVerbs::resize_cq): rxe's rules (1..max_cqe entries, never fewer
// than the completions waiting, rounded up as at creation), and the pending completions moved
// into the new ring in order, at the same indices, with the arming kept.
#include <gtest/gtest.h>

#include <numeric>

#include "qp_pair.h"

namespace simnic::testing {
namespace {

class CqResize : public QpPair {
 protected:
  // `n` signaled RDMA WRITEs from A, wr_ids first..first+n-1, all ACKed: n CQEs on A's CQ.
  void complete_writes(uint64_t first, int n) {
    std::vector<abi::SendWqe> ws;
    for (int i = 0; i < n; ++i) ws.push_back(rdma(*a, *b, IBV_WR_RDMA_WRITE, first + uint64_t(i), 0, 64, 4096));
    post_sends(*a, ws);
    fabric.deliver_all(now);
  }
  // Polls at most `max` CQEs from A's CQ, as ibv_poll_cq does.
  std::vector<ibv_wc> poll_some(size_t max) {
    std::vector<ibv_wc> out;
    auto& ring = a->cq->shm->ring;
    uint32_t c = ring.consumer.value.load(), p = ring.producer.value.load();
    for (; c != p && out.size() < max; ++c) out.push_back(a->cq->slots[c & (a->cq->entries - 1)]);
    ring.consumer.value.store(c);
    return out;
  }
  static std::vector<uint64_t> range(uint64_t first, size_t n) {
    std::vector<uint64_t> v(n);
    std::iota(v.begin(), v.end(), first);
    return v;
  }
  int resize(int cqe, core::Context* ctx = nullptr) {
    core::Cq* out = nullptr;
    return a->dev.queue_verbs().resize_cq(ctx ? ctx : a->ctx, a->cq->handle, cqe, &out);
  }
};

TEST_F(CqResize, RefusesWhatRxeRefuses) {
  start();
  complete_writes(100, 40);
  EXPECT_EQ(wr_ids(poll_some(10)), range(100, 10));
  // 30 completions wait: fewer entries than that, none, more than max_cqe, or another
  // context's CQ is EINVAL, and the CQ is untouched.
  const int before = a->cq->cqe;
  EXPECT_EQ(resize(29), EINVAL);
  EXPECT_EQ(resize(0), EINVAL);
  EXPECT_EQ(resize(-1), EINVAL);
  EXPECT_EQ(resize(core::DeviceLimits::kMaxCqe + 1), EINVAL);
  EXPECT_EQ(resize(64, b->ctx), EINVAL);
  EXPECT_EQ(a->cq->cqe, before);
  EXPECT_EQ(wr_ids(poll(*a)), range(110, 30));
}

TEST_F(CqResize, DownThenUpKeepsEveryPendingCompletionInOrder) {
  start();
  complete_writes(0, 40);
  EXPECT_EQ(wr_ids(poll_some(10)), range(0, 10));
  // Down to exactly the 30 pending: rounded up to a power-of-two ring (32 slots, cqe 31).
  ASSERT_EQ(resize(30), 0);
  EXPECT_EQ(a->cq->cqe, 31);
  EXPECT_EQ(a->cq->entries, 32u);
  // The indices keep counting: the next CQE to poll is still index 10.
  EXPECT_EQ(a->cq->shm->ring.consumer.value.load(), 10u);
  EXPECT_EQ(a->cq->shm->ring.producer.value.load(), 40u);
  EXPECT_EQ(wr_ids(poll_some(5)), range(10, 5));

  // New completions land behind the moved ones, and the small ring wraps.
  complete_writes(40, 6);  // 31 pending now: the ring is full but not overrun
  EXPECT_EQ(a->dev.counters().cq_overruns, 0u);
  std::vector<uint64_t> got = wr_ids(poll(*a));
  EXPECT_EQ(got, range(15, 31));
  for (uint64_t round = 0; round < 4; ++round) {
    complete_writes(1000 + round * 20, 20);
    EXPECT_EQ(wr_ids(poll(*a)), range(1000 + round * 20, 20));
  }

  // Up, with completions waiting across the old ring's wrap point.
  complete_writes(2000, 25);
  EXPECT_EQ(wr_ids(poll_some(3)), range(2000, 3));
  ASSERT_EQ(resize(1000), 0);
  EXPECT_EQ(a->cq->cqe, 1023);
  complete_writes(2025, 60);
  EXPECT_EQ(wr_ids(poll(*a)), range(2003, 82));
  EXPECT_EQ(a->dev.counters().cq_overruns, 0u);
}

TEST_F(CqResize, AnArmedCqStillWakesItsChannel) {
  start();
  a->arm(false);
  ASSERT_EQ(resize(8), 0);
  EXPECT_TRUE(a->notifier.events.empty());
  complete_writes(7, 1);
  ASSERT_EQ(a->notifier.events.size(), 1u);
  EXPECT_EQ(a->notifier.events[0].second, a->cq->handle);
  EXPECT_EQ(wr_ids(poll(*a)), range(7, 1));
}

}  // namespace
}  // namespace simnic::testing
