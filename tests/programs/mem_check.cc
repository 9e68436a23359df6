// simnic-mem-check: memory registration as rxe and rdma-core have it (issue 28), as a plain
// verbs program (linked against the system libibverbs). One process, one RC QP pair between
// device -a and device -b; every completion's status checked and every byte compared.
//
//   simnic-mem-check [-a DEV_A] [-b DEV_B] -z     zero-length MRs and zero-byte SEND/WRITE/READ
//   simnic-mem-check [-a DEV_A] [-b DEV_B] -r     traffic through MRs after ibv_rereg_mr
//   simnic-mem-check [-a DEV_A] [-b DEV_B] -o     RC QPs on a PD with ODP MRs
//   simnic-mem-check [-a DEV_A] -d                device memory copies and their bounds
//   simnic-mem-check [-a DEV_A] -p N              N processes allocating and freeing DM at once
//
// Run it with `simnic run -- ...`.
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <getopt.h>
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "check_util.h"

namespace {

using namespace check;

constexpr size_t kPage = 4096;
constexpr int kRw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

struct Side : DeviceSetup {
  ibv_qp* qp = nullptr;
};

ibv_qp* new_rc_qp(ibv_pd* pd, ibv_cq* cq) { return create_qp(pd, cq, IBV_QPT_RC, 16, 2); }

bool open_side(const char* dev, Side* s) {
  if (!s->open(dev, 64)) return false;
  s->qp = new_rc_qp(s->pd, s->cq);
  CHECK(s->qp, "create_qp");
  return true;
}

bool connect_pair(Side& a, Side& b) {
  CHECK(connect_qp(a.qp, b.qp->qp_num, b.gid, kRw) && connect_qp(b.qp, a.qp->qp_num, a.gid, kRw), "connect");
  return true;
}

void close_side(Side& s) {
  if (s.qp) ibv_destroy_qp(s.qp);
  if (s.cq) ibv_destroy_cq(s.cq);
  if (s.pd) ibv_dealloc_pd(s.pd);
  if (s.ctx) ibv_close_device(s.ctx);
}

bool post_recv(ibv_qp* qp, void* buf, uint32_t len, uint32_t lkey) {
  ibv_sge sge{uint64_t(uintptr_t(buf)), len, lkey};
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = 2;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return ibv_post_recv(qp, &wr, &bad) == 0;
}

// The receive completion on B's CQ: status and byte_len.
bool recv_done(ibv_cq* cq, ibv_wc_status want, uint32_t byte_len) {
  ibv_wc wc{};
  CHECK(poll_one(cq, &wc), "receive completion");
  CHECK(wc.status == want && wc.opcode == IBV_WC_RECV && wc.byte_len == byte_len, "receive: status %s byte_len %u",
        ibv_wc_status_str(wc.status), wc.byte_len);
  return true;
}

// --- -z: zero-length memory ------------------------------------------------------------------

// ibv_reg_mr with length 0 as the kernel's ib_umem_get: it pins the pages [addr, addr + 0)
// touches, rounded out to pages; at a page boundary that is none (EINVAL), elsewhere the one
// page addr is in.
bool zero_length_registration(Side& s, uint8_t* page, ibv_mr** zero) {
  errno = 0;
  CHECK(!ibv_reg_mr(s.pd, page, 0, kRw) && errno == EINVAL, "a zero-length MR at a page boundary: EINVAL");
  *zero = ibv_reg_mr(s.pd, page + 100, 0, kRw);
  CHECK(*zero && (*zero)->length == 0, "a zero-length MR inside a page");
  ibv_mr* odp = ibv_reg_mr(s.pd, page + 100, 0, kRw | IBV_ACCESS_ON_DEMAND);
  CHECK(odp && ibv_dereg_mr(odp) == 0, "a zero-length ODP MR inside a page");
  std::printf("zero-length MR: EINVAL at a page boundary, registered inside a page (pinned and ODP)\n");
  return true;
}

// A zero-length device-memory MR: the kernel checks only that it lies within the DM (mlx5
// registers it).
bool zero_length_dm_mr(Side& s) {
  ibv_alloc_dm_attr da{kPage, 0, 0};
  ibv_dm* dm = ibv_alloc_dm(s.ctx, &da);
  CHECK(dm, "ibv_alloc_dm");
  ibv_mr* mr = ibv_reg_dm_mr(s.pd, dm, 0, 0, kRw | IBV_ACCESS_ZERO_BASED);
  CHECK(mr && mr->length == 0, "ibv_reg_dm_mr of length 0");
  ibv_mr* end = ibv_reg_dm_mr(s.pd, dm, kPage, 0, kRw | IBV_ACCESS_ZERO_BASED);
  CHECK(end, "ibv_reg_dm_mr of length 0 at the DM's end");
  errno = 0;
  CHECK(!ibv_reg_dm_mr(s.pd, dm, kPage + 1, 0, kRw | IBV_ACCESS_ZERO_BASED) && errno == EINVAL, "beyond the DM");
  CHECK(ibv_dereg_mr(end) == 0 && ibv_dereg_mr(mr) == 0 && ibv_free_dm(dm) == 0, "DM teardown");
  std::printf("zero-length DM MR: registered within the DM, EINVAL beyond it\n");
  return true;
}

// Zero-byte SEND, WRITE and READ through the zero-length MR, at its address and far outside
// it: a zero-length DMA touches no memory, so neither lkey nor rkey range is checked (rxe's
// copy_data returns at once for length 0; its responder takes a zero-length RETH without an
// rkey check, IBA C9-88). A byte through the zero-length MR is out of its range (LOC_PROT_ERR).
bool zero_byte_traffic(Side& a, Side& b, ibv_mr* za, ibv_mr* zb, uint8_t* pa, uint8_t* pb) {
  fill(pb, kPage, 7);
  for (uint8_t* at : {pa + 100, pa + 3000}) {
    CHECK(post_recv(b.qp, pb + 100, 0, zb->lkey), "post_recv");
    CHECK(post_wait(a.qp, a.cq, IBV_WR_SEND, at, 0, za->lkey) == IBV_WC_SUCCESS, "zero-byte SEND");
    CHECK(recv_done(b.cq, IBV_WC_SUCCESS, 0), "zero-byte receive");
    CHECK(post_wait(a.qp, a.cq, IBV_WR_RDMA_WRITE, at, 0, za->lkey, uint64_t(uintptr_t(pb + 3000)), zb->rkey) ==
              IBV_WC_SUCCESS,
          "zero-byte WRITE outside the MR");
    CHECK(post_wait(a.qp, a.cq, IBV_WR_RDMA_READ, at, 0, za->lkey, uint64_t(uintptr_t(pb + 100)), zb->rkey) ==
              IBV_WC_SUCCESS,
          "zero-byte READ");
  }
  // A receive buffer the zero-length MR does not cover takes a zero-byte SEND: rxe's
  // responder checks an SGE only when it copies bytes into it (copy_data).
  CHECK(post_recv(b.qp, pb + 3000, 16, zb->lkey), "post_recv");
  CHECK(post_wait(a.qp, a.cq, IBV_WR_SEND, pa + 100, 0, za->lkey) == IBV_WC_SUCCESS, "zero-byte SEND");
  CHECK(recv_done(b.cq, IBV_WC_SUCCESS, 0), "zero-byte receive into 16 bytes outside the MR");
  CHECK(filled(pb, kPage, 7), "nothing written");
  std::printf("zero-byte SEND, WRITE and READ through zero-length MRs, inside and outside them: success\n");
  int st = post_wait(a.qp, a.cq, IBV_WR_RDMA_WRITE, pa + 100, 1, za->lkey, uint64_t(uintptr_t(pb + 100)), zb->rkey);
  CHECK(st == IBV_WC_LOC_PROT_ERR, "a 1-byte WRITE from a zero-length MR: %d", st);
  std::printf("one byte from a zero-length MR: %s\n", ibv_wc_status_str(ibv_wc_status(st)));
  return true;
}

bool run_zero(const char* dev_a, const char* dev_b) {
  Side a, b;
  if (!open_side(dev_a, &a) || !open_side(dev_b, &b) || !connect_pair(a, b)) return false;
  auto* pa = static_cast<uint8_t*>(mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  auto* pb = static_cast<uint8_t*>(mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  CHECK(pa != MAP_FAILED && pb != MAP_FAILED, "mmap");
  ibv_mr *za = nullptr, *zb = nullptr;
  if (!zero_length_registration(a, pa, &za) || !zero_length_registration(b, pb, &zb) || !zero_length_dm_mr(b))
    return false;
  if (!zero_byte_traffic(a, b, za, zb, pa, pb)) return false;
  CHECK(ibv_dereg_mr(za) == 0 && ibv_dereg_mr(zb) == 0, "dereg");
  close_side(a), close_side(b);
  return true;
}

// --- -r: traffic after ibv_rereg_mr ------------------------------------------------------------

// B's MR moves (CHANGE_TRANSLATION), then goes to another PD (CHANGE_PD); A's source MR moves
// too. Every WRITE, READ and SEND through them must succeed and land where the MR now is.
bool rereg_translation(Side& a, Side& b, uint8_t* pa, uint8_t* pb) {
  ibv_mr* ma = ibv_reg_mr(a.pd, pa, kPage, kRw);
  ibv_mr* mb = ibv_reg_mr(b.pd, pb, kPage, kRw);
  CHECK(ma && mb, "reg");
  CHECK(ibv_rereg_mr(mb, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, pb + kPage, kPage, 0) == 0, "rereg B");
  CHECK(ibv_rereg_mr(ma, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, pa + kPage, kPage, 0) == 0, "rereg A");
  fill(pa + kPage, kPage, 41);
  int st =
      post_wait(a.qp, a.cq, IBV_WR_RDMA_WRITE, pa + kPage, kPage, ma->lkey, uint64_t(uintptr_t(pb + kPage)), mb->rkey);
  CHECK(st == IBV_WC_SUCCESS && filled(pb + kPage, kPage, 41), "WRITE after rereg translation: %d", st);
  fill(pb + kPage, kPage, 42);
  st = post_wait(a.qp, a.cq, IBV_WR_RDMA_READ, pa + kPage, kPage, ma->lkey, uint64_t(uintptr_t(pb + kPage)), mb->rkey);
  CHECK(st == IBV_WC_SUCCESS && filled(pa + kPage, kPage, 42), "READ after rereg translation: %d", st);
  CHECK(post_recv(b.qp, pb + kPage, 256, mb->lkey), "post_recv");
  fill(pa + kPage, 256, 43);
  st = post_wait(a.qp, a.cq, IBV_WR_SEND, pa + kPage, 256, ma->lkey);
  CHECK(st == IBV_WC_SUCCESS && recv_done(b.cq, IBV_WC_SUCCESS, 256) && filled(pb + kPage, 256, 43),
        "SEND after rereg translation: %d", st);
  CHECK(ibv_dereg_mr(ma) == 0 && ibv_dereg_mr(mb) == 0, "dereg");
  std::printf("rereg translation: WRITE, READ and SEND through the moved MRs, bytes compared\n");
  return true;
}

// CHANGE_PD: A's and B's MRs go to new PDs, with new QPs on them; traffic through the new QPs.
bool rereg_pd(Side& a, Side& b, uint8_t* pa, uint8_t* pb) {
  ibv_mr* ma = ibv_reg_mr(a.pd, pa, kPage, kRw);
  ibv_mr* mb = ibv_reg_mr(b.pd, pb, kPage, kRw);
  CHECK(ma && mb, "reg");
  Side a2 = a, b2 = b;
  a2.pd = ibv_alloc_pd(a.ctx), b2.pd = ibv_alloc_pd(b.ctx);
  CHECK(a2.pd && b2.pd, "alloc_pd");
  a2.qp = new_rc_qp(a2.pd, a.cq), b2.qp = new_rc_qp(b2.pd, b.cq);
  CHECK(a2.qp && b2.qp && connect_pair(a2, b2), "QPs on the new PDs");
  CHECK(ibv_rereg_mr(ma, IBV_REREG_MR_CHANGE_PD, a2.pd, nullptr, 0, 0) == 0, "rereg A's PD");
  CHECK(ibv_rereg_mr(mb, IBV_REREG_MR_CHANGE_PD, b2.pd, nullptr, 0, 0) == 0, "rereg B's PD");
  fill(pa, kPage, 51);
  int st = post_wait(a2.qp, a.cq, IBV_WR_RDMA_WRITE, pa, kPage, ma->lkey, uint64_t(uintptr_t(pb)), mb->rkey);
  CHECK(st == IBV_WC_SUCCESS && filled(pb, kPage, 51), "WRITE after rereg PD: %d", st);
  CHECK(post_recv(b2.qp, pb, 128, mb->lkey), "post_recv");
  fill(pa, 128, 52);
  st = post_wait(a2.qp, a.cq, IBV_WR_SEND, pa, 128, ma->lkey);
  CHECK(st == IBV_WC_SUCCESS && recv_done(b.cq, IBV_WC_SUCCESS, 128) && filled(pb, 128, 52), "SEND after rereg PD: %d",
        st);
  // The old QPs' PD no longer holds the MRs.
  st = post_wait(a.qp, a.cq, IBV_WR_RDMA_WRITE, pa, 64, ma->lkey, uint64_t(uintptr_t(pb)), mb->rkey);
  CHECK(st == IBV_WC_LOC_PROT_ERR, "an lkey of another PD: %d", st);
  CHECK(ibv_dereg_mr(ma) == 0 && ibv_dereg_mr(mb) == 0, "dereg");
  CHECK(ibv_destroy_qp(a2.qp) == 0 && ibv_destroy_qp(b2.qp) == 0 && ibv_dealloc_pd(a2.pd) == 0 &&
            ibv_dealloc_pd(b2.pd) == 0,
        "teardown");
  std::printf("rereg PD: WRITE and SEND through QPs of the new PDs, bytes compared\n");
  return true;
}

// Back to RTS from wherever the QP is (ERR): RESET, then the walk again, as rdma-core's tests
// restate their QPs (tests/test_mr.py restate_qps).
bool restate(Side& a, Side& b) {
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RESET;
  CHECK(ibv_modify_qp(a.qp, &r, IBV_QP_STATE) == 0 && ibv_modify_qp(b.qp, &r, IBV_QP_STATE) == 0, "to RESET");
  return connect_pair(a, b);
}

// rdma-core's tests/test_mr.py validate_rereg_addr: a receive posted with the old address
// fails once the MR has moved (the client's SEND completes with REM_OP_ERR); after the QPs are
// reset and brought back, traffic through the moved MR succeeds.
bool rereg_after_error(Side& a, Side& b, uint8_t* pa, uint8_t* pb) {
  ibv_mr* ma = ibv_reg_mr(a.pd, pa, kPage, kRw);
  ibv_mr* mb = ibv_reg_mr(b.pd, pb, kPage, kRw);
  CHECK(ma && mb, "reg");
  if (!restate(a, b)) return false;  // rereg_pd left A's QP in ERR
  CHECK(post_recv(b.qp, pb, 256, mb->lkey), "post_recv at the old address");
  CHECK(ibv_rereg_mr(mb, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, pb + kPage, kPage, 0) == 0, "rereg B");
  CHECK(post_recv(b.qp, pb + kPage, 256, mb->lkey), "post_recv at the new address");
  int st = post_wait(a.qp, a.cq, IBV_WR_SEND, pa, 256, ma->lkey);
  CHECK(st == IBV_WC_REM_OP_ERR, "SEND into the old address: %d", st);
  // B's CQ holds the failed receive and the flushed one, and the program does not poll them
  // (rdma-core's test does not): the reset removes them, as mlx5 does (mlx5_cq_clean), so the
  // next completion B sees is its next receive's.
  ibv_wc wc{};
  if (!restate(a, b)) return false;
  for (uint32_t i = 0; i < 3; ++i) {
    CHECK(post_recv(b.qp, pb + kPage, 256, mb->lkey), "post_recv");
    fill(pa, 256, 60 + i);
    st = post_wait(a.qp, a.cq, IBV_WR_SEND, pa, 256, ma->lkey);
    CHECK(st == IBV_WC_SUCCESS, "SEND %u after restating: %s", i, ibv_wc_status_str(ibv_wc_status(st)));
    CHECK(poll_one(b.cq, &wc), "receive completion");
    CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == 256 && filled(pb + kPage, 256, 60 + i),
          "receive %u after restating: %s", i, ibv_wc_status_str(wc.status));
  }
  CHECK(ibv_dereg_mr(ma) == 0 && ibv_dereg_mr(mb) == 0, "dereg");
  std::printf("rereg translation with a receive at the old address: REM_OP_ERR, then after a reset 3 SENDs land\n");
  return true;
}

bool run_rereg(const char* dev_a, const char* dev_b) {
  Side a, b;
  if (!open_side(dev_a, &a) || !open_side(dev_b, &b) || !connect_pair(a, b)) return false;
  std::vector<uint8_t> ba(2 * kPage), bb(2 * kPage);
  if (!rereg_translation(a, b, ba.data(), bb.data()) || !rereg_pd(a, b, ba.data(), bb.data()) ||
      !rereg_after_error(a, b, ba.data(), bb.data()))
    return false;
  close_side(a), close_side(b);
  return true;
}

// --- -o: RC QPs on a PD with ODP MRs ----------------------------------------------------------

// ibv_rc_pingpong -o's order: ODP MRs (explicit, and implicit over the whole address space)
// on the PD first, then the QPs, walked RESET -> INIT -> RTR -> RTS; then traffic through them.
bool run_odp(const char* dev_a, const char* dev_b) {
  Side a, b;
  a.ctx = open_dev(dev_a), b.ctx = open_dev(dev_b);
  CHECK(a.ctx && b.ctx, "open");
  std::vector<uint8_t> ba(kPage), bb(kPage);
  ibv_mr *ma = nullptr, *mb = nullptr, *implicit = nullptr;
  for (Side* s : {&a, &b}) {
    s->pd = ibv_alloc_pd(s->ctx);
    s->cq = ibv_create_cq(s->ctx, 64, nullptr, nullptr, 0);
    CHECK(s->pd && s->cq && ibv_query_gid(s->ctx, 1, 0, &s->gid) == 0, "pd, cq, gid");
  }
  ma = ibv_reg_mr(a.pd, ba.data(), kPage, kRw | IBV_ACCESS_ON_DEMAND);
  mb = ibv_reg_mr(b.pd, bb.data(), kPage, kRw | IBV_ACCESS_ON_DEMAND);
  implicit = ibv_reg_mr(b.pd, nullptr, SIZE_MAX, kRw | IBV_ACCESS_ON_DEMAND);
  CHECK(ma && mb && implicit, "ODP MRs");
  a.qp = new_rc_qp(a.pd, a.cq), b.qp = new_rc_qp(b.pd, b.cq);
  CHECK(a.qp && b.qp, "QPs on the ODP PDs");
  // The MR's flags as the QP's access flags, as programs pass them.
  CHECK(to_init(a.qp, Path{.access = kRw | IBV_ACCESS_ON_DEMAND}) == 0, "RESET->INIT with the MR's access flags");
  ibv_qp_attr reset{};
  reset.qp_state = IBV_QPS_RESET;
  CHECK(ibv_modify_qp(a.qp, &reset, IBV_QP_STATE) == 0, "back to RESET");
  if (!connect_pair(a, b)) return false;
  fill(ba.data(), kPage, 71);
  int st =
      post_wait(a.qp, a.cq, IBV_WR_RDMA_WRITE, ba.data(), kPage, ma->lkey, uint64_t(uintptr_t(bb.data())), mb->rkey);
  CHECK(st == IBV_WC_SUCCESS && filled(bb.data(), kPage, 71), "WRITE into the ODP MR: %d", st);
  fill(ba.data(), kPage, 72);
  st = post_wait(a.qp, a.cq, IBV_WR_RDMA_WRITE, ba.data(), kPage, ma->lkey, uint64_t(uintptr_t(bb.data())),
                 implicit->rkey);
  CHECK(st == IBV_WC_SUCCESS && filled(bb.data(), kPage, 72), "WRITE through the implicit MR: %d", st);
  CHECK(ibv_dereg_mr(ma) == 0 && ibv_dereg_mr(mb) == 0 && ibv_dereg_mr(implicit) == 0, "dereg");
  close_side(a), close_side(b);
  std::printf("ODP: RC QPs on PDs with ODP MRs went RESET->INIT->RTR->RTS and carried WRITEs\n");
  return true;
}

// --- -d: device memory copies ------------------------------------------------------------------

// ibv_memcpy_to_dm/from_dm beyond the DM are refused (EFAULT, as mlx5's mlx5_access_dm), and
// so are copies not in 4-byte words (EINVAL, as mlx5); they copy nothing; so are DM MRs beyond it (EINVAL), and RDMA
// beyond a DM MR. RDMA through an MR over [512, +256) of the DM (zero-based): a WRITE at 0 lands at DM offset 512, a
// READ gets it back, and a WRITE that runs past the MR's 256 bytes is refused (REM_ACCESS_ERR) and writes nothing.
bool dm_rdma(Side& s, ibv_dm* dm, const char* dev_b) {
  Side peer;
  if (!open_side(dev_b, &peer) || !connect_pair(peer, s)) return false;
  ibv_mr* dm_mr = ibv_reg_dm_mr(s.pd, dm, 512, 256, kRw | IBV_ACCESS_ZERO_BASED);
  std::vector<uint8_t> buf(kPage), before(1000), after(1000);
  ibv_mr* mr = ibv_reg_mr(peer.pd, buf.data(), buf.size(), kRw);
  CHECK(dm_mr && mr, "MRs");
  fill(buf.data(), 256, 91);
  int st = post_wait(peer.qp, peer.cq, IBV_WR_RDMA_WRITE, buf.data(), 256, mr->lkey, 0, dm_mr->rkey);
  CHECK(st == IBV_WC_SUCCESS, "WRITE into the DM MR: %d", st);
  CHECK(ibv_memcpy_from_dm(before.data(), dm, 0, 1000) == 0 && filled(before.data() + 512, 256, 91),
        "the WRITE landed at DM offset 512");
  st = post_wait(peer.qp, peer.cq, IBV_WR_RDMA_READ, buf.data() + 1024, 256, mr->lkey, 0, dm_mr->rkey);
  CHECK(st == IBV_WC_SUCCESS && filled(buf.data() + 1024, 256, 91), "READ of the DM MR: %d", st);
  st = post_wait(peer.qp, peer.cq, IBV_WR_RDMA_WRITE, buf.data(), 100, mr->lkey, 200, dm_mr->rkey);
  CHECK(st == IBV_WC_REM_ACCESS_ERR, "WRITE past the DM MR's end: %d", st);
  CHECK(ibv_memcpy_from_dm(after.data(), dm, 0, 1000) == 0 && after == before, "the DM is unchanged");
  CHECK(ibv_dereg_mr(dm_mr) == 0 && ibv_dereg_mr(mr) == 0, "dereg");
  close_side(peer);
  std::printf("device memory: RDMA WRITE and READ through a DM MR at offset 512; past its end REM_ACCESS_ERR\n");
  return true;
}

bool run_dm(const char* dev, const char* dev_b) {
  Side s;
  if (!open_side(dev, &s)) return false;
  constexpr uint64_t kDm = 1000;  // not a page: the mapping is larger than the DM
  ibv_alloc_dm_attr da{kDm, 0, 0};
  ibv_dm* dm = ibv_alloc_dm(s.ctx, &da);
  CHECK(dm, "ibv_alloc_dm");
  std::vector<uint8_t> src(2 * kPage), dst(2 * kPage, 0xee);
  fill(src.data(), src.size(), 81);
  CHECK(ibv_memcpy_to_dm(dm, 0, src.data(), kDm) == 0, "a copy of the whole DM");
  CHECK(ibv_memcpy_from_dm(dst.data(), dm, 0, kDm) == 0 && std::memcmp(dst.data(), src.data(), kDm) == 0, "read back");
  struct Bad {
    uint64_t off, len;
  } bad[] = {{kDm, 1},       {kDm - 4, 8}, {0, kDm + 1}, {kDm + 4096, 4}, {UINT64_MAX - 3, 8}, {4, UINT64_MAX - 2},
             {1ull << 40, 4}};
  for (const Bad& b : bad) {
    int e = ibv_memcpy_to_dm(dm, b.off, src.data(), size_t(b.len));
    CHECK(e == EFAULT, "ibv_memcpy_to_dm(off %llu, len %llu): %d", (unsigned long long)b.off, (unsigned long long)b.len,
          e);
    e = ibv_memcpy_from_dm(dst.data(), dm, b.off, size_t(b.len));
    CHECK(e == EFAULT, "ibv_memcpy_from_dm(off %llu, len %llu): %d", (unsigned long long)b.off,
          (unsigned long long)b.len, e);
  }
  // Within the DM but not in 4-byte words: EINVAL, as mlx5 (rdma-core's test_dm_bad_access and
  // test_dm_write_bad_flow expect the copy to fail).
  Bad unaligned[] = {{1, 4}, {0, 3}, {4, 6}, {kDm - 5, 4}};
  for (const Bad& b : unaligned) {
    int e = ibv_memcpy_to_dm(dm, b.off, src.data() + 7, size_t(b.len));
    CHECK(e == EINVAL, "unaligned ibv_memcpy_to_dm(off %llu, len %llu): %d", (unsigned long long)b.off,
          (unsigned long long)b.len, e);
    e = ibv_memcpy_from_dm(dst.data(), dm, b.off, size_t(b.len));
    CHECK(e == EINVAL, "unaligned ibv_memcpy_from_dm(off %llu, len %llu): %d", (unsigned long long)b.off,
          (unsigned long long)b.len, e);
  }
  std::fill(dst.begin(), dst.end(), 0);
  CHECK(ibv_memcpy_from_dm(dst.data(), dm, 0, kDm) == 0 && std::memcmp(dst.data(), src.data(), kDm) == 0,
        "the DM is unchanged by the refused copies");
  errno = 0;
  CHECK(!ibv_reg_dm_mr(s.pd, dm, kDm - 4, 8, kRw | IBV_ACCESS_ZERO_BASED) && errno == EINVAL, "a DM MR past the end");
  errno = 0;
  CHECK(!ibv_reg_dm_mr(s.pd, dm, UINT64_MAX - 3, 8, kRw | IBV_ACCESS_ZERO_BASED) && errno == EINVAL,
        "a DM MR that wraps");
  if (!dm_rdma(s, dm, dev_b)) return false;
  CHECK(ibv_free_dm(dm) == 0, "ibv_free_dm");
  close_side(s);
  std::printf("device memory: copies and MRs beyond the DM refused, the DM unchanged\n");
  return true;
}

// --- -p N: device memory from several processes at once ------------------------------------------

// `procs` processes allocate, fill, check and free DM 200 times each, all at once: the even ones
// on the context this process opened before forking them (shared, as a forked child shares a
// uverbs file), the odd ones on a context of their own.
bool run_dm_parallel(const char* dev, int procs) {
  ibv_context* shared = open_dev(dev);
  CHECK(shared, "open %s", dev);
  std::vector<pid_t> kids;
  for (int p = 0; p < procs; ++p) {
    pid_t pid = fork();
    if (pid == 0) {
      ibv_context* ctx = p % 2 ? open_dev(dev) : shared;
      if (!ctx) _exit(3);
      for (int i = 0; i < 200; ++i) {
        ibv_alloc_dm_attr da{uint64_t(kPage * (1 + (i + p) % 4)), 0, 0};
        ibv_dm* dm = ibv_alloc_dm(ctx, &da);
        if (!dm) {
          std::fprintf(stderr, "process %d: ibv_alloc_dm %d failed: %s\n", p, i, std::strerror(errno));
          _exit(4);
        }
        uint32_t word = uint32_t(p * 1000 + i), back = 0;
        if (ibv_memcpy_to_dm(dm, 0, &word, 4) || ibv_memcpy_from_dm(&back, dm, 0, 4) || back != word) _exit(5);
        if (int e = ibv_free_dm(dm)) {
          std::fprintf(stderr, "process %d: ibv_free_dm %d failed: %s\n", p, i, std::strerror(e));
          _exit(6);
        }
      }
      _exit(0);
    }
    CHECK(pid > 0, "fork");
    kids.push_back(pid);
  }
  bool ok = true;
  for (pid_t k : kids) {
    int status = 0;
    waitpid(k, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ok = false;
  }
  CHECK(ok, "every process allocated and freed its device memory");
  CHECK(ibv_close_device(shared) == 0, "close");
  std::printf("device memory: %d processes (half on one shared context) allocated and freed 200 DMs each at once\n",
              procs);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* a = "simnic0";
  const char* b = "simnic1";
  char mode = 0;
  int procs = 0;
  for (int o; (o = getopt(argc, argv, "a:b:zrodp:")) != -1;) {
    if (o == 'a') a = optarg;
    else if (o == 'b') b = optarg;
    else if (o == 'p') mode = 'p', procs = std::atoi(optarg);
    else if (o == 'z' || o == 'r' || o == 'o' || o == 'd') mode = char(o);
    else return 2;
  }
  bool ok = false;
  if (mode == 'z') ok = run_zero(a, b);
  else if (mode == 'r') ok = run_rereg(a, b);
  else if (mode == 'o') ok = run_odp(a, b);
  else if (mode == 'd') ok = run_dm(a, b);
  else if (mode == 'p') ok = run_dm_parallel(a, procs);
  else return 2;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
