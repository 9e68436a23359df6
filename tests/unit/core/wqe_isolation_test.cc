// A process must never reach another process's memory through the NIC. The NIC copies a send
// WQE out of the shared ring once, when it first fetches it, and acts only on that copy; every
// DMA checks the MR's PD, rights and bounds again. These tests play the attacker: a process
// that rewrites its own posted WQE (which lives in memory it can write) so that it names a
// victim's memory, after the NIC has checked it.
#include <gtest/gtest.h>

#include "qp_pair.h"

namespace simnic::testing {
namespace {

using namespace simnic::proto;

constexpr pid_t kPidVictim = 2003;
constexpr uint32_t kLen = 512;

class WqeIsolation : public QpPair {
 protected:
  void SetUp() override {
    start();
    // A second process on NIC A, with its own PD and a secret in its own MR.
    victim_ctx = a->dev.context_verbs().open_context(kPidVictim, 0, -1, 45);
    uint32_t pd = 0;
    ASSERT_EQ(a->dev.memory_verbs().alloc_pd(victim_ctx, &pd), 0);
    ASSERT_EQ(a->dev.memory_verbs().reg_mr(victim_ctx, pd, mem.addr(kPidVictim, 0), 1 << 16, mem.addr(kPidVictim, 0),
                                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, &victim_mr),
              0);
    for (uint32_t i = 0; i < kLen; ++i) mem.ptr(kPidVictim, 0)[i] = 0x5e;  // the secret
  }
  // The attacker rewrites the WQE it posted in slot `index` of its own SQ ring.
  abi::SendWqe& posted(uint32_t index) { return a->qp->sq[index & (a->qp->sq_entries - 1)]; }
  ibv_sge victim_sge() const { return {mem_addr_victim(), kLen, victim_mr->lkey}; }
  uint64_t mem_addr_victim() const { return FakeMemory::kBase; }
  bool victim_untouched() {
    for (uint32_t i = 0; i < kLen; ++i)
      if (mem.ptr(kPidVictim, 0)[i] != 0x5e) return false;
    return true;
  }
  bool carries_secret(const std::vector<uint8_t>& bytes) {
    int run = 0;
    for (uint8_t c : bytes) {
      run = c == 0x5e ? run + 1 : 0;
      if (run >= 64) return true;
    }
    return false;
  }
  // Fires the requester's ACK timeout: everything unacknowledged is sent again.
  void time_out() {
    now += 200 * kMs;
    a->dev.on_timer(now);
  }

  core::Context* victim_ctx = nullptr;
  core::Mr* victim_mr = nullptr;
};

// Receive: a SEND whose first transmission is lost. Expect: after the WQE is rewritten to name
// the victim's MR, the retransmission still carries the attacker's own bytes.
TEST_F(WqeIsolation, ARewrittenSendIsRetransmittedFromTheFetchedCopy) {
  fill(*a, 0, kLen, 3);
  post_recv(*b, 7, 0, kLen);
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, kLen));
  ASSERT_EQ(fabric.queue.size(), 1u);
  fabric.queue.clear();  // lost on the wire

  posted(0).sge[0] = victim_sge();
  time_out();
  ASSERT_FALSE(fabric.queue.empty());
  for (const WirePacket& p : fabric.queue) EXPECT_FALSE(carries_secret(p.bytes));
  fabric.deliver_all(now);

  EXPECT_TRUE(same(*a, 0, *b, 0, kLen));
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(a->qp->counters.retransmits, 1u);
}

// Expect: a num_sge made huge after the check cannot make the NIC read past the WQE: the
// fetched copy still says one SGE, and the whole message arrives intact.
TEST_F(WqeIsolation, ANumSgeRewrittenAfterTheCheckIsIgnored) {
  fill(*a, 0, 4 * 1024, 9);
  post_recv(*b, 7, 0, 4 * 1024);
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 4 * 1024));
  fabric.queue.clear();
  posted(0).num_sge = 0xffffffff;
  posted(0).sge[0].length = 0;  // every SGE then looks empty: the old code walked past the ring slot
  time_out();
  fabric.deliver_all(now);

  EXPECT_TRUE(same(*a, 0, *b, 0, 4 * 1024));
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
}

// Receive: the READ response, after the READ's local SGE was rewritten to name the victim's
// MR. Expect: the data lands in the attacker's own buffer; the victim's memory is untouched.
TEST_F(WqeIsolation, ARewrittenReadScattersIntoTheFetchedBuffer) {
  fill(*b, 0x1000, kLen, 77);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_READ, 1, 0, kLen, 0x1000));
  ASSERT_TRUE(queued(kIpA, kRcReadRequest));
  posted(0).sge[0] = victim_sge();
  fabric.deliver_all(now);

  EXPECT_TRUE(victim_untouched());
  EXPECT_TRUE(same(*a, 0, *b, 0x1000, kLen));
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
}

// Expect: an atomic's result goes to the buffer the WQE named when it was fetched.
TEST_F(WqeIsolation, ARewrittenAtomicReturnsItsResultToTheFetchedBuffer) {
  uint64_t counter = 41;
  std::memcpy(mem.ptr(b->pid, 0x2000), &counter, 8);
  abi::SendWqe w = rdma(*a, *b, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 0, 8, 0x2000);
  w.compare_add = 1;
  post_send(*a, w);
  posted(0).sge[0] = {mem_addr_victim(), 8, victim_mr->lkey};
  fabric.deliver_all(now);

  EXPECT_TRUE(victim_untouched());
  uint64_t got = 0;
  std::memcpy(&got, mem.ptr(a->pid, 0), 8);
  EXPECT_EQ(got, 41u);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
}

// Expect: a WQE that names another process's lkey from the start fails with a local protection
// error and sends nothing.
TEST_F(WqeIsolation, AnotherProcesssLkeyIsALocalProtectionError) {
  abi::SendWqe w = wqe(*a, IBV_WR_SEND, 1, 0, kLen);
  w.sge[0] = victim_sge();
  post_send(*a, w);
  EXPECT_TRUE(fabric.queue.empty());
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_TRUE(a->logger.contains("another PD"));
}

// Expect: a receive WQE naming another process's MR completes in error; nothing is written.
TEST_F(WqeIsolation, AReceiveIntoAnotherProcesssMrIsRefused) {
  // B's receive names a victim on B's NIC.
  core::Context* vctx = b->dev.context_verbs().open_context(kPidVictim, 0, -1, 46);
  uint32_t pd = 0;
  core::Mr* vmr = nullptr;
  ASSERT_EQ(b->dev.memory_verbs().alloc_pd(vctx, &pd), 0);
  ASSERT_EQ(b->dev.memory_verbs().reg_mr(vctx, pd, mem.addr(kPidVictim, 0x8000), 4096, mem.addr(kPidVictim, 0x8000),
                                         IBV_ACCESS_LOCAL_WRITE, &vmr),
            0);
  std::memset(mem.ptr(kPidVictim, 0x8000), 0x33, 4096);
  post_recv(*b, 7, 0, kLen);
  b->qp->rq[0].sge[0] = {mem.addr(kPidVictim, 0x8000), kLen, vmr->lkey};  // rewritten before use
  fill(*a, 0, kLen, 1);
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, kLen));
  fabric.deliver_all(now);

  for (uint32_t i = 0; i < 4096; ++i) ASSERT_EQ(mem.ptr(kPidVictim, 0x8000)[i], 0x33) << "byte " << i;
  auto wcs = poll(*b);
  ASSERT_FALSE(wcs.empty());
  EXPECT_EQ(wcs[0].status, IBV_WC_LOC_PROT_ERR);
}

}  // namespace
}  // namespace simnic::testing
