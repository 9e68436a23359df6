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
  abi::SendWqe via(ibv_wr_opcode op, uint64_t wr_id, size_t local_off, uint32_t len, uint64_t remote_va, uint32_t rkey) {
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
  EXPECT_EQ(wcs[0].status, IBV_WC_MW_BIND_ERR);
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
  EXPECT_EQ(b->dev.dereg_mr(b->ctx, mr_handle), EINVAL);
  EXPECT_EQ(b->dev.dealloc_mw(b->ctx, mw->handle), 0);  // deallocating unbinds
  EXPECT_EQ(b->dev.dereg_mr(b->ctx, mr_handle), 0);
  // LOCAL_INV of an ordinary MR's key is refused: only windows are invalidated here.
  post_send(*b, local_inv_wqe(b->mr->rkey, 600));
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_MW_BIND_ERR);
  EXPECT_TRUE(b->logger.contains("LOCAL_INV of rkey"));
  EXPECT_TRUE(b->logger.contains("cannot be invalidated; only type 2 memory windows can"));
}

TEST_F(MemoryWindow, ADyingApplicationsBoundWindowsAreCleanedUp) {
  start();
  core::Mr* mr = window_mr();
  bound(alloc_mw(*b, IBV_MW_TYPE_2), mr, kWinMr, 4096, kRW);
  bound(alloc_mw(*b, IBV_MW_TYPE_1), mr, kWinMr, 8192, kRW);
  b->dev.close_context(b->ctx);  // what simnicd does when the process dies
  const std::string st = b->dev.status_text();
  EXPECT_NE(st.find("mws 0\n"), std::string::npos) << st;
  EXPECT_NE(st.find("mrs 0\n"), std::string::npos) << st;
  EXPECT_NE(st.find("pds 0\n"), std::string::npos) << st;
}

TEST_F(MemoryWindow, AllocRejectsUnknownTypesAndPds) {
  start();
  core::Mw* mw = nullptr;
  EXPECT_EQ(b->dev.alloc_mw(b->ctx, b->pd, ibv_mw_type(3), &mw), EINVAL);
  EXPECT_EQ(b->dev.alloc_mw(b->ctx, 9999, IBV_MW_TYPE_2, &mw), EINVAL);
  EXPECT_EQ(b->dev.dealloc_mw(b->ctx, 9999), EINVAL);
}

}  // namespace
}  // namespace simnic::testing
