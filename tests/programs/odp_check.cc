// simnic-odp-check: on-demand paging between two processes, as a plain verbs program (linked
// against the system libibverbs). The server (device -b) reserves 1 GiB, unmaps all of it but
// three pages far apart, and registers the whole GiB with IBV_ACCESS_ON_DEMAND (a pinned
// registration of it must fail with EFAULT); it also registers an implicit ODP MR (NULL,
// SIZE_MAX). The client (device -a, a child process) WRITEs and READs the mapped pages through
// both (bytes compared on both sides), and each time WRITEs to an unmapped page: that must
// complete with IBV_WC_REM_ACCESS_ERR. A WRITE from an unmapped page of the client's own ODP MR
// must complete with IBV_WC_LOC_PROT_ERR. Run it with `simnic run -- ...`.
//
//   simnic-odp-check [-a DEV_A] [-b DEV_B]
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "check_util.h"

namespace {

using namespace check;

constexpr size_t kPage = 4096;
constexpr size_t kSpan = 1ull << 30;  // the ODP registration
// The pages of the GiB that stay mapped, and one that does not.
constexpr size_t kKept[3] = {0, 333ull << 20, kSpan - kPage};
constexpr size_t kHole = 700ull << 20;
constexpr int kAccess = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
constexpr int kQps = 3;  // explicit ODP, implicit ODP, local fault: an error leaves a QP in ERR

struct Msg {
  uint32_t qpn[kQps];
  ibv_gid gid;
  uint64_t base;  // the 1 GiB reservation (its iova)
  uint32_t rkey;  // of the explicit ODP MR
  uint32_t implicit_rkey;
  uint64_t small;     // a mapped buffer of the server's, reached through the implicit MR
  int32_t status[4];  // client: the error completions it saw
};

struct Side : DeviceSetup {
  ibv_qp* qp[kQps] = {};
};

bool open_side(const char* dev, Side* s) {
  if (!s->open(dev, 64)) return false;
  for (ibv_qp*& q : s->qp) {
    q = create_qp(s->pd, s->cq, IBV_QPT_RC, 16, 1);
    CHECK(q, "create_qp");
  }
  return true;
}

// The server's GiB: reserved, then unmapped but for kKept; every hole checked unmapped (mincore
// fails with ENOMEM on a range with no mapping), since a later mmap could have filled one.
uint8_t* reserve_sparse() {
  void* p = mmap(nullptr, kSpan, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* base = static_cast<uint8_t*>(p);
  for (size_t i = 0; i + 1 < 3; ++i) munmap(base + kKept[i] + kPage, kKept[i + 1] - kKept[i] - kPage);
  return base;
}

bool hole_is_unmapped(uint8_t* base) {
  unsigned char v = 0;
  return mincore(base + kHole, kPage, &v) == -1 && errno == ENOMEM;
}

bool check_caps(ibv_context* ctx) {
  ibv_device_attr_ex ex{};
  CHECK(ibv_query_device_ex(ctx, nullptr, &ex) == 0, "ibv_query_device_ex");
  const uint32_t rc = ex.odp_caps.per_transport_caps.rc_odp_caps;
  CHECK((ex.odp_caps.general_caps & (IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT)) ==
            (IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT),
        "general_odp_caps %#llx", (unsigned long long)ex.odp_caps.general_caps);
  CHECK((rc & (IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV)) ==
            (IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV),
        "rc_odp_caps %#x", rc);
  std::printf("caps: ODP_SUPPORT and ODP_SUPPORT_IMPLICIT, rc_odp_caps %#x\n", rc);
  return true;
}

bool run_server(const char* dev, int sock) {
  Side s;
  if (!open_side(dev, &s) || !check_caps(s.ctx)) return false;
  uint8_t* base = reserve_sparse();
  CHECK(base, "reserve 1 GiB");
  for (int i = 0; i < 3; ++i) fill(base + kKept[i], kPage, 10 + i);
  const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  errno = 0;
  CHECK(!ibv_reg_mr(s.pd, base, kHole + kPage, rw) && errno == EFAULT, "a pinned MR up to the hole fails with EFAULT");
  // Both ends mapped, the middle not: the kernel pins every page, so this fails too.
  errno = 0;
  CHECK(!ibv_reg_mr(s.pd, base, kKept[1] + kPage, rw) && errno == EFAULT,
        "a pinned MR over a hole between two mapped pages fails with EFAULT");
  ibv_mr* one = ibv_reg_mr(s.pd, base + kKept[1], kPage, rw);
  CHECK(one && ibv_dereg_mr(one) == 0, "a pinned MR over one mapped page");
  ibv_mr* mr = ibv_reg_mr(s.pd, base, kSpan, rw | IBV_ACCESS_ON_DEMAND);
  CHECK(mr, "ibv_reg_mr(1 GiB, IBV_ACCESS_ON_DEMAND)");
  ibv_mr* implicit = ibv_reg_mr(s.pd, nullptr, SIZE_MAX, rw | IBV_ACCESS_ON_DEMAND);
  CHECK(implicit, "ibv_reg_mr(NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND): implicit ODP");
  // Prefetch: a mapped page is fine; a hole fails when asked to finish now (FLUSH).
  ibv_sge kept{uint64_t(uintptr_t(base + kKept[1])), kPage, mr->lkey},
      hole{uint64_t(uintptr_t(base + kHole)), kPage, mr->lkey};
  CHECK(ibv_advise_mr(s.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &kept, 1) == 0,
        "advise kept");
  int e = ibv_advise_mr(s.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &hole, 1);
  CHECK(e == EFAULT, "advise on a hole with FLUSH: %d", e);
  std::printf("advise: prefetch of a mapped page 0, of an unmapped one with FLUSH EFAULT\n");
  std::vector<uint8_t> small(8192);
  fill(small.data(), small.size(), 20);
  CHECK(hole_is_unmapped(base), "the hole at +700 MiB is unmapped");
  Msg m{};
  for (int i = 0; i < kQps; ++i) m.qpn[i] = s.qp[i]->qp_num;
  m.gid = s.gid, m.base = uint64_t(uintptr_t(base)), m.rkey = mr->rkey, m.implicit_rkey = implicit->rkey;
  m.small = uint64_t(uintptr_t(small.data()));
  Msg peer{};
  CHECK(send_msg(sock, m) && recv_msg(sock, &peer), "exchange");
  for (int i = 0; i < kQps; ++i) CHECK(connect_qp(s.qp[i], peer.qpn[i], peer.gid, kAccess), "connect %d", i);
  CHECK(send_msg(sock, m) && recv_msg(sock, &peer), "the client finished");
  // The client wrote seeds 30 and 31 into the first and last kept pages, 32 into small[4096..].
  CHECK(filled(base + kKept[0], kPage, 30) && filled(base + kKept[2], kPage, 31), "WRITEs landed in the GiB");
  CHECK(filled(small.data() + 4096, 4096, 32) && filled(small.data(), 4096, 20), "WRITE through the implicit MR");
  CHECK(hole_is_unmapped(base), "the hole is still unmapped");
  std::printf("server: the peer's WRITEs landed 333 MiB and 1 GiB apart; the hole stayed unmapped\n");
  CHECK(ibv_dereg_mr(implicit) == 0 && ibv_dereg_mr(mr) == 0, "dereg");
  for (ibv_qp* q : s.qp) ibv_destroy_qp(q);
  CHECK(ibv_destroy_cq(s.cq) == 0 && ibv_dealloc_pd(s.pd) == 0 && ibv_close_device(s.ctx) == 0, "teardown");
  munmap(base, kPage), munmap(base + kKept[1], kPage), munmap(base + kKept[2], kPage);
  return true;
}

bool client_steps(Side& s, const Msg& m, Msg* out) {
  // The client's own buffer is ODP too: 4 pages, the last one unmapped.
  auto* buf =
      static_cast<uint8_t*>(mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  CHECK(buf != MAP_FAILED && munmap(buf + 3 * kPage, kPage) == 0, "client buffer");
  ibv_mr* mr = ibv_reg_mr(s.pd, buf, 4 * kPage, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
  CHECK(mr, "client ODP MR");
  ibv_cq* cq = s.cq;
  fill(buf, kPage, 30);
  CHECK(post_wait(s.qp[0], cq, IBV_WR_RDMA_WRITE, buf, kPage, mr->lkey, m.base + kKept[0], m.rkey) == IBV_WC_SUCCESS,
        "write 0");
  fill(buf, kPage, 31);
  CHECK(post_wait(s.qp[0], cq, IBV_WR_RDMA_WRITE, buf, kPage, mr->lkey, m.base + kKept[2], m.rkey) == IBV_WC_SUCCESS,
        "write 2");
  CHECK(post_wait(s.qp[0], cq, IBV_WR_RDMA_READ, buf + kPage, kPage, mr->lkey, m.base + kKept[1], m.rkey) ==
                IBV_WC_SUCCESS &&
            filled(buf + kPage, kPage, 11),
        "read the page at +333 MiB");
  std::printf("explicit ODP: 2 pages written and 1 read, 333 MiB and 1 GiB apart, bytes compared\n");
  out->status[0] = post_wait(s.qp[0], cq, IBV_WR_RDMA_WRITE, buf, 64, mr->lkey, m.base + kHole, m.rkey);
  CHECK(out->status[0] == IBV_WC_REM_ACCESS_ERR, "WRITE to the hole: status %d", out->status[0]);
  std::printf("explicit ODP: a WRITE to an unmapped page completed with %s\n",
              ibv_wc_status_str(ibv_wc_status(out->status[0])));
  // Implicit ODP: the server's own addresses, any of them.
  CHECK(post_wait(s.qp[1], cq, IBV_WR_RDMA_READ, buf, 4096, mr->lkey, m.small, m.implicit_rkey) == IBV_WC_SUCCESS &&
            filled(buf, 4096, 20),
        "read through the implicit MR");
  fill(buf, kPage, 32);
  CHECK(post_wait(s.qp[1], cq, IBV_WR_RDMA_WRITE, buf, 4096, mr->lkey, m.small + 4096, m.implicit_rkey) ==
            IBV_WC_SUCCESS,
        "write through the implicit MR");
  out->status[1] = post_wait(s.qp[1], cq, IBV_WR_RDMA_READ, buf, 64, mr->lkey, m.base + kHole, m.implicit_rkey);
  CHECK(out->status[1] == IBV_WC_REM_ACCESS_ERR, "READ of the hole via implicit: status %d", out->status[1]);
  std::printf("implicit ODP: 4096 bytes read and 4096 written, a READ of an unmapped page completed with %s\n",
              ibv_wc_status_str(ibv_wc_status(out->status[1])));
  // A local page fault: the WRITE's source is the unmapped page of our own ODP MR.
  out->status[2] = post_wait(s.qp[2], cq, IBV_WR_RDMA_WRITE, buf + 3 * kPage, 64, mr->lkey, m.base + kKept[1], m.rkey);
  CHECK(out->status[2] == IBV_WC_LOC_PROT_ERR, "WRITE from our own hole: status %d", out->status[2]);
  std::printf("local ODP fault: a WRITE from an unmapped page completed with %s\n",
              ibv_wc_status_str(ibv_wc_status(out->status[2])));
  CHECK(ibv_dereg_mr(mr) == 0, "dereg");
  munmap(buf, 3 * kPage);
  return true;
}

bool run_client(const char* dev, int sock) {
  Side s;
  Msg m{}, me{};
  if (!open_side(dev, &s)) return false;
  CHECK(recv_msg(sock, &m), "the server's set-up");
  for (int i = 0; i < kQps; ++i) me.qpn[i] = s.qp[i]->qp_num;
  me.gid = s.gid;
  for (int i = 0; i < kQps; ++i) CHECK(connect_qp(s.qp[i], m.qpn[i], m.gid, kAccess), "connect %d", i);
  CHECK(send_msg(sock, me) && recv_msg(sock, &m), "the server connected");
  bool ok = client_steps(s, m, &me);
  CHECK(send_msg(sock, me), "report");
  for (ibv_qp* q : s.qp) ibv_destroy_qp(q);
  ibv_destroy_cq(s.cq), ibv_dealloc_pd(s.pd), ibv_close_device(s.ctx);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return run_pair_on_devices(
      argc, argv, [](int fd, const char* dev) { return run_client(dev, fd); },
      [](int fd, const char* dev) { return run_server(dev, fd); });
}
