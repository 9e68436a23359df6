// Zero-length memory (issue 28): what the kernel's ib_umem_get registers with length 0, and
// zero-byte SEND, WRITE and READ through such an MR, inside and outside it, as rxe completes
// them (a zero-length DMA touches no memory and checks no key: rxe's copy_data, and its
// responder's zero-length RETH, IBA C9-88). Also ibv_modify_qp's qp_access_flags, taken as
// given as rxe takes them (a program that passes its ODP MRs' flags).
#include <gtest/gtest.h>

#include "qp_pair.h"

namespace simnic::testing {
namespace {

constexpr uint32_t kRw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
constexpr size_t kPage = 4096;

class ZeroLength : public QpPair {
 protected:
  // A zero-length MR of `h` at byte `off` of its memory (not at a page boundary).
  core::Mr* zero_mr(Host& h, size_t off, uint32_t access = kRw) {
    core::Mr* mr = nullptr;
    EXPECT_EQ(h.dev.memory_verbs().reg_mr(h.ctx, h.pd, mem.addr(h.pid, off), 0, mem.addr(h.pid, off), access, &mr), 0);
    return mr;
  }
  // A receive WQE of one SGE: `len` bytes at `off` under `lkey`.
  void post_recv_sge(Host& h, uint64_t wr_id, size_t off, uint32_t len, uint32_t lkey) {
    QpPair::post_recv_sge(h, wr_id, {mem.addr(h.pid, off), len, lkey});
  }
  // A's work request of `len` bytes from `off` under `lkey`, run to its completion: A's status.
  ibv_wc_status a_posts(ibv_wr_opcode op, size_t off, uint32_t len, uint32_t lkey, uint64_t raddr = 0,
                        uint32_t rkey = 0) {
    abi::SendWqe w = wqe(*a, op, 1, off, len);
    w.sge[0].lkey = lkey;
    w.remote_addr = raddr;
    w.rkey = rkey;
    post_send(*a, w);
    fabric.deliver_all(now);
    run_pending();
    auto wcs = poll(*a);
    EXPECT_EQ(wcs.size(), 1u);
    return wcs.empty() ? IBV_WC_GENERAL_ERR : wcs[0].status;
  }
};

// ib_umem_get pins the pages [addr, addr + length) touches: none at a page boundary (EINVAL),
// the one addr lies in elsewhere; ib_init_umem_odp counts pages the same way for ODP.
TEST_F(ZeroLength, AZeroLengthMrIsRefusedAtAPageBoundaryAndRegisteredInsideAPage) {
  start();
  core::Mr* mr = nullptr;
  const uint64_t page = mem.addr(kPidB, 16 * kPage);
  EXPECT_EQ(b->dev.memory_verbs().reg_mr(b->ctx, b->pd, page, 0, page, kRw, &mr), EINVAL);
  EXPECT_EQ(b->dev.memory_verbs().reg_mr(b->ctx, b->pd, page, 0, page, kRw | IBV_ACCESS_ON_DEMAND, &mr), EINVAL);
  ASSERT_EQ(b->dev.memory_verbs().reg_mr(b->ctx, b->pd, page + 100, 0, page + 100, kRw, &mr), 0);
  EXPECT_EQ(mr->length, 0u);
  EXPECT_EQ(mr->iova, page + 100);
  ASSERT_EQ(b->dev.memory_verbs().reg_mr(b->ctx, b->pd, page + 100, 0, page + 100, kRw | IBV_ACCESS_ON_DEMAND, &mr), 0);
  EXPECT_EQ(mr->length, 0u);
}

// The kernel's REG_DM_MR checks only that the range lies within the DM (mlx5 registers a
// zero-length one; rxe has no device memory).
TEST_F(ZeroLength, AZeroLengthDeviceMemoryMrIsRegisteredWithinTheDm) {
  start();
  core::Dm* dm = nullptr;
  ASSERT_EQ(b->dev.memory_verbs().alloc_dm(b->ctx, 8192, 0, &dm), 0);
  core::DmMrReg req{b->pd, dm->handle, 0, 0, kRw | IBV_ACCESS_ZERO_BASED, mem.addr(kPidB, 256 * 1024)};
  core::Mr* mr = nullptr;
  ASSERT_EQ(b->dev.memory_verbs().reg_dm_mr(b->ctx, req, &mr), 0);  // at the DM's start, a page boundary
  EXPECT_EQ(mr->length, 0u);
  EXPECT_EQ(mr->iova, 0u);
  req.dm_offset = 8192;
  EXPECT_EQ(b->dev.memory_verbs().reg_dm_mr(b->ctx, req, &mr), 0);  // at its end
  req.dm_offset = 8193;
  EXPECT_EQ(b->dev.memory_verbs().reg_dm_mr(b->ctx, req, &mr), EINVAL);  // beyond it
  req.dm_offset = 0;
  req.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ZERO_BASED;
  EXPECT_EQ(b->dev.memory_verbs().reg_dm_mr(b->ctx, req, &mr), EINVAL);  // REMOTE_WRITE without LOCAL_WRITE
}

TEST_F(ZeroLength, ZeroByteSendWriteAndReadThroughZeroLengthMrsSucceedInsideAndOutsideThem) {
  start();
  core::Mr* za = zero_mr(*a, 100);
  core::Mr* zb = zero_mr(*b, 100);
  ASSERT_TRUE(za && zb);
  fill(*b, 0, 8192, 9);
  std::vector<uint8_t> before(mem.ptr(kPidB, 0), mem.ptr(kPidB, 8192));
  for (size_t at : {size_t(100), size_t(5000)}) {  // at the MR's address, and a page away
    // Into a receive buffer the MR does not cover (16 bytes, a page away): nothing is written.
    post_recv_sge(*b, 7, 5000, 16, zb->lkey);
    EXPECT_EQ(a_posts(IBV_WR_SEND, at, 0, za->lkey), IBV_WC_SUCCESS) << at;
    auto wcs = poll(*b);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wcs[0].byte_len, 0u);
    EXPECT_EQ(a_posts(IBV_WR_RDMA_WRITE, at, 0, za->lkey, mem.addr(kPidB, 5000), zb->rkey), IBV_WC_SUCCESS) << at;
    EXPECT_EQ(a_posts(IBV_WR_RDMA_READ, at, 0, za->lkey, mem.addr(kPidB, 5000), zb->rkey), IBV_WC_SUCCESS) << at;
  }
  EXPECT_EQ(std::memcmp(mem.ptr(kPidB, 0), before.data(), before.size()), 0) << "nothing written";
  // One byte is outside a zero-length MR (rxe's mr_check_range).
  EXPECT_EQ(a_posts(IBV_WR_RDMA_WRITE, 100, 1, za->lkey, mem.addr(kPidB, 100), zb->rkey), IBV_WC_LOC_PROT_ERR);
}

// A one-byte SEND still checks its receive buffer: only a zero-byte one writes nothing.
TEST_F(ZeroLength, AOneByteSendIntoABufferOutsideTheMrIsStillRefused) {
  start();
  core::Mr* zb = zero_mr(*b, 100);
  ASSERT_TRUE(zb);
  post_recv_sge(*b, 7, 5000, 16, zb->lkey);
  EXPECT_EQ(a_posts(IBV_WR_SEND, 0, 1, a->mr->lkey), IBV_WC_REM_OP_ERR);
}

// rxe_qp_from_attr copies qp_access_flags unchecked; programs pass their MRs' flags, ODP too.
TEST_F(ZeroLength, QpAccessFlagsAreTakenAsGivenAsRxeTakesThem) {
  start();
  ASSERT_EQ(a->modify_state(IBV_QPS_RESET), 0);
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.port_num = 1;
  at.qp_access_flags = kRw | IBV_ACCESS_ON_DEMAND;
  EXPECT_EQ(a->dev.queue_verbs().modify_qp(a->ctx, a->qp->handle, at,
                                           IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, now),
            0);
  EXPECT_EQ(a->query().qp_access_flags, kRw | IBV_ACCESS_ON_DEMAND);
}

}  // namespace
}  // namespace simnic::testing
