// What keeps one user's mistakes or malice from reaching another: unguessable keys and QPNs,
// a per-context limit on queue memory and the NIC's limits on objects, given back when the
// context closes.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cerrno>
#include <set>

#include "fabric.h"

namespace simnic::testing {
namespace {

struct Nic {
  explicit Nic(uint32_t ip, uint64_t key_seed = 0)
      : port(fabric, ip), dev(config(ip, key_seed), mem, port, shm, notifier, logger) {}
  static core::DeviceConfig config(uint32_t ip, uint64_t key_seed) {
    core::DeviceConfig c;
    c.ipv4 = ip;
    c.key_seed = key_seed;
    return c;
  }
  core::Context* open(pid_t pid, uid_t uid = 0) { return dev.context_verbs().open_context(pid, uid, -1, -1); }
  uint32_t pd(core::Context* ctx) {
    uint32_t h = 0;
    EXPECT_EQ(dev.memory_verbs().alloc_pd(ctx, &h), 0);
    return h;
  }
  core::Cq* cq(core::Context* ctx) {
    core::Cq* c = nullptr;
    EXPECT_EQ(dev.queue_verbs().create_cq(ctx, 16, 0, &c), 0);
    return c;
  }
  int qp(core::Context* ctx, uint32_t pd, core::Cq* cq, uint32_t wr, core::Qp** out = nullptr) {
    ibv_qp_init_attr init{};
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = wr;
    init.cap.max_recv_wr = wr;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    core::Qp* q = nullptr;
    int e = dev.queue_verbs().create_qp(ctx, init, pd, cq->handle, cq->handle, 0, &q);
    if (out) *out = q;
    return e;
  }
  uint32_t mr_key(core::Context* ctx, uint32_t pd) {
    core::Mr* mr = nullptr;
    EXPECT_EQ(dev.memory_verbs().reg_mr(ctx, pd, mem.addr(ctx->pid, 0), 4096, mem.addr(ctx->pid, 0),
                                        IBV_ACCESS_LOCAL_WRITE, &mr),
              0);
    return mr ? mr->lkey : 0;
  }

  FakeMemory mem;
  Fabric fabric;
  Fabric::Port port;
  HeapShm shm;
  RecordingNotifier notifier;
  CapturingLogger logger;
  core::Device dev;
};

// Two NICs on the same address, as after a restart, must not hand out the same keys or QPNs:
// the old generator was seeded with the address, and QPNs counted up from 0x11.
TEST(Keys, QpnsAndKeysDifferBetweenTwoNicsWithTheSameAddress) {
  Nic x(0x7f000001), y(0x7f000001);
  core::Context* cx = x.open(100);
  core::Context* cy = y.open(100);
  uint32_t px = x.pd(cx), py = y.pd(cy);
  core::Cq* qx = x.cq(cx);
  core::Cq* qy = y.cq(cy);
  std::set<uint32_t> qpns_x, qpns_y, keys_x, keys_y;
  for (int i = 0; i < 8; ++i) {
    core::Qp *a = nullptr, *b = nullptr;
    ASSERT_EQ(x.qp(cx, px, qx, 4, &a), 0);
    ASSERT_EQ(y.qp(cy, py, qy, 4, &b), 0);
    qpns_x.insert(a->qpn);
    qpns_y.insert(b->qpn);
    keys_x.insert(x.mr_key(cx, px));
    keys_y.insert(y.mr_key(cy, py));
  }
  EXPECT_NE(qpns_x, qpns_y);
  EXPECT_NE(keys_x, keys_y);
  const std::set<uint32_t> counted_up = {0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18};
  EXPECT_NE(qpns_x, counted_up);
  for (uint32_t q : qpns_x) {
    EXPECT_GT(q, 1u) << "QP0 and QP1 are special";
    EXPECT_LT(q, 0xffffffu) << "0xffffff is the multicast QPN";
  }
}

TEST(Keys, MrKeysAndWindowRkeysNeverShareANamespace) {
  Nic x(0x7f000001);
  core::Context* c = x.open(100);
  uint32_t pd = x.pd(c);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(x.mr_key(c, pd) & 0x80000000u, 0u);
    core::Mw* mw = nullptr;
    ASSERT_EQ(x.dev.memory_verbs().alloc_mw(c, pd, IBV_MW_TYPE_2, &mw), 0);
    EXPECT_NE(mw->rkey & 0x80000000u, 0u);
    EXPECT_EQ(mw->rkey >> 8, mw->handle);
  }
}

TEST(Keys, AFixedSeedReplaysTheSameKeys) {
  Nic x(0x7f000001, 42), y(0x7f000002, 42);
  core::Context* cx = x.open(100);
  core::Context* cy = y.open(100);
  EXPECT_EQ(x.mr_key(cx, x.pd(cx)), y.mr_key(cy, y.pd(cy)));
}

// A context that asks for more queue memory than its share gets ENOMEM; another context is
// unaffected; closing the first gives its memory back.
TEST(ContextLimits, QueueMemoryIsCappedPerContextAndGivenBackOnClose) {
  Nic x(0x7f000001, 7);
  core::Context* greedy = x.open(100);
  uint32_t pd = x.pd(greedy);
  core::Cq* cq = x.cq(greedy);
  int made = 0, err = 0;
  while ((err = x.qp(greedy, pd, cq, core::DeviceLimits::kMaxQpWr)) == 0) ++made;
  EXPECT_EQ(err, ENOMEM);
  EXPECT_GT(made, 8);
  EXPECT_LE(greedy->queue_bytes, core::ContextLimits::kMaxQueueBytes);

  core::Context* other = x.open(101);
  uint32_t pd2 = x.pd(other);
  EXPECT_EQ(x.qp(other, pd2, x.cq(other), core::DeviceLimits::kMaxQpWr), 0);

  x.dev.context_verbs().close_context(greedy);
  core::Context* again = x.open(102);
  uint32_t pd3 = x.pd(again);
  core::Cq* cq3 = x.cq(again);
  int remade = 0;
  while (x.qp(again, pd3, cq3, core::DeviceLimits::kMaxQpWr) == 0) ++remade;
  EXPECT_EQ(remade, made);
}

// One program may hold every object ibv_query_device advertises, as on rxe (its pools are per
// device); the NIC's total stays bounded: past it, every context gets ENOMEM until some go.
// (Until issue 28 a context held at most half of each kind.)
TEST(ContextLimits, OneContextReachesWhatTheNicAdvertisesAndTheNicsTotalStaysBounded) {
  Nic x(0x7f000001, 7);
  const ibv_device_attr attr = x.dev.addressing().device_attr();
  core::Context* c = x.open(100);
  core::Cq* cq = nullptr;
  auto new_cq = [&](core::Context* ctx) { return x.dev.queue_verbs().create_cq(ctx, 1, 0, &cq); };
  uint32_t h = 0;
  for (int i = 0; i < attr.max_pd; ++i) ASSERT_EQ(x.dev.memory_verbs().alloc_pd(c, &h), 0) << i;
  EXPECT_EQ(x.dev.memory_verbs().alloc_pd(c, &h), ENOMEM);
  core::Context* other = x.open(101);
  EXPECT_EQ(x.dev.memory_verbs().alloc_pd(other, &h), ENOMEM) << "the NIC's max_pd are all in use";
  for (int i = 0; i < attr.max_cq; ++i) ASSERT_EQ(new_cq(c), 0) << i;
  EXPECT_EQ(new_cq(c), ENOMEM);
  EXPECT_EQ(new_cq(other), ENOMEM);
  x.dev.context_verbs().close_context(c);
  EXPECT_EQ(x.dev.memory_verbs().alloc_pd(other, &h), 0);
  EXPECT_EQ(new_cq(other), 0);
}

// Queue memory mapped lazily, as simnicd's memfds are: pages appear when touched, so rings of
// the largest CQs can be created here without writing a gigabyte.
class LazyShm : public core::ShmAllocator {
 public:
  bool allocate(size_t size, const std::string&, core::ShmRegion* out, int* err) override {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      *err = errno;
      return false;
    }
    *out = core::ShmRegion{p, size, -1};
    return true;
  }
  void release(core::ShmRegion& r) override {
    ::munmap(r.addr, r.size);
    r = {};
  }
};

// max_cqe is mlx5's 2^22 - 1 (libfabric's ofi_rxm asks 262144 entries by default): such a CQ
// is made, and its ring (224 MiB) is charged in full to the context's 1 GiB of queue memory,
// so a context holds four and the fifth is ENOMEM; another context still gets its own.
TEST(ContextLimits, TheLargestCqsFitAndTheQueueMemoryBudgetBoundsThem) {
  FakeMemory mem;
  Fabric fabric;
  Fabric::Port port(fabric, 0x7f000001);
  LazyShm shm;
  RecordingNotifier notifier;
  CapturingLogger logger;
  core::Device dev(Nic::config(0x7f000001, 7), mem, port, shm, notifier, logger);
  EXPECT_EQ(dev.addressing().device_attr().max_cqe, (1 << 22) - 1);
  core::Context* c = dev.context_verbs().open_context(100, 0, -1, -1);
  core::Cq* cq = nullptr;
  EXPECT_EQ(dev.queue_verbs().create_cq(c, (1 << 22), 0, &cq), EINVAL);
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(dev.queue_verbs().create_cq(c, (1 << 22) - 1, 0, &cq), 0) << i;
    EXPECT_EQ(cq->entries, 1u << 22);
  }
  EXPECT_EQ(dev.queue_verbs().create_cq(c, (1 << 22) - 1, 0, &cq), ENOMEM) << "past the context's queue memory";
  EXPECT_EQ(dev.queue_verbs().create_cq(c, 262144, 0, &cq), 0) << "what is left of it still holds rxm's CQ";
  EXPECT_LE(c->queue_bytes, core::ContextLimits::kMaxQueueBytes);
  core::Context* other = dev.context_verbs().open_context(101, 0, -1, -1);
  EXPECT_EQ(dev.queue_verbs().create_cq(other, 262144, 0, &cq), 0);
  dev.context_verbs().close_context(c);
  dev.context_verbs().close_context(other);
}

// max_ah is rxe's RXE_MAX_AH (32767): a program that keeps 16384 address handles (one per peer
// of a large UD job) fits, and one context reaches the whole of it.
TEST(ContextLimits, OneContextHoldsRxesMaxAhAddressHandles) {
  Nic x(0x7f000001, 7);
  const ibv_device_attr attr = x.dev.addressing().device_attr();
  EXPECT_EQ(attr.max_ah, 32767);
  core::Context* c = x.open(100);
  const uint32_t pd = x.pd(c);
  ibv_ah_attr av{};
  av.is_global = 1;
  av.port_num = 1;
  av.grh.dgid = x.dev.addressing().gid0();
  uint32_t h = 0;
  for (int i = 0; i < attr.max_ah; ++i) ASSERT_EQ(x.dev.memory_verbs().create_ah(c, pd, av, &h), 0) << i;
  EXPECT_EQ(x.dev.memory_verbs().create_ah(c, pd, av, &h), ENOMEM);
  EXPECT_EQ(x.dev.memory_verbs().destroy_ah(c, h), 0);
  EXPECT_EQ(x.dev.memory_verbs().create_ah(c, pd, av, &h), 0);
}

// Per-user shares (issue 29 point 7): one program with two contexts used to take every CQ and
// QP of a NIC, and others got ENOMEM. While another user (uid) has a context on the NIC, one
// user's contexts together hold at most 3/4 of each total; the refusal names the rule. The
// other user reaches the last quarter, and once alone again the first reaches everything.
TEST(UserShares, AUserWithTwoContextsHoldsAtMostThreeQuartersWhileAnotherUserIsHere) {
  Nic x(0x7f000001, 7);
  const ibv_device_attr attr = x.dev.addressing().device_attr();
  core::Context* a1 = x.open(100, 1000);
  core::Context* a2 = x.open(101, 1000);  // the same user's second context
  core::Context* b = x.open(200, 1001);   // a classmate
  const size_t pd_share = size_t(attr.max_pd) * 3 / 4, cq_share = size_t(attr.max_cq) * 3 / 4;
  uint32_t h = 0;
  size_t pds = 0;
  for (core::Context* c = a1; x.dev.memory_verbs().alloc_pd(c, &h) == 0; c = c == a1 ? a2 : a1) ++pds;
  EXPECT_EQ(pds, pd_share);
  std::string why = x.dev.journal().take_refusal();
  EXPECT_NE(why.find("uid 1000 already holds 3072 of the NIC's 4096 PDs (max_pd)"), std::string::npos) << why;
  EXPECT_NE(why.find("at most 3/4 of each total"), std::string::npos) << why;
  EXPECT_NE(why.find("uid 1001"), std::string::npos) << why;

  core::Cq* cq = nullptr;
  core::Cq* cq_a1 = x.cq(a1);  // each context's first CQ, for its QPs below
  core::Cq* cq_a2 = x.cq(a2);
  size_t cqs = 2;
  for (core::Context* c = a1; x.dev.queue_verbs().create_cq(c, 1, 0, &cq) == 0; c = c == a1 ? a2 : a1) ++cqs;
  EXPECT_EQ(cqs, cq_share);
  EXPECT_NE(x.dev.journal().take_refusal().find("CQs (max_cq)"), std::string::npos);

  // QPs need a PD and a CQ of the context: a1 has half of each.
  const uint32_t pd_a1 = a1->pds.front(), pd_a2 = a2->pds.front();
  size_t qps = 0;
  int err = 0;
  for (bool first = true; (err = first ? x.qp(a1, pd_a1, cq_a1, 1) : x.qp(a2, pd_a2, cq_a2, 1)) == 0; first = !first)
    ++qps;
  EXPECT_EQ(err, ENOMEM);
  EXPECT_EQ(qps, size_t(attr.max_qp) * 3 / 4);
  EXPECT_NE(x.dev.journal().take_refusal().find("QPs (max_qp)"), std::string::npos);

  // The classmate gets the quarter that was kept: every remaining PD, CQ and QP of the NIC.
  size_t b_pds = 0, b_cqs = 1;
  while (x.dev.memory_verbs().alloc_pd(b, &h) == 0) ++b_pds;
  EXPECT_EQ(b_pds, size_t(attr.max_pd) - pd_share);
  core::Cq* cq_b = x.cq(b);
  while (x.dev.queue_verbs().create_cq(b, 1, 0, &cq) == 0) ++b_cqs;
  EXPECT_EQ(b_cqs, size_t(attr.max_cq) - cq_share);
  size_t b_qps = 0;
  while (x.qp(b, b->pds.front(), cq_b, 1) == 0) ++b_qps;
  EXPECT_EQ(b_qps, size_t(attr.max_qp) - qps);
  EXPECT_EQ(x.dev.tables().counts().qps, size_t(attr.max_qp));

  // The classmate leaves: alone again, the first user reaches everything the NIC advertises.
  x.dev.context_verbs().close_context(b);
  size_t more = 0;
  while (x.dev.memory_verbs().alloc_pd(a1, &h) == 0) ++more;
  EXPECT_EQ(pds + more, size_t(attr.max_pd));
  EXPECT_EQ(x.dev.tables().counts().pds, size_t(attr.max_pd));
}

// MRs and address handles follow the same rule; one user alone is not limited by it (the
// tests above: a single context reaches max_pd, max_cq, max_ah).
TEST(UserShares, MrsAndAddressHandlesToo) {
  Nic x(0x7f000001, 7);
  const ibv_device_attr attr = x.dev.addressing().device_attr();
  core::Context* a = x.open(100, 1000);
  core::Context* b = x.open(200, 0);  // root's program on a user's NIC counts as another user
  const uint32_t pd = x.pd(a);
  ibv_ah_attr av{};
  av.is_global = 1;
  av.port_num = 1;
  av.grh.dgid = x.dev.addressing().gid0();
  uint32_t h = 0;
  size_t ahs = 0;
  while (x.dev.memory_verbs().create_ah(a, pd, av, &h) == 0) ++ahs;
  EXPECT_EQ(ahs, core::UserShares::share_of(attr.max_ah));
  EXPECT_NE(x.dev.journal().take_refusal().find("address handles (max_ah)"), std::string::npos);
  EXPECT_EQ(x.dev.memory_verbs().create_ah(b, x.pd(b), av, &h), 0);

  core::Mr* mr = nullptr;
  size_t mrs = 0;
  int err = 0;
  while ((err = x.dev.memory_verbs().reg_mr(a, pd, x.mem.addr(a->pid, 0), 4096, x.mem.addr(a->pid, 0),
                                            IBV_ACCESS_LOCAL_WRITE, &mr)) == 0)
    ++mrs;
  EXPECT_EQ(err, ENOMEM);
  EXPECT_EQ(mrs, core::UserShares::share_of(attr.max_mr));
  EXPECT_NE(x.dev.journal().take_refusal().find("MRs (max_mr)"), std::string::npos);
  EXPECT_EQ(x.dev.memory_verbs().reg_mr(b, b->pds.front(), x.mem.addr(b->pid, 0), 4096, x.mem.addr(b->pid, 0),
                                        IBV_ACCESS_LOCAL_WRITE, &mr),
            0);
}

// Memory windows and SRQs too.
TEST(UserShares, MemoryWindowsAndSrqsToo) {
  Nic x(0x7f000001, 7);
  const ibv_device_attr attr = x.dev.addressing().device_attr();
  core::Context* a = x.open(100, 1000);
  core::Context* b = x.open(200, 1001);
  const uint32_t pd = x.pd(a);
  core::Mw* mw = nullptr;
  size_t mws = 0;
  while (x.dev.memory_verbs().alloc_mw(a, pd, IBV_MW_TYPE_2, &mw) == 0) ++mws;
  EXPECT_EQ(mws, core::UserShares::share_of(attr.max_mw));
  EXPECT_NE(x.dev.journal().take_refusal().find("memory windows (max_mw)"), std::string::npos);
  EXPECT_EQ(x.dev.memory_verbs().alloc_mw(b, x.pd(b), IBV_MW_TYPE_2, &mw), 0);

  ibv_srq_attr sa{};
  sa.max_wr = 1;
  sa.max_sge = 1;
  core::Srq* srq = nullptr;
  size_t srqs = 0;
  while (x.dev.queue_verbs().create_srq(a, pd, sa, &srq) == 0) ++srqs;
  EXPECT_EQ(srqs, core::UserShares::share_of(attr.max_srq));
  EXPECT_NE(x.dev.journal().take_refusal().find("SRQs (max_srq)"), std::string::npos);
  EXPECT_EQ(x.dev.queue_verbs().create_srq(b, x.pd(b), sa, &srq), 0);
}

}  // namespace
}  // namespace simnic::testing
