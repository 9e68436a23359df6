// The context page (abi::ContextShared) an idle ibv_poll_cq sleeps on: simnicd hands it out
// once per context, moves its sequence on with every CQE of the context, and wakes sleepers
// only when the shim said there are some (so a busy poller costs the NIC no system call).
#include <gtest/gtest.h>

#include "qp_pair.h"

namespace simnic::testing {
namespace {

class ContextPage : public QpPair {
 protected:
  abi::ContextShared* map(Host& h) {
    core::ShmRegion* page = nullptr;
    EXPECT_EQ(h.dev.context_verbs().map_context_page(h.ctx, &page), 0);
    EXPECT_NE(page, nullptr);
    if (!page) return nullptr;
    EXPECT_GE(page->size, sizeof(abi::ContextShared));
    return static_cast<abi::ContextShared*>(page->addr);
  }
  // `n` signaled RDMA WRITEs from A to B, all ACKed: n CQEs on A's CQ and none on B's.
  void complete_writes(int n) {
    std::vector<abi::SendWqe> ws;
    for (int i = 0; i < n; ++i) ws.push_back(rdma(*a, *b, IBV_WR_RDMA_WRITE, uint64_t(i), 0, 64, 4096));
    post_sends(*a, ws);
    fabric.deliver_all(now);
    ASSERT_EQ(poll(*a).size(), size_t(n));
  }
};

TEST_F(ContextPage, HandedOutOncePerContext) {
  start();
  ASSERT_NE(map(*a), nullptr);
  core::ShmRegion* again = nullptr;
  EXPECT_EQ(a->dev.context_verbs().map_context_page(a->ctx, &again), EALREADY);
  EXPECT_EQ(again, nullptr);
  ASSERT_NE(map(*b), nullptr);  // each context has its own
}

TEST_F(ContextPage, EveryCqeMovesTheSequenceButWakesOnlySleepers) {
  start();
  abi::ContextShared* pa = map(*a);
  abi::ContextShared* pb = map(*b);
  ASSERT_TRUE(pa && pb);
  complete_writes(5);
  EXPECT_EQ(pa->cqe_seq.load(), 5u);
  EXPECT_EQ(pb->cqe_seq.load(), 0u);  // B's CQ got nothing: an RDMA WRITE has no receive CQE
  EXPECT_TRUE(a->notifier.wakes.empty());

  pa->sleepers.store(1);  // what the shim does before it sleeps
  complete_writes(3);
  EXPECT_EQ(pa->cqe_seq.load(), 8u);
  ASSERT_EQ(a->notifier.wakes.size(), 3u);
  EXPECT_EQ(a->notifier.wakes[0], &pa->cqe_seq);
  EXPECT_TRUE(b->notifier.wakes.empty());
}

TEST_F(ContextPage, AContextWithoutOneCompletesAsBefore) {
  start();
  complete_writes(4);
  EXPECT_TRUE(a->notifier.wakes.empty());
}

}  // namespace
}  // namespace simnic::testing
