// Memory windows (IBA 10.6.7): BIND_MW and LOCAL_INV work requests, remote access through a
// window's rkey, and invalidation by a peer's SEND_WITH_INV. Host B owns the memory and binds
// windows on its QP; host A reads and writes through them. Every test checks the bytes (or
// that none moved), the completions and their statuses, and, for errors, the rule logged.
#include <gtest/gtest.h>

#include "qp_pair.h"

namespace simnic::testing {
namespace {

constexpr size_t kWinMr = 256 * 1024;  // B's MR for windows: [256 KiB, 512 KiB) of its memory
constexpr uint32_t kWinMrLen = 256 * 1024;

class MemoryWindow : public QpPair {
 protected:
  // An MR for windows on B. Without remote rights: only the windows grant them.
  core::Mr* window_mr(uint32_t access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND) {
    return reg_mr(*b, kWinMr, kWinMrLen, access);
  }
  // A's RDMA op at `remote_va` through `rkey`.
  abi::SendWqe via(ibv_wr_opcode op, uint64_t wr_id, size_t local_off, uint32_t len, uint64_t remote_va,
                   uint32_t rkey) {
    abi::SendWqe w = wqe(*a, op, wr_id, local_off, len);
    w.remote_addr = remote_va;
    w.rkey = rkey;
    return w;
  }
  // Binds and checks B's completion; returns the window's new rkey.
  uint32_t bound(core::Mw* mw, core::Mr* mr, size_t off, uint64_t len, uint32_t access) {
    post_send(*b, bind_wqe(*b, mw, mr, off, len, access, 500));
    auto wcs = poll(*b);
    EXPECT_EQ(wcs.size(), 1u);
    if (wcs.size() == 1) {
      EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
      EXPECT_EQ(wcs[0].opcode, IBV_WC_BIND_MW);
      EXPECT_EQ(wcs[0].wr_id, 500u);
    }
    EXPECT_EQ(mw->rkey >> 8, mw->handle);
    return mw->rkey;
  }
  // A second RC pair between the same hosts (same PDs and CQs), for "another QP": swap_pairs()
  // makes it the pair post_send and the helpers use, and swaps back.
  void make_second_pair() {
    for (Host* h : {a.get(), b.get()}) {
      ibv_qp_init_attr init{};
      init.qp_type = IBV_QPT_RC;
      init.cap = {64, 64, 4, 4, 0};
      core::Qp*& other = h == a.get() ? a_qp2 : b_qp2;
      ASSERT_EQ(h->dev.queue_verbs().create_qp(h->ctx, init, h->pd, h->cq->handle, h->cq->handle, 0, &other), 0);
    }
    swap_pairs();
    connect_both();
    swap_pairs();
  }
  void swap_pairs() {
    std::swap(a->qp, a_qp2);
    std::swap(b->qp, b_qp2);
  }
  // B's only completion of a local operation (BIND_MW, LOCAL_INV).
  ibv_wc b_local(const abi::SendWqe& w) {
    post_send(*b, w);
    auto wcs = poll(*b);
    EXPECT_EQ(wcs.size(), 1u);
    return wcs.empty() ? ibv_wc{} : wcs[0];
  }
  static std::string log_of(const Host& h) {
    std::string all;
    for (const std::string& l : h.logger.lines) all += l + "\n";
    return all;
  }
  core::Qp* a_qp2 = nullptr;
  core::Qp* b_qp2 = nullptr;

  // A's only completion, after the wire is drained.
  ibv_wc a_result() {
    fabric.deliver_all(now);
    run_pending();
    auto wcs = poll(*a);
    EXPECT_EQ(wcs.size(), 1u);
    return wcs.empty() ? ibv_wc{} : wcs[0];
  }
};

constexpr uint32_t kRW = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;

TEST_F(MemoryWindow, Type2WindowCarriesWriteAndReadIntoAnMrWithoutRemoteRights) {
  start();
  core::Mr* mr = window_mr();
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_2);
  const uint32_t old_rkey = mw->rkey;
  uint32_t rkey = bound(mw, mr, kWinMr + 4096, 8192, kRW);
  EXPECT_EQ(rkey, ibv_inc_rkey(old_rkey));
  fill(*a, 0, 3000, 21);
  post_send(*a, via(IBV_WR_RDMA_WRITE, 1, 0, 3000, mem.addr(b->pid, kWinMr + 4096 + 100), rkey));
  ibv_wc wc = a_result();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, kWinMr + 4096 + 100, 3000));
  post_send(*a, via(IBV_WR_RDMA_READ, 2, 16384, 3000, mem.addr(b->pid, kWinMr + 4096 + 100), rkey));
  wc = a_result();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.byte_len, 3000u);
  EXPECT_TRUE(same(*a, 16384, *a, 0, 3000));
  // The MR's own key grants nothing remote.
  post_send(*a, via(IBV_WR_RDMA_READ, 3, 16384, 8, mem.addr(b->pid, kWinMr), mr->rkey));
  EXPECT_EQ(a_result().status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(b->logger.contains("MR registered without IBV_ACCESS_REMOTE_READ"));
}

TEST_F(MemoryWindow, ZeroBasedWindowIsAddressedFromZero) {
  start();
  core::Mr* mr = window_mr();
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_2);
  abi::SendWqe w = bind_wqe(*b, mw, mr, 0, 4096, kRW | IBV_ACCESS_ZERO_BASED, 500);
  w.remote_addr = 0;  // ignored: a zero-based window starts at the MR's first byte
  post_send(*b, w);
  ASSERT_EQ(poll(*b).size(), 1u);
  fill(*a, 0, 64, 3);
  post_send(*a, via(IBV_WR_RDMA_WRITE, 1, 0, 64, 0x10, mw->rkey));
  EXPECT_EQ(a_result().status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, kWinMr + 0x10, 64));
  post_send(*a, via(IBV_WR_RDMA_WRITE, 2, 0, 16, 4096 - 8, mw->rkey));
  EXPECT_EQ(a_result().status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(b->logger.contains("is outside the window [0x0, +4096)"));
}

TEST_F(MemoryWindow, WindowRightsAreEnforced) {
  start();
  core::Mr* mr = window_mr();
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_2);
  uint32_t rkey = bound(mw, mr, kWinMr, 4096, IBV_ACCESS_REMOTE_READ);
  std::memset(mem.ptr(b->pid, kWinMr), 0x5a, 64);
  fill(*a, 0, 64, 1);
  post_send(*a, via(IBV_WR_RDMA_WRITE, 1, 0, 64, mem.addr(b->pid, kWinMr), rkey));
  EXPECT_EQ(a_result().status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(mem.ptr(b->pid, kWinMr)[0], 0x5a);  // nothing written
  EXPECT_TRUE(b->logger.contains("not valid for REMOTE_WRITE (window bound with REMOTE_READ)"));
}

TEST_F(MemoryWindow, LocalInvalidateRevokesTheWindow) {
  start();
  core::Mr* mr = window_mr();
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_2);
  uint32_t rkey = bound(mw, mr, kWinMr, 4096, kRW);
  post_send(*b, local_inv_wqe(rkey, 600));
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_LOCAL_INV);
  EXPECT_EQ(mr->bound_mws, 0u);
  post_send(*a, via(IBV_WR_RDMA_READ, 1, 0, 64, mem.addr(b->pid, kWinMr), rkey));
  EXPECT_EQ(a_result().status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(b->logger.contains("that is not bound"));
}

TEST_F(MemoryWindow, SendWithInvalidateFreesTheWindowAndReportsTheKey) {
  start();
  core::Mr* mr = window_mr();
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_2);
  uint32_t rkey = bound(mw, mr, kWinMr, 4096, kRW);
  post_recv(*b, 70, 65536, 256);
  fill(*a, 0, 100, 9);
  abi::SendWqe s = wqe(*a, IBV_WR_SEND_WITH_INV, 1, 0, 100);
  s.imm_data = rkey;  // invalidate_rkey
  post_send(*a, s);
  EXPECT_EQ(a_result().status, IBV_WC_SUCCESS);
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(wcs[0].byte_len, 100u);
  EXPECT_TRUE(wcs[0].wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(wcs[0].invalidated_rkey, rkey);
  EXPECT_TRUE(same(*a, 0, *b, 65536, 100));
  EXPECT_EQ(mw->mr, nullptr);
  // The window is free again: B may bind it anew, and the old key stays dead.
  uint32_t rkey2 = bound(mw, mr, kWinMr, 4096, kRW);
  EXPECT_NE(rkey2, rkey);
  post_send(*a, via(IBV_WR_RDMA_READ, 2, 0, 64, mem.addr(b->pid, kWinMr), rkey));
  EXPECT_EQ(a_result().status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(b->logger.contains("is stale"));
}

TEST_F(MemoryWindow, SendWithInvalidateOfAnMrKeyIsAnInvalidRequest) {
  start();
  post_recv(*b, 70, 65536, 256);
  abi::SendWqe s = wqe(*a, IBV_WR_SEND_WITH_INV, 1, 0, 100);
  s.imm_data = b->mr->rkey;
  post_send(*a, s);
  EXPECT_EQ(a_result().status, IBV_WC_REM_INV_REQ_ERR);
  auto wcs = poll(*b);
  ASSERT_GE(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 70u);
  EXPECT_EQ(wcs[0].status, IBV_WC_REM_INV_REQ_ERR);
  EXPECT_TRUE(b->logger.contains("SEND_WITH_INV of rkey"));
  EXPECT_TRUE(b->logger.contains("it names an MR from ibv_reg_mr, which cannot be invalidated"));
}

TEST_F(MemoryWindow, BindToAnMrWithoutMwBindFailsAndFlushesTheRest) {
  start();
  core::Mr* mr = window_mr(IBV_ACCESS_LOCAL_WRITE);
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_2);
  const uint32_t rkey_before = mw->rkey;
  post_sends(*b, {bind_wqe(*b, mw, mr, kWinMr, 4096, kRW, 500), wqe(*b, IBV_WR_SEND, 501, 0, 8)});
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 500u);
  EXPECT_EQ(wcs[0].status, IBV_WC_MW_BIND_ERR);
  EXPECT_EQ(wcs[1].wr_id, 501u);
  EXPECT_EQ(wcs[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(b->qp->state, IBV_QPS_ERR);
  EXPECT_EQ(mw->rkey, rkey_before);
  EXPECT_EQ(mw->mr, nullptr);
  EXPECT_TRUE(b->logger.contains("registered without IBV_ACCESS_MW_BIND (IBA C10-73)"));
}

TEST_F(MemoryWindow, BoundType2WindowMustBeInvalidatedBeforeRebinding) {
  start();
  core::Mr* mr = window_mr();
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_2);
  bound(mw, mr, kWinMr, 4096, kRW);
  post_send(*b, bind_wqe(*b, mw, mr, kWinMr, 4096, kRW, 501));
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_MW_BIND_ERR);
  EXPECT_TRUE(b->logger.contains("must be free to be bound"));
}

TEST_F(MemoryWindow, Type1RebindMovesTheWindowAndKillsTheOldKey) {
  start();
  core::Mr* mr = window_mr();
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_1);
  uint32_t k1 = bound(mw, mr, kWinMr, 4096, kRW);
  fill(*a, 0, 32, 4);
  post_send(*a, via(IBV_WR_RDMA_WRITE, 1, 0, 32, mem.addr(b->pid, kWinMr), k1));
  EXPECT_EQ(a_result().status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, kWinMr, 32));
  uint32_t k2 = bound(mw, mr, kWinMr + 8192, 4096, kRW);  // a type 1 window rebinds while bound
  EXPECT_NE(k1, k2);
  EXPECT_EQ(mr->bound_mws, 1u);
  post_send(*a, via(IBV_WR_RDMA_WRITE, 2, 0, 32, mem.addr(b->pid, kWinMr + 8192), k2));
  EXPECT_EQ(a_result().status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, kWinMr + 8192, 32));
  post_send(*a, via(IBV_WR_RDMA_WRITE, 3, 0, 32, mem.addr(b->pid, kWinMr), k1));
  EXPECT_EQ(a_result().status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(b->logger.contains("is stale"));
}

// rdma-core's pyverbs tests bind with ibv_inc_rkey(mw->rkey) or with an MR's rkey + 12, and
// many programs with a small fresh value: only the key byte is taken, the index stays the
// window's (rxe_do_bind_mw).
TEST_F(MemoryWindow, Type2BindTakesOnlyTheKeyByteOfTheRkeyItIsGiven) {
  start();
  core::Mr* mr = window_mr();
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_2);
  const uint32_t index = mw->rkey & ~0xffu;
  abi::SendWqe w = bind_wqe(*b, mw, mr, kWinMr, 4096, kRW, 500);
  w.rkey = 0x12;  // a small fresh rkey: index 0
  ibv_wc wc = b_local(w);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << log_of(*b);
  EXPECT_EQ(wc.opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(mw->rkey, index | 0x12);
  fill(*a, 0, 512, 33);
  post_send(*a, via(IBV_WR_RDMA_WRITE, 1, 0, 512, mem.addr(b->pid, kWinMr + 64), index | 0x12));
  EXPECT_EQ(a_result().status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, kWinMr + 64, 512));
  // pyverbs' wr_bind_mw(mw, mr.rkey + 12, ...): another object's index, key byte taken alone.
  ASSERT_EQ(b_local(local_inv_wqe(mw->rkey, 600)).status, IBV_WC_SUCCESS);
  w = bind_wqe(*b, mw, mr, kWinMr, 4096, kRW, 501);
  w.rkey = mr->rkey + 12;
  EXPECT_EQ(b_local(w).status, IBV_WC_SUCCESS) << log_of(*b);
  const uint32_t k2 = index | ((mr->rkey + 12) & 0xff);
  EXPECT_EQ(mw->rkey, k2);
  post_send(*a, via(IBV_WR_RDMA_READ, 2, 8192, 512, mem.addr(b->pid, kWinMr + 64), k2));
  EXPECT_EQ(a_result().status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 8192, *a, 0, 512));
  // The value the program passed is not an rkey of the window: only index | key byte is.
  post_send(*a, via(IBV_WR_RDMA_READ, 3, 8192, 8, mem.addr(b->pid, kWinMr + 64), mr->rkey + 12));
  EXPECT_EQ(a_result().status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_FALSE(b->logger.contains("may change only the key byte"));
}

// The WR names the window by its current rkey as well (ibv_mw.rkey): rdma-core does not update
// ibv_mw.rkey after a type 2 bind through ibv_post_send, and rxe refuses a stale one.
TEST_F(MemoryWindow, BindNamingTheWindowByAStaleRkeyFails) {
  start();
  core::Mr* mr = window_mr();
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_2);
  const uint32_t alloc_rkey = mw->rkey;
  const uint32_t k1 = bound(mw, mr, kWinMr, 4096, kRW);
  ASSERT_EQ(b_local(local_inv_wqe(k1, 600)).status, IBV_WC_SUCCESS);
  abi::SendWqe w = bind_wqe(*b, mw, mr, kWinMr, 4096, kRW, 501);
  w.imm_data = alloc_rkey;  // the program kept the rkey ibv_alloc_mw gave
  ibv_wc wc = b_local(w);
  EXPECT_EQ(wc.status, IBV_WC_MW_BIND_ERR);
  EXPECT_EQ(wc.wr_id, 501u);
  EXPECT_EQ(mw->rkey, k1);
  EXPECT_EQ(mw->mr, nullptr);
  EXPECT_TRUE(b->logger.contains("ibv_post_send does not update ibv_mw.rkey after a bind"));
}

// The whole type 2 life as a conformance suite walks it: bind with a fresh key byte, WRITE and
// READ through the window, LOCAL_INV, rebind with another key through another QP (the first
// QP loses it: IBA 10.6.7.2), SEND_WITH_INV from that QP's peer, and the old keys stay dead.
TEST_F(MemoryWindow, Type2LifeCycleBindUseInvalidateRebindElsewhereRemoteInvalidate) {
  start();
  make_second_pair();
  core::Mr* mr = window_mr();
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_2);
  const uint32_t index = mw->rkey & ~0xffu;
  abi::SendWqe w = bind_wqe(*b, mw, mr, kWinMr, 8192, kRW, 500);
  w.rkey = 0x01;
  ASSERT_EQ(b_local(w).status, IBV_WC_SUCCESS) << log_of(*b);
  const uint32_t k1 = index | 0x01;
  fill(*a, 0, 4000, 5);
  post_send(*a, via(IBV_WR_RDMA_WRITE, 1, 0, 4000, mem.addr(b->pid, kWinMr + 100), k1));
  EXPECT_EQ(a_result().status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, kWinMr + 100, 4000));
  post_send(*a, via(IBV_WR_RDMA_READ, 2, 16384, 4000, mem.addr(b->pid, kWinMr + 100), k1));
  EXPECT_EQ(a_result().status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 16384, *a, 0, 4000));
  // LOCAL_INV frees it (a bound type 2 window is not rebound in place: IBA o10-37.2.30).
  ibv_wc wc = b_local(local_inv_wqe(k1, 600));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_LOCAL_INV);
  EXPECT_EQ(mr->bound_mws, 0u);
  // Rebind with another key byte through B's second QP.
  swap_pairs();
  w = bind_wqe(*b, mw, mr, kWinMr + 4096, 4096, IBV_ACCESS_REMOTE_WRITE, 510);
  w.rkey = 0xfe;
  wc = b_local(w);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << log_of(*b);
  const uint32_t k2 = index | 0xfe;
  EXPECT_EQ(mw->rkey, k2);
  fill(*a, 0, 256, 6);
  post_send(*a, via(IBV_WR_RDMA_WRITE, 11, 0, 256, mem.addr(b->pid, kWinMr + 4096), k2));
  EXPECT_EQ(a_result().status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, kWinMr + 4096, 256));
  // The first pair: the new key serves only the QP that bound it (that pair ends in error).
  swap_pairs();
  post_send(*a, via(IBV_WR_RDMA_WRITE, 3, 0, 64, mem.addr(b->pid, kWinMr + 4096), k2));
  EXPECT_EQ(a_result().status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(b->logger.contains("a type 2 window serves only the QP that bound it"));
  swap_pairs();
  // SEND_WITH_INV from the second QP's peer frees the window and reports the key.
  post_recv(*b, 70, 65536, 256);
  abi::SendWqe s = wqe(*a, IBV_WR_SEND_WITH_INV, 13, 0, 100);
  s.imm_data = k2;
  post_send(*a, s);
  EXPECT_EQ(a_result().status, IBV_WC_SUCCESS);
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(wcs[0].wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(wcs[0].invalidated_rkey, k2);
  EXPECT_TRUE(same(*a, 0, *b, 65536, 100));
  EXPECT_EQ(mw->mr, nullptr);
  EXPECT_EQ(mr->bound_mws, 0u);
  post_send(*a, via(IBV_WR_RDMA_WRITE, 14, 0, 64, mem.addr(b->pid, kWinMr + 4096), k2));
  EXPECT_EQ(a_result().status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(b->logger.contains("that is not bound"));
  swap_pairs();
}

// Rights a window may be bound with (IBA C10-74 and rxe_check_bind_mw): REMOTE_READ alone needs
// no LOCAL_WRITE on the MR; REMOTE_WRITE and REMOTE_ATOMIC do; LOCAL_WRITE alone grants nothing
// remote (pyverbs' test_qp_ex_rc_bind_mw); atomics go through a window bound with REMOTE_ATOMIC.
TEST_F(MemoryWindow, Type2AccessCombinationsTheIbaAllowsAndRefuses) {
  start();
  make_second_pair();
  core::Mr* ro_mr = window_mr(IBV_ACCESS_MW_BIND);  // no LOCAL_WRITE
  core::Mr* mr = reg_mr(*b, kWinMr + kWinMrLen, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_2);
  std::memset(mem.ptr(b->pid, kWinMr), 0x77, 64);
  bound(mw, ro_mr, kWinMr, 4096, IBV_ACCESS_REMOTE_READ);
  post_send(*a, via(IBV_WR_RDMA_READ, 1, 0, 64, mem.addr(b->pid, kWinMr), mw->rkey));
  EXPECT_EQ(a_result().status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, kWinMr, 64));
  ASSERT_EQ(b_local(local_inv_wqe(mw->rkey, 600)).status, IBV_WC_SUCCESS);
  const size_t atom = kWinMr + kWinMrLen + 8;
  uint64_t v = 40;
  std::memcpy(mem.ptr(b->pid, atom), &v, 8);
  bound(mw, mr, kWinMr + kWinMrLen, 4096, IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_READ);
  abi::SendWqe fa = via(IBV_WR_ATOMIC_FETCH_AND_ADD, 2, 0, 8, mem.addr(b->pid, atom), mw->rkey);
  fa.compare_add = 2;
  post_send(*a, fa);
  EXPECT_EQ(a_result().status, IBV_WC_SUCCESS);
  std::memcpy(&v, mem.ptr(b->pid, atom), 8);
  EXPECT_EQ(v, 42u);
  std::memcpy(&v, mem.ptr(a->pid, 0), 8);
  EXPECT_EQ(v, 40u);  // the original value came back
  ASSERT_EQ(b_local(local_inv_wqe(mw->rkey, 601)).status, IBV_WC_SUCCESS);
  bound(mw, mr, kWinMr + kWinMrLen, 4096, IBV_ACCESS_LOCAL_WRITE);
  std::memset(mem.ptr(b->pid, kWinMr + kWinMrLen), 0x66, 8);
  fill(*a, 0, 64, 8);
  post_send(*a, via(IBV_WR_RDMA_WRITE, 3, 0, 8, mem.addr(b->pid, kWinMr + kWinMrLen), mw->rkey));
  EXPECT_EQ(a_result().status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(mem.ptr(b->pid, kWinMr + kWinMrLen)[0], 0x66);  // nothing written
  // REMOTE_WRITE on an MR without LOCAL_WRITE is refused (the first pair is in error now).
  swap_pairs();
  ASSERT_EQ(b_local(local_inv_wqe(mw->rkey, 602)).status, IBV_WC_SUCCESS);
  ibv_wc wc = b_local(bind_wqe(*b, mw, ro_mr, kWinMr, 4096, IBV_ACCESS_REMOTE_WRITE, 503));
  EXPECT_EQ(wc.status, IBV_WC_MW_BIND_ERR);
  EXPECT_TRUE(b->logger.contains("remote write or atomic rights need an MR with LOCAL_WRITE (IBA C10-74)"));
  EXPECT_EQ(mw->mr, nullptr);
  swap_pairs();
}

// A type 1 window of another PD, or a type 2 window bound through a QP of another PD, is refused
// when the NIC reaches the bind (IBA C10-72): MW_BIND_ERR, not a post-time errno.
TEST_F(MemoryWindow, BindOfAWindowOfAnotherPdCompletesWithMwBindErr) {
  start();
  make_second_pair();
  core::Mr* mr = window_mr();
  uint32_t pd2 = 0;
  ASSERT_EQ(b->dev.memory_verbs().alloc_pd(b->ctx, &pd2), 0);
  for (ibv_mw_type type : {IBV_MW_TYPE_2, IBV_MW_TYPE_1}) {
    core::Mw* mw = nullptr;
    ASSERT_EQ(b->dev.memory_verbs().alloc_mw(b->ctx, pd2, type, &mw), 0);
    const uint32_t rkey = mw->rkey;
    ibv_wc wc = b_local(bind_wqe(*b, mw, mr, kWinMr, 4096, kRW, 500));
    EXPECT_EQ(wc.status, IBV_WC_MW_BIND_ERR);
    EXPECT_EQ(wc.opcode, IBV_WC_BIND_MW);
    EXPECT_TRUE(b->logger.contains("are in different PDs (IBA C10-72)"));
    EXPECT_EQ(mw->rkey, rkey);
    EXPECT_EQ(mw->mr, nullptr);
    swap_pairs();  // the error took the QP to ERR: the type 1 window tries the second pair
  }
}

// rxe looks the MR of a bind up only when the length is > 0: a zero-length type 1 bind unbinds
// the window whatever MR it names (pyverbs' invalidate_mw_type1 passes its MR with length 0).
TEST_F(MemoryWindow, ZeroLengthType1BindUnbindsWhateverMrItNames) {
  start();
  core::Mr* mr = window_mr();
  core::Mr* plain = window_mr(IBV_ACCESS_LOCAL_WRITE);  // no MW_BIND: never a window's MR
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_1);
  uint32_t k1 = bound(mw, mr, kWinMr, 4096, kRW);
  bound(mw, plain, 0, 0, 0);
  EXPECT_EQ(mw->mr, nullptr);
  EXPECT_EQ(mr->bound_mws, 0u);
  post_send(*a, via(IBV_WR_RDMA_READ, 1, 0, 8, mem.addr(b->pid, kWinMr), k1));
  EXPECT_EQ(a_result().status, IBV_WC_REM_ACCESS_ERR);
  // A type 2 window still needs an MR and a length (IBA o10-37.2.40); B's QP is in ERR after
  // A's refused READ, so the second pair binds.
  make_second_pair();
  swap_pairs();
  core::Mw* mw2 = alloc_mw(*b, IBV_MW_TYPE_2);
  EXPECT_EQ(b_local(bind_wqe(*b, mw2, mr, kWinMr, 0, kRW, 501)).status, IBV_WC_MW_BIND_ERR);
  EXPECT_TRUE(b->logger.contains("a type 2 window needs an MR and a length > 0 (IBA o10-37.2.40)"));
  swap_pairs();
}

TEST_F(MemoryWindow, DeregOfAnMrWithABoundType1WindowIsEinvalWithTheReason) {
  start();
  core::Mr* mr = window_mr();
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_1);
  bound(mw, mr, kWinMr, 4096, kRW);
  const uint32_t mr_handle = mr->handle;
  b->dev.journal().take_refusal();
  // rxe_dereg_mr's EINVAL, which uverbs and rdma-core pass through (not EBUSY).
  EXPECT_EQ(b->dev.memory_verbs().dereg_mr(b->ctx, mr_handle), EINVAL);
  const std::string why = b->dev.journal().take_refusal();
  EXPECT_NE(why.find("has 1 memory window(s) bound to it"), std::string::npos) << why;
  EXPECT_NE(why.find("IBA 10.6.7.2.6"), std::string::npos) << why;
  bound(mw, nullptr, 0, 0, 0);  // unbind: a type 1 bind of length 0
  EXPECT_EQ(b->dev.memory_verbs().dereg_mr(b->ctx, mr_handle), 0);
}

TEST_F(MemoryWindow, Type1WindowIsUnboundByAZeroLengthBindNotByLocalInvalidate) {
  start();
  core::Mr* mr = window_mr();
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_1);
  uint32_t k1 = bound(mw, mr, kWinMr, 4096, kRW);
  bound(mw, nullptr, 0, 0, 0);  // ibv_bind_mw with no MR and length 0
  EXPECT_EQ(mw->mr, nullptr);
  EXPECT_EQ(mr->bound_mws, 0u);
  post_send(*b, local_inv_wqe(mw->rkey, 600));
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_LOC_QP_OP_ERR);  // rxe_do_local_ops: a failed LOCAL_INV
  EXPECT_EQ(wcs[0].opcode, IBV_WC_LOCAL_INV);
  EXPECT_TRUE(b->logger.contains("it is unbound by binding it with length 0"));
  (void)k1;
}

TEST_F(MemoryWindow, BindCompletesInOrderAfterAnEarlierSend) {
  start();
  core::Mr* mr = window_mr();
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_2);
  post_recv(*a, 80, 65536, 64);
  post_sends(*b, {wqe(*b, IBV_WR_SEND, 501, 0, 8), bind_wqe(*b, mw, mr, kWinMr, 4096, kRW, 502)});
  // The bind took effect when the NIC reached it, but completes only after the SEND does.
  EXPECT_NE(mw->mr, nullptr);
  EXPECT_TRUE(poll(*b).empty());
  fabric.deliver_all(now);
  run_pending();
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 501u);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_SEND);
  EXPECT_EQ(wcs[1].wr_id, 502u);
  EXPECT_EQ(wcs[1].opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(wcs[1].status, IBV_WC_SUCCESS);
}

TEST_F(MemoryWindow, AnMrWithABoundWindowCannotBeDeregistered) {
  start();
  core::Mr* mr = window_mr();
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_2);
  bound(mw, mr, kWinMr, 4096, kRW);
  const uint32_t mr_handle = mr->handle;
  EXPECT_EQ(b->dev.memory_verbs().dereg_mr(b->ctx, mr_handle), EINVAL);
  EXPECT_EQ(b->dev.memory_verbs().dealloc_mw(b->ctx, mw->handle), 0);  // deallocating unbinds
  EXPECT_EQ(b->dev.memory_verbs().dereg_mr(b->ctx, mr_handle), 0);
  // LOCAL_INV of an ordinary MR's key is refused: only windows are invalidated here.
  post_send(*b, local_inv_wqe(b->mr->rkey, 600));
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_LOC_QP_OP_ERR);  // rxe_do_local_ops: a failed LOCAL_INV
  EXPECT_TRUE(b->logger.contains("LOCAL_INV of rkey"));
  EXPECT_TRUE(b->logger.contains("cannot be invalidated; only type 2 memory windows can"));
}

TEST_F(MemoryWindow, ADyingApplicationsBoundWindowsAreCleanedUp) {
  start();
  core::Mr* mr = window_mr();
  bound(alloc_mw(*b, IBV_MW_TYPE_2), mr, kWinMr, 4096, kRW);
  bound(alloc_mw(*b, IBV_MW_TYPE_1), mr, kWinMr, 8192, kRW);
  b->dev.context_verbs().close_context(b->ctx);  // what simnicd does when the process dies
  const std::string st = b->dev.status_text();
  EXPECT_NE(st.find("mws 0\n"), std::string::npos) << st;
  EXPECT_NE(st.find("mrs 0\n"), std::string::npos) << st;
  EXPECT_NE(st.find("pds 0\n"), std::string::npos) << st;
}

TEST_F(MemoryWindow, AllocRejectsUnknownTypesAndPds) {
  start();
  core::Mw* mw = nullptr;
  EXPECT_EQ(b->dev.memory_verbs().alloc_mw(b->ctx, b->pd, ibv_mw_type(3), &mw), EINVAL);
  EXPECT_EQ(b->dev.memory_verbs().alloc_mw(b->ctx, 9999, IBV_MW_TYPE_2, &mw), EINVAL);
  EXPECT_EQ(b->dev.memory_verbs().dealloc_mw(b->ctx, 9999), EINVAL);
}

}  // namespace
}  // namespace simnic::testing
