// On-demand paging (issue 17): IBV_ACCESS_ON_DEMAND registration rules (explicit and implicit
// ODP), accesses that work on the pages that exist, page faults on the ones that do not (NAK
// remote access error / local protection error, each traced as odp_fault), and ibv_advise_mr's
// checks and errnos. The fake host memory has 4 MiB mapped per program: an ODP MR may cover
// more, and its pages past 4 MiB are "unmapped".
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "qp_pair.h"

namespace simnic::testing {
namespace {

constexpr uint32_t kAllAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                IBV_ACCESS_REMOTE_ATOMIC;
constexpr uint64_t kOdpLength = 64ull << 20;         // far more than is mapped
constexpr size_t kUnmappedOff = 8u << 20;            // an offset with no page behind it
constexpr size_t kMappedFarOff = (4u << 20) - 4096;  // the last mapped page

class Odp : public QpPair {
 protected:
  void SetUp() override {
    start();
    a->dev.tracer().set_sink(&trace);
    b->dev.tracer().set_sink(&trace);
  }
  void TearDown() override {
    a->dev.tracer().set_sink(nullptr);
    b->dev.tracer().set_sink(nullptr);
  }
  int reg(Host& h, uint64_t addr, uint64_t len, uint64_t iova, uint32_t access, core::Mr** out = nullptr) {
    core::Mr* mr = nullptr;
    int e = h.dev.memory_verbs().reg_mr(h.ctx, h.pd, addr, len, iova, access, &mr);
    if (out) *out = mr;
    return e;
  }
  core::Mr* odp_mr(Host& h, uint32_t access = kAllAccess) {
    core::Mr* mr = nullptr;
    const uint64_t base = mem.addr(h.pid, 0);
    EXPECT_EQ(reg(h, base, kOdpLength, base, access | IBV_ACCESS_ON_DEMAND, &mr), 0);
    return mr;
  }
  // An RDMA op from A at offset `remote_off` of B's MR `mr`.
  abi::SendWqe to_b(ibv_wr_opcode op, uint64_t wr_id, size_t local_off, uint32_t len, const core::Mr* mr,
                    size_t remote_off) {
    abi::SendWqe w = rdma(*a, *b, op, wr_id, local_off, len, 0);
    w.remote_addr = mr->iova + remote_off;
    w.rkey = mr->rkey;
    return w;
  }
  ibv_wc one_completion(Host& h) {
    auto wcs = poll(h);
    EXPECT_EQ(wcs.size(), 1u);
    return wcs.empty() ? ibv_wc{} : wcs[0];
  }
  int advise(Host& h, uint32_t advice, uint32_t flags, std::vector<ibv_sge> sges, uint32_t pd = 0) {
    return h.dev.memory_verbs().advise_mr(h.ctx, pd ? pd : h.pd, advice, flags, sges.data(), uint32_t(sges.size()));
  }
  TraceLines trace;
};

// --- Registration ---

TEST_F(Odp, AnOdpMrMayCoverUnmappedMemoryWhereAPinnedOneMayNot) {
  const uint64_t base = mem.addr(b->pid, 0);
  EXPECT_EQ(reg(*b, base, kOdpLength, base, IBV_ACCESS_LOCAL_WRITE), EFAULT) << "pinned: the kernel pins every page";
  core::Mr* mr = nullptr;
  EXPECT_EQ(reg(*b, base, kOdpLength, base, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND, &mr), 0);
  ASSERT_NE(mr, nullptr);
  EXPECT_TRUE(core::is_odp_mr(*mr));
  EXPECT_FALSE(core::is_implicit_odp_mr(*mr));
  EXPECT_EQ(trace.count("\"access\":\"LOCAL_WRITE|ON_DEMAND\""), 1) << "mr_create names ON_DEMAND";
  // An ODP MR wholly over unmapped memory, too.
  EXPECT_EQ(reg(*b, base + kUnmappedOff, 1 << 20, base + kUnmappedOff, IBV_ACCESS_ON_DEMAND), 0);
}

TEST_F(Odp, ExplicitOdpRangeRules) {
  const uint64_t base = mem.addr(b->pid, 0);
  const uint32_t odp = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND;
  EXPECT_EQ(reg(*b, base, 0, base, odp), EINVAL) << "length 0";
  EXPECT_EQ(reg(*b, base, core::DeviceLimits::kMaxMrSize + 1, base, odp), EINVAL) << "beyond max_mr_size";
  EXPECT_EQ(reg(*b, base, 4096, base + 8, odp), EINVAL) << "addr and iova at different page offsets";
  EXPECT_EQ(reg(*b, base + 8, 4096, 0x1000008, odp), 0) << "the same page offset is fine";
  EXPECT_EQ(reg(*b, 0x7ffffff00000ull, 1ull << 30, 0x7ffffff00000ull, odp), EFAULT) << "past the user address space";
  EXPECT_EQ(reg(*b, base, 4096, base, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ON_DEMAND), EINVAL)
      << "REMOTE_WRITE still needs LOCAL_WRITE";
}

TEST_F(Odp, ImplicitOdpCoversTheWholeAddressSpace) {
  core::Mr* mr = nullptr;
  ASSERT_EQ(reg(*b, 0, UINT64_MAX, 0, kAllAccess | IBV_ACCESS_ON_DEMAND, &mr), 0);
  EXPECT_TRUE(core::is_implicit_odp_mr(*mr));
  EXPECT_EQ(mr->iova, 0u);
  EXPECT_EQ(reg(*b, 0, UINT64_MAX, 0x1000, kAllAccess | IBV_ACCESS_ON_DEMAND), EINVAL) << "implicit needs iova 0";
  EXPECT_EQ(reg(*b, 0, UINT64_MAX, 0, kAllAccess), EINVAL) << "without ON_DEMAND it is just too long";
  // The peer reaches any mapped address of B's through it, by B's own virtual address.
  fill(*a, 0, 300, 5);
  post_send(*a, to_b(IBV_WR_RDMA_WRITE, 1, 0, 300, mr, mem.addr(b->pid, 100000)));
  fabric.deliver_all(now);
  EXPECT_EQ(one_completion(*a).status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, 100000, 300));
  // And faults on an unmapped one.
  post_send(*a, to_b(IBV_WR_RDMA_WRITE, 2, 0, 300, mr, mem.addr(b->pid, kUnmappedOff)));
  fabric.deliver_all(now);
  EXPECT_EQ(one_completion(*a).status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(trace.count("\"kind\":\"odp_fault\""), 1);
}

// --- Remote accesses: mapped pages work, an unmapped one NAKs remote access error ---

TEST_F(Odp, RemoteWriteAndReadReachMappedPagesFarApart) {
  core::Mr* mr = odp_mr(*b);
  fill(*a, 0, 2000, 1);
  fill(*b, kMappedFarOff, 1500, 2);
  post_send(*a, to_b(IBV_WR_RDMA_WRITE, 1, 0, 2000, mr, 4096));
  post_send(*a, to_b(IBV_WR_RDMA_READ, 2, 65536, 1500, mr, kMappedFarOff));
  fabric.deliver_all(now);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[1].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, 4096, 2000));
  EXPECT_TRUE(same(*a, 65536, *b, kMappedFarOff, 1500));
  EXPECT_EQ(trace.count("\"kind\":\"odp_fault\""), 0);
}

TEST_F(Odp, RemoteWriteToAnUnmappedPageNaksRemoteAccessErrorAndIsTraced) {
  core::Mr* mr = odp_mr(*b);
  post_send(*a, to_b(IBV_WR_RDMA_WRITE, 1, 0, 100, mr, kUnmappedOff));
  fabric.deliver_all(now);
  const ibv_wc wc = one_completion(*a);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(b->qp->state, IBV_QPS_ERR) << "a class C responder error (IBA 9.9.3.1)";
  ASSERT_EQ(trace.count("\"kind\":\"odp_fault\""), 1);
  EXPECT_EQ(trace.count("\"side\":\"remote\""), 1);
  EXPECT_EQ(trace.count("ODP_PAGE_FAULT"), 1) << "the responder error names the fault";
}

TEST_F(Odp, RemoteReadFromAnUnmappedPageNaksRemoteAccessError) {
  core::Mr* mr = odp_mr(*b);
  post_send(*a, to_b(IBV_WR_RDMA_READ, 1, 0, 64, mr, kUnmappedOff));
  fabric.deliver_all(now);
  EXPECT_EQ(one_completion(*a).status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(trace.count("\"side\":\"remote\""), 1);
}

TEST_F(Odp, AtomicOnAnUnmappedPageNaksRemoteAccessError) {
  core::Mr* mr = odp_mr(*b);
  abi::SendWqe w = to_b(IBV_WR_ATOMIC_FETCH_AND_ADD, 2, 0, 8, mr, kUnmappedOff + 64);
  w.compare_add = 1;
  post_send(*a, w);
  fabric.deliver_all(now);
  EXPECT_EQ(one_completion(*a).status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(trace.count("\"side\":\"remote\""), 1);
}

TEST_F(Odp, AtomicWriteToAnUnmappedPageNaksRemoteAccessError) {
  core::Mr* mr = odp_mr(*b);
  post_send(*a, to_b(IBV_WR_ATOMIC_WRITE, 3, 0, 8, mr, kUnmappedOff + 128));
  fabric.deliver_all(now);
  EXPECT_EQ(one_completion(*a).status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(trace.count("\"side\":\"remote\""), 1);
}

TEST_F(Odp, APinnedMrWhosePageVanishedStillNaksRemoteOperationalError) {
  // The non-ODP path is unchanged: a DMA failure there is the NIC's own (IBA 9.9.3.1 class A).
  // (Made with writes at once, the fake memory's default. simnicd queues writes into pinned
  // MRs; a queued one that fails is counted and logged: DmaBatching.AQueuedWriteThatFails...)
  mem.poisoned = mem.addr(b->pid, 4096 + 10);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, 100, 4096));
  fabric.deliver_all(now);
  EXPECT_EQ(one_completion(*a).status, IBV_WC_REM_OP_ERR);
  EXPECT_EQ(trace.count("\"kind\":\"odp_fault\""), 0);
}

// --- Local accesses: an unmapped page of a local ODP MR is a local protection error ---

TEST_F(Odp, SendGatheringFromAnUnmappedPageCompletesWithLocalProtectionError) {
  core::Mr* mr = odp_mr(*a);
  post_recv(*b, 70, 0, 4096);
  abi::SendWqe w = wqe(*a, IBV_WR_SEND, 1, 0, 100);
  w.sge[0] = {mem.addr(a->pid, kUnmappedOff), 100, mr->lkey};
  post_send(*a, w);
  fabric.deliver_all(now);
  EXPECT_EQ(one_completion(*a).status, IBV_WC_LOC_PROT_ERR);
  ASSERT_EQ(trace.count("\"kind\":\"odp_fault\""), 1);
  EXPECT_EQ(trace.count("\"side\":\"local\""), 1);
}

TEST_F(Odp, SendFromAndIntoMappedOdpPagesWorks) {
  core::Mr* ma = odp_mr(*a);
  core::Mr* mb = odp_mr(*b);
  fill(*a, kMappedFarOff, 3000, 9);
  auto& ring = b->qp->shm->rq;
  abi::RecvWqe& r = b->qp->rq[ring.producer.value.load() & (b->qp->rq_entries - 1)];
  r = {};
  r.wr_id = 70;
  r.num_sge = 1;
  r.sge[0] = {mem.addr(b->pid, 8192), 4096, mb->lkey};
  ring.producer.value.store(ring.producer.value.load() + 1);
  abi::SendWqe w = wqe(*a, IBV_WR_SEND, 1, 0, 3000);
  w.sge[0] = {mem.addr(a->pid, kMappedFarOff), 3000, ma->lkey};
  post_send(*a, w);
  fabric.deliver_all(now);
  EXPECT_EQ(one_completion(*a).status, IBV_WC_SUCCESS);
  const ibv_wc rwc = one_completion(*b);
  EXPECT_EQ(rwc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(rwc.byte_len, 3000u);
  EXPECT_TRUE(same(*a, kMappedFarOff, *b, 8192, 3000));
}

// --- ibv_rereg_mr keeps an MR pinned or on demand ---

TEST_F(Odp, ReregKeepsOdpAndRefusesToAddOrRemoveIt) {
  core::Mr* mr = odp_mr(*b);
  core::Mr* pinned = b->mr;
  core::MrRereg r{mr->handle, IBV_REREG_MR_CHANGE_ACCESS, 0, IBV_ACCESS_LOCAL_WRITE, 0, 0};
  EXPECT_EQ(b->dev.memory_verbs().rereg_mr(b->ctx, r, &mr), EINVAL) << "dropping ON_DEMAND";
  r = {pinned->handle, IBV_REREG_MR_CHANGE_ACCESS, 0, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND, 0, 0};
  EXPECT_EQ(b->dev.memory_verbs().rereg_mr(b->ctx, r, &pinned), EINVAL) << "adding ON_DEMAND";
  // A new translation over unmapped memory is fine for an ODP MR, and faults as before.
  const uint64_t at = mem.addr(b->pid, kUnmappedOff);
  r = {mr->handle, IBV_REREG_MR_CHANGE_TRANSLATION, 0, 0, at, 1 << 20};
  ASSERT_EQ(b->dev.memory_verbs().rereg_mr(b->ctx, r, &mr), 0);
  EXPECT_TRUE(core::is_odp_mr(*mr));
  post_send(*a, to_b(IBV_WR_RDMA_WRITE, 1, 0, 64, mr, 0));
  fabric.deliver_all(now);
  EXPECT_EQ(one_completion(*a).status, IBV_WC_REM_ACCESS_ERR);
}

// --- ibv_advise_mr ---

TEST_F(Odp, AdviseMrChecksAdviceFlagsAndEverySge) {
  core::Mr* mr = odp_mr(*b);
  const uint64_t base = mem.addr(b->pid, 0);
  const ibv_sge good{base + 4096, 8192, mr->lkey};
  EXPECT_EQ(advise(*b, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, {good}), 0);
  EXPECT_EQ(advise(*b, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, {good}), 0);
  EXPECT_EQ(advise(*b, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, {good}, /*pd=*/9999), EINVAL) << "no such PD";
  EXPECT_EQ(advise(*b, 7, 0, {good}), EOPNOTSUPP) << "not a prefetch advice";
  EXPECT_EQ(advise(*b, IBV_ADVISE_MR_ADVICE_PREFETCH, 2, {good}), EINVAL) << "unknown flag";
  EXPECT_EQ(advise(*b, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, {}), EINVAL) << "no SGE";
  EXPECT_EQ(advise(*b, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, {good, {base, 64, 0x12345}}), EFAULT) << "no such lkey";
  EXPECT_EQ(advise(*b, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, {{base, 64, b->mr->lkey}}), EFAULT) << "a pinned MR";
  EXPECT_EQ(advise(*b, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, {{base + kOdpLength - 64, 128, mr->lkey}}), EFAULT)
      << "past the MR's end";
  // Another program on the same NIC, with an ODP MR of its own.
  core::Context* other = b->dev.context_verbs().open_context(2003, 0, -1, 43);
  uint32_t other_pd = 0;
  ASSERT_EQ(b->dev.memory_verbs().alloc_pd(other, &other_pd), 0);
  core::Mr* theirs = nullptr;
  ASSERT_EQ(b->dev.memory_verbs().reg_mr(other, other_pd, mem.addr(2003, 0), 4096, mem.addr(2003, 0),
                                         IBV_ACCESS_ON_DEMAND, &theirs),
            0);
  EXPECT_EQ(advise(*b, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, {{mem.addr(2003, 0), 64, theirs->lkey}}), EPERM)
      << "another program's lkey";
  core::Mr* ro = odp_mr(*b, IBV_ACCESS_REMOTE_READ);
  EXPECT_EQ(advise(*b, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, {{base, 64, ro->lkey}}), 0);
  EXPECT_EQ(advise(*b, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, {{base, 64, ro->lkey}}), EFAULT)
      << "PREFETCH_WRITE needs LOCAL_WRITE";
}

TEST_F(Odp, AdviseMrFlushChecksThePagesExist) {
  core::Mr* mr = odp_mr(*b);
  const ibv_sge hole{mem.addr(b->pid, kMappedFarOff), 8192, mr->lkey};  // its second page is unmapped
  EXPECT_EQ(advise(*b, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, {hole}), 0) << "asynchronous: nothing to report";
  EXPECT_EQ(advise(*b, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, {hole}), EFAULT);
  EXPECT_EQ(advise(*b, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, IBV_ADVISE_MR_FLAG_FLUSH, {hole}), 0)
      << "NO_FAULT maps only what is there";
}

}  // namespace
}  // namespace simnic::testing
