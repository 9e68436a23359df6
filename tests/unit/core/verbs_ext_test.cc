// Issue 17's NIC side: ibv_rereg_mr (IBA 11.2.8.3) and device memory (ibv_alloc_dm,
// ibv_reg_dm_mr), each with the kernel's refusals and the data path through the result.
// Host B owns the memory; host A reads and writes it with RDMA.
#include <gtest/gtest.h>

#include "qp_pair.h"
#include "simnic/abi/control.h"  // abi::kMaxDmSize: what the shim reports as max_dm_size

namespace simnic::testing {
namespace {

constexpr uint32_t kLocal = IBV_ACCESS_LOCAL_WRITE;
constexpr uint32_t kRemote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

class VerbsExt : public QpPair {
 protected:
  core::MrRereg rereg(const core::Mr* mr, uint32_t flags) {
    core::MrRereg r{};
    r.mr = mr->handle;
    r.flags = flags;
    return r;
  }
  // A's RDMA WRITE of `len` bytes from its offset 0 to `va` under `rkey`; A's completion status.
  ibv_wc_status write_to(uint64_t va, uint32_t rkey, uint32_t len, uint64_t wr_id) {
    abi::SendWqe w = wqe(*a, IBV_WR_RDMA_WRITE, wr_id, 0, len);
    w.remote_addr = va;
    w.rkey = rkey;
    post_send(*a, w);
    fabric.deliver_all(now);
    run_pending();
    auto wcs = poll(*a);
    EXPECT_EQ(wcs.size(), 1u);
    return wcs.empty() ? IBV_WC_GENERAL_ERR : wcs[0].status;
  }
  // B's MR over [off, off + len) of its memory.
  core::Mr* b_mr(size_t off, uint32_t len, uint32_t access = kRemote) { return reg_mr(*b, off, len, access); }
};

TEST_F(VerbsExt, ReregRefusesWhatTheKernelRefusesAndLeavesTheMrAsItWas) {
  start();
  core::Mr* mr = b_mr(64 * 1024, 4096);
  const core::Mr before = *mr;
  auto r = rereg(mr, 0);
  EXPECT_EQ(b->dev.memory_verbs().rereg_mr(b->ctx, r, &mr), EINVAL);  // no flag
  r = rereg(mr, 1u << 3);
  EXPECT_EQ(b->dev.memory_verbs().rereg_mr(b->ctx, r, &mr), EINVAL);  // beyond IBV_REREG_MR_FLAGS_SUPPORTED
  r = rereg(mr, IBV_REREG_MR_CHANGE_ACCESS);
  r.access = IBV_ACCESS_REMOTE_WRITE;  // without LOCAL_WRITE (IBA o10-36.2.1)
  EXPECT_EQ(b->dev.memory_verbs().rereg_mr(b->ctx, r, &mr), EINVAL);
  r.access = 1u << 30;
  EXPECT_EQ(b->dev.memory_verbs().rereg_mr(b->ctx, r, &mr), EINVAL);
  r = rereg(mr, IBV_REREG_MR_CHANGE_PD);
  r.pd = 9999;
  EXPECT_EQ(b->dev.memory_verbs().rereg_mr(b->ctx, r, &mr), EINVAL);
  r = rereg(mr, IBV_REREG_MR_CHANGE_TRANSLATION);
  r.addr = mem.addr(kPidB, (4 << 20) - 100);  // runs past the mapped memory
  r.length = 4096;
  EXPECT_EQ(b->dev.memory_verbs().rereg_mr(b->ctx, r, &mr), EFAULT);
  r.length = 0;
  EXPECT_EQ(b->dev.memory_verbs().rereg_mr(b->ctx, r, &mr), EINVAL);
  r = rereg(mr, IBV_REREG_MR_CHANGE_ACCESS);
  r.mr = 9999;
  EXPECT_EQ(b->dev.memory_verbs().rereg_mr(b->ctx, r, &mr), EINVAL);  // no such MR
  EXPECT_EQ(b->dev.memory_verbs().rereg_mr(a->ctx, rereg(mr, IBV_REREG_MR_CHANGE_ACCESS), &mr),
            EINVAL);  // another context's
  EXPECT_EQ(mr->addr, before.addr);
  EXPECT_EQ(mr->length, before.length);
  EXPECT_EQ(mr->access, before.access);
  EXPECT_EQ(mr->pd, before.pd);
  // Still the same registration: a WRITE through it lands.
  fill(*a, 0, 100, 3);
  EXPECT_EQ(write_to(mr->iova, mr->rkey, 100, 1), IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, 64 * 1024, 100));
}

TEST_F(VerbsExt, ChangeTranslationMovesTheMrUnderTheSameKeys) {
  start();
  core::Mr* mr = b_mr(64 * 1024, 4096);
  const uint32_t rkey = mr->rkey, lkey = mr->lkey;
  const uint64_t old_va = mr->iova;
  auto r = rereg(mr, IBV_REREG_MR_CHANGE_TRANSLATION);
  r.addr = mem.addr(kPidB, 128 * 1024);
  r.length = 8192;
  ASSERT_EQ(b->dev.memory_verbs().rereg_mr(b->ctx, r, &mr), 0);
  EXPECT_EQ(mr->rkey, rkey);
  EXPECT_EQ(mr->lkey, lkey);
  EXPECT_EQ(mr->iova, r.addr);  // hca_va = addr, as rdma-core's providers send it
  fill(*a, 0, 6000, 17);
  EXPECT_EQ(write_to(r.addr + 1000, rkey, 6000, 2), IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, 128 * 1024 + 1000, 6000));
  // The old range is no longer this MR's: a remote access error (IBA 10.6.3, C9-88), nothing written.
  std::vector<uint8_t> old(mem.ptr(kPidB, 64 * 1024), mem.ptr(kPidB, 64 * 1024) + 100);
  EXPECT_EQ(write_to(old_va, rkey, 100, 3), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(std::memcmp(old.data(), mem.ptr(kPidB, 64 * 1024), 100), 0);
}

TEST_F(VerbsExt, ChangeAccessTakesRemoteWriteAway) {
  start();
  core::Mr* mr = b_mr(64 * 1024, 4096);
  auto r = rereg(mr, IBV_REREG_MR_CHANGE_ACCESS);
  r.access = kLocal | IBV_ACCESS_REMOTE_READ;
  ASSERT_EQ(b->dev.memory_verbs().rereg_mr(b->ctx, r, &mr), 0);
  EXPECT_EQ(write_to(mr->iova, mr->rkey, 64, 4), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(VerbsExt, ChangeAccessToZeroBasedMakesOffsetsTheAddresses) {
  start();
  core::Mr* mr = b_mr(64 * 1024, 4096);
  auto r = rereg(mr, IBV_REREG_MR_CHANGE_ACCESS);
  r.access = kRemote | IBV_ACCESS_ZERO_BASED;
  ASSERT_EQ(b->dev.memory_verbs().rereg_mr(b->ctx, r, &mr), 0);
  EXPECT_EQ(mr->iova, 0u);
  fill(*a, 0, 128, 29);
  EXPECT_EQ(write_to(512, mr->rkey, 128, 5), IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, 64 * 1024 + 512, 128));
}

TEST_F(VerbsExt, ChangePdMovesTheMrOutOfTheQpsReach) {
  start();
  core::Mr* mr = b_mr(64 * 1024, 4096);
  uint32_t other_pd = 0;
  ASSERT_EQ(b->dev.memory_verbs().alloc_pd(b->ctx, &other_pd), 0);
  auto r = rereg(mr, IBV_REREG_MR_CHANGE_PD);
  r.pd = other_pd;
  ASSERT_EQ(b->dev.memory_verbs().rereg_mr(b->ctx, r, &mr), 0);
  EXPECT_EQ(b->dev.memory_verbs().dealloc_pd(b->ctx, other_pd), EBUSY);  // the MR is on it now
  // B's QP is on the first PD: an rkey of another PD is a remote access error (IBA 10.6.3, C9-88).
  EXPECT_EQ(write_to(mr->iova, mr->rkey, 64, 6), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(VerbsExt, ReregIsRefusedWhileWindowsAreBound) {
  start();
  core::Mr* mr = b_mr(64 * 1024, 4096, kLocal | IBV_ACCESS_MW_BIND);
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_2);
  post_send(*b, bind_wqe(*b, mw, mr, 64 * 1024, 1024, IBV_ACCESS_REMOTE_WRITE, 9));
  ASSERT_EQ(poll(*b).size(), 1u);
  auto r = rereg(mr, IBV_REREG_MR_CHANGE_ACCESS);
  r.access = kLocal;
  EXPECT_EQ(b->dev.memory_verbs().rereg_mr(b->ctx, r, &mr), EBUSY);
}

TEST_F(VerbsExt, DeviceMemoryAllocationFollowsTheKernelsRules) {
  start();
  core::Dm* dm = nullptr;
  EXPECT_EQ(b->dev.memory_verbs().alloc_dm(b->ctx, 0, 0, &dm), EINVAL);
  EXPECT_EQ(b->dev.memory_verbs().alloc_dm(b->ctx, abi::kMaxDmSize + 1, 0, &dm), EINVAL);
  EXPECT_EQ(b->dev.memory_verbs().alloc_dm(b->ctx, 4096, 13, &dm), EINVAL);  // beyond a page's alignment
  ASSERT_EQ(b->dev.memory_verbs().alloc_dm(b->ctx, abi::kMaxDmSize - 4096, 12, &dm), 0);
  core::Dm* more = nullptr;
  EXPECT_EQ(b->dev.memory_verbs().alloc_dm(b->ctx, 8192, 0, &more), ENOMEM);  // the NIC's memory is used up
  EXPECT_EQ(b->dev.memory_verbs().free_dm(a->ctx, dm->handle), EINVAL);       // not A's
  EXPECT_EQ(b->dev.memory_verbs().free_dm(b->ctx, dm->handle), 0);
  EXPECT_EQ(b->dev.memory_verbs().alloc_dm(b->ctx, 8192, 0, &more), 0);
}

TEST_F(VerbsExt, DmMrIsZeroBasedWithinTheDmAndCarriesRdma) {
  start();
  core::Dm* dm = nullptr;
  ASSERT_EQ(b->dev.memory_verbs().alloc_dm(b->ctx, 8192, 0, &dm), 0);
  core::DmMrReg req{b->pd, dm->handle, 4096, 4096, kRemote, mem.addr(kPidB, 256 * 1024)};
  core::Mr* mr = nullptr;
  EXPECT_EQ(b->dev.memory_verbs().reg_dm_mr(b->ctx, req, &mr), EINVAL);  // not zero-based
  req.access = kRemote | IBV_ACCESS_ZERO_BASED;
  req.length = 4097;
  EXPECT_EQ(b->dev.memory_verbs().reg_dm_mr(b->ctx, req, &mr), EINVAL);  // past the DM's end
  req.length = 4096;
  req.access |= IBV_ACCESS_MW_BIND;
  EXPECT_EQ(b->dev.memory_verbs().reg_dm_mr(b->ctx, req, &mr), EINVAL);  // not an access device memory has
  req.access = kRemote | IBV_ACCESS_ZERO_BASED;
  ASSERT_EQ(b->dev.memory_verbs().reg_dm_mr(b->ctx, req, &mr), 0);
  EXPECT_EQ(mr->iova, 0u);
  fill(*a, 0, 300, 41);
  EXPECT_EQ(write_to(100, mr->rkey, 300, 7), IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, 256 * 1024 + 4096 + 100, 300));          // the mapping, at dm_offset + 100
  EXPECT_EQ(write_to(4000, mr->rkey, 300, 8), IBV_WC_REM_ACCESS_ERR);  // beyond the MR
  EXPECT_EQ(b->dev.memory_verbs().rereg_mr(b->ctx, rereg(mr, IBV_REREG_MR_CHANGE_ACCESS), &mr),
            EINVAL);                                                    // as the kernel
  EXPECT_EQ(b->dev.memory_verbs().free_dm(b->ctx, dm->handle), EBUSY);  // an MR is over it
  EXPECT_EQ(b->dev.memory_verbs().dereg_mr(b->ctx, mr->handle), 0);
  EXPECT_EQ(b->dev.memory_verbs().free_dm(b->ctx, dm->handle), 0);
}

TEST_F(VerbsExt, ClosingAContextGivesItsDeviceMemoryBack) {
  start();
  core::Context* other = b->dev.context_verbs().open_context(kPidB, 0, -1, 77);
  uint32_t pd = 0;
  ASSERT_EQ(b->dev.memory_verbs().alloc_pd(other, &pd), 0);
  core::Dm* dm = nullptr;
  ASSERT_EQ(b->dev.memory_verbs().alloc_dm(other, abi::kMaxDmSize, 0, &dm), 0);
  core::DmMrReg req{pd, dm->handle, 0, 4096, kLocal | IBV_ACCESS_ZERO_BASED, mem.addr(kPidB, 0)};
  core::Mr* mr = nullptr;
  ASSERT_EQ(b->dev.memory_verbs().reg_dm_mr(other, req, &mr), 0);
  b->dev.context_verbs().close_context(other);
  ASSERT_EQ(b->dev.memory_verbs().alloc_dm(b->ctx, abi::kMaxDmSize, 0, &dm), 0);
}

// ibv_import_device: B's second context (another process, pid 3003) joins B's first one by
// naming the descriptor its Hello gave (fd 7); it then shares B's PDs and MRs, not the rest.
TEST_F(VerbsExt, AnImportedContextSharesPdsAndMrsAndOutlivesItsExporter) {
  start();
  b->dev.context_verbs().set_ctl_fd_number(b->ctx, 7);
  core::Context* importer = b->dev.context_verbs().open_context(3003, 0, -1, 78);
  core::Context* stranger = b->dev.context_verbs().open_context(3004, 0, -1, 79);
  EXPECT_EQ(b->dev.context_verbs().import_pd(importer, b->pd), EINVAL);  // nothing shared yet
  EXPECT_EQ(b->dev.context_verbs().join_context(importer, [](pid_t, int) { return false; }), EINVAL);  // no such socket
  ASSERT_EQ(b->dev.context_verbs().join_context(importer, [](pid_t pid, int fd) { return pid == kPidB && fd == 7; }),
            0);
  EXPECT_EQ(b->dev.context_verbs().import_pd(importer, b->pd), 0);
  core::Mr* mr = nullptr;
  ASSERT_EQ(b->dev.context_verbs().import_mr(importer, b->mr->handle, &mr), 0);
  EXPECT_EQ(mr, b->mr);
  EXPECT_EQ(b->dev.context_verbs().import_pd(stranger, b->pd), EINVAL);         // a context that imported nothing
  EXPECT_EQ(b->dev.queue_verbs().destroy_qp(importer, b->qp->handle), EINVAL);  // QPs are not shared
  // The importer's own MR on the shared PD: its own memory (pid 3003).
  core::Mr* own = nullptr;
  ASSERT_EQ(b->dev.memory_verbs().reg_mr(importer, b->pd, mem.addr(3003, 0), 4096, mem.addr(3003, 0), kRemote, &own),
            0);
  EXPECT_EQ(own->ctx->pid, 3003);
  // A writes into the importer's MR through B's QP (on the same PD).
  fill(*a, 0, 256, 51);
  EXPECT_EQ(write_to(own->iova, own->rkey, 256, 10), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(mem.ptr(3003, 0), mem.ptr(kPidA, 0), 256), 0);
  // The exporter goes: its PD stays for the importer's MR, its own MRs go with its memory.
  const uint32_t pd = b->pd, exporter_mr = b->mr->handle;
  b->dev.context_verbs().close_context(b->ctx);
  b->ctx = nullptr;
  EXPECT_EQ(b->dev.context_verbs().import_mr(importer, exporter_mr, &mr), EINVAL);
  EXPECT_EQ(b->dev.memory_verbs().dealloc_pd(importer, pd), EBUSY);  // the importer's MR is on it
  EXPECT_EQ(b->dev.memory_verbs().dereg_mr(importer, own->handle), 0);
  EXPECT_EQ(b->dev.memory_verbs().dealloc_pd(importer, pd), 0);
  b->dev.context_verbs().close_context(importer);
  b->dev.context_verbs().close_context(stranger);
}

}  // namespace
}  // namespace simnic::testing
