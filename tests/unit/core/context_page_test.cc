// The context page (abi::ContextShared) an idle ibv_poll_cq sleeps on: simnicd hands it out
// once per context, moves its sequence on with every CQE of the context, and wakes sleepers
// only when the shim said there are some (so a busy poller costs the NIC no system call). The
// same page carries the doorbell gate (DoorbellGate below).
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

// simnicd wakes a context's sleepers once per event (Device::finish_turn), not once per CQE:
// the ACKs of three WRITEs arriving in one receive batch write three CQEs and one FUTEX_WAKE.
TEST_F(ContextPage, CqesOfOneEventWakeTheirContextOnce) {
  start();
  abi::ContextShared* pa = map(*a);
  ASSERT_NE(pa, nullptr);
  pa->sleepers.store(1);
  fabric.batch = true;
  complete_writes(3);
  EXPECT_EQ(pa->cqe_seq.load(), 3u);
  ASSERT_EQ(a->notifier.wakes.size(), 1u);
  EXPECT_EQ(a->notifier.wakes[0], &pa->cqe_seq);
}

// A context closed with a wake still due is not woken afterwards (its page is gone).
TEST_F(ContextPage, AClosedContextIsNotWokenAfterItsPageIsGone) {
  start();
  abi::ContextShared* pa = map(*a);
  ASSERT_NE(pa, nullptr);
  pa->sleepers.store(1);
  std::vector<abi::SendWqe> ws{rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, 64, 4096)};
  post_sends(*a, ws);
  // The WRITE delivered and B's turn ended (its ACK leaves), then the ACK delivered without
  // ending A's turn: A's CQE is written and its wake is due.
  for (int i = 0; i < 2; ++i) {
    ASSERT_FALSE(fabric.queue.empty());
    WirePacket p = std::move(fabric.queue.front());
    fabric.queue.pop_front();
    fabric.devices.at(p.dst_ip)->on_packet(p.src_ip, 4791, p.bytes, now, 0, p.tos);
    if (i == 0) {
      b->dev.run_pending(now);
      b->dev.finish_turn();
    }
  }
  EXPECT_EQ(pa->cqe_seq.load(), 1u);
  EXPECT_TRUE(a->notifier.wakes.empty());
  a->dev.context_verbs().close_context(a->ctx);
  a->dev.finish_turn();
  EXPECT_TRUE(a->notifier.wakes.empty());
}

TEST_F(ContextPage, AContextWithoutOneCompletesAsBefore) {
  start();
  complete_writes(4);
  EXPECT_TRUE(a->notifier.wakes.empty());
}

// The doorbell gate (abi::doorbell_must_ring, abi::open_doorbell_gate): a post that finds a
// doorbell still unanswered skips the eventfd write, which is safe only because simnicd clears
// the word before its look at the queues, so that the look sees every WQE that did not ring.
class DoorbellGate : public ContextPage {
 protected:
  // What the shim's ibv_post_send does: the WQE, the producer index (release), then the gate.
  // True if it wrote the eventfd.
  bool post_as_the_shim(Host& h, abi::ContextShared* page, const abi::SendWqe& w) {
    auto& ring = h.qp->shm->sq;
    uint32_t p = ring.producer.value.load(std::memory_order_relaxed);
    h.qp->sq[p & (h.qp->sq_entries - 1)] = w;
    ring.producer.value.store(p + 1, std::memory_order_release);
    return abi::doorbell_must_ring(page);
  }
  abi::SendWqe write_n(int i) {
    return rdma(*a, *b, IBV_WR_RDMA_WRITE, uint64_t(i), size_t(i) * 64, 64, 4096 + size_t(i) * 64);
  }
  void expect_writes_done(int n) {
    fabric.deliver_all(now);
    const std::vector<ibv_wc> wcs = poll(*a);
    ASSERT_EQ(wcs.size(), size_t(n));
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(wcs[size_t(i)].wr_id, uint64_t(i));
      EXPECT_EQ(wcs[size_t(i)].status, IBV_WC_SUCCESS);
    }
    EXPECT_TRUE(same(*a, 0, *b, 4096, size_t(n) * 64));
  }
};

TEST_F(DoorbellGate, PostsBehindAnUnansweredDoorbellDoNotRingAndItsLookSeesThemAll) {
  start();
  abi::ContextShared* page = map(*a);
  ASSERT_NE(page, nullptr);
  EXPECT_EQ(page->doorbell_gate.load(), abi::kDoorbellGateOn);  // this NIC keeps the gate
  fill(*a, 0, 4 * 64, 3);
  EXPECT_TRUE(post_as_the_shim(*a, page, write_n(0)));   // the first post rings...
  EXPECT_FALSE(post_as_the_shim(*a, page, write_n(1)));  // ...the next two do not
  EXPECT_FALSE(post_as_the_shim(*a, page, write_n(2)));
  a->dev.on_doorbell(a->ctx, now);             // simnicd answers the one eventfd write
  EXPECT_EQ(queued_opcodes(kIpA).size(), 3u);  // and its look found all three WQEs
  EXPECT_EQ(page->doorbell_rung.load(), 0u);
  EXPECT_TRUE(post_as_the_shim(*a, page, write_n(3)));  // answered: the next post rings again
  a->dev.on_doorbell(a->ctx, now);
  expect_writes_done(4);
}

// The order that makes skipping safe: the word is clear before the look reads the queues, so
// a WQE posted while the look is under way (here: as its first packet leaves) rings again.
TEST_F(DoorbellGate, APostMadeWhileTheNicLooksAtTheQueuesRings) {
  start();
  abi::ContextShared* page = map(*a);
  ASSERT_NE(page, nullptr);
  fill(*a, 0, 2 * 64, 5);
  ASSERT_TRUE(post_as_the_shim(*a, page, write_n(0)));
  std::vector<bool> rang_during_look;
  fabric.on_send = [&](const WirePacket& p) {
    if (p.src_ip == kIpA && rang_during_look.empty())
      rang_during_look.push_back(post_as_the_shim(*a, page, write_n(1)));
  };
  a->dev.on_doorbell(a->ctx, now);
  fabric.on_send = nullptr;
  ASSERT_EQ(rang_during_look.size(), 1u);
  EXPECT_TRUE(rang_during_look[0]);
  a->dev.on_doorbell(a->ctx, now);  // the eventfd write it made
  expect_writes_done(2);
}

// A page from a simnicd that does not clear the word (or no page at all): every post rings.
TEST_F(DoorbellGate, WithoutTheNicsPromiseEveryPostRings) {
  start();
  abi::ContextShared* page = map(*a);
  ASSERT_NE(page, nullptr);
  page->doorbell_gate.store(0);  // what an older simnicd's page holds
  fill(*a, 0, 3 * 64, 7);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(post_as_the_shim(*a, page, write_n(i)));
  EXPECT_TRUE(abi::doorbell_must_ring(nullptr));
  a->dev.on_doorbell(a->ctx, now);
  expect_writes_done(3);
}

}  // namespace
}  // namespace simnic::testing
