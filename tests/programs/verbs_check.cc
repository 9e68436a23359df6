// simnic-verbs-check: a plain verbs program (linked against the system libibverbs) that
// connects two RC QPs on two devices, moves known data with every RC operation, and checks
// every byte and every completion field. Run it on simnic with `simnic run -- ...`, or
// unchanged on real RoCE NICs.
//
//   simnic-verbs-check [-a DEV0] [-b DEV1] [-s BYTES] [-n ITERS] [-m MTU] [-L]
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <getopt.h>
#include <poll.h>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check_util.h"

namespace {

using check::Path;

int g_passed = 0, g_failed = 0;
// -L: the link loses packets. If the bad-rkey NAK is lost, the responder's QP is already in
// ERR and drops the retries, so the requester ends with RETRY_EXC_ERR instead (IBA 9.9.3).
bool g_lossy = false;

struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  std::vector<uint8_t> buf;  // the MR: [0, size) send/source area, [size, 2*size) receive/target area
  ibv_mr* mr = nullptr;
  uint64_t* atomic_word = nullptr;
  ibv_mr* atomic_mr = nullptr;
  ibv_gid gid{};
};

bool setup(Side& s, const char* dev, size_t size) {
  s.ctx = check::open_dev(dev);
  CHECK(s.ctx, "cannot open device %s", dev ? dev : "(first)");
  s.pd = ibv_alloc_pd(s.ctx);
  CHECK(s.pd, "ibv_alloc_pd: %s", std::strerror(errno));
  s.cq = ibv_create_cq(s.ctx, 256, nullptr, nullptr, 0);
  CHECK(s.cq, "ibv_create_cq: %s", std::strerror(errno));
  s.buf.assign(2 * size, 0);
  s.mr = ibv_reg_mr(s.pd, s.buf.data(), s.buf.size(),
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  CHECK(s.mr, "ibv_reg_mr: %s", std::strerror(errno));
  s.atomic_word = static_cast<uint64_t*>(aligned_alloc(64, 64));
  std::memset(s.atomic_word, 0, 64);
  s.atomic_mr =
      ibv_reg_mr(s.pd, s.atomic_word, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_READ);
  CHECK(s.atomic_mr, "ibv_reg_mr(atomic): %s", std::strerror(errno));
  ibv_qp_init_attr init{};
  init.send_cq = s.cq;
  init.recv_cq = s.cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 64;
  init.cap.max_recv_wr = 64;
  init.cap.max_send_sge = 4;
  init.cap.max_recv_sge = 4;
  s.qp = ibv_create_qp(s.pd, &init);
  CHECK(s.qp, "ibv_create_qp: %s", std::strerror(errno));
  CHECK(ibv_query_gid(s.ctx, 1, 0, &s.gid) == 0, "ibv_query_gid failed");
  return true;
}

bool connect(Side& a, const Side& b, ibv_mtu mtu) {
  const int access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  // Both PSNs close to the 24-bit wrap, on purpose.
  return check::connect_qp(
      a.qp, b.qp->qp_num, b.gid,
      Path{.access = access, .mtu = mtu, .psn = 0xfffff0, .rd_atomic = 4, .min_rnr_timer = 1, .hop_limit = 64});
}

// One completion on `s`'s CQ within 10 s.
bool poll_one(Side& s, ibv_wc* wc) { return check::poll_one(s.cq, wc, std::chrono::seconds(10)); }

void fill(std::vector<uint8_t>& v, size_t off, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    v[off + i] = uint8_t(x >> 16);
  }
}

bool post_recv(Side& s, uint64_t wr_id, size_t off, size_t len) {
  ibv_sge sge{reinterpret_cast<uint64_t>(s.buf.data() + off), uint32_t(len), s.mr->lkey};
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  int rc = ibv_post_recv(s.qp, &wr, &bad);
  CHECK(rc == 0, "ibv_post_recv: %s", std::strerror(rc));
  return true;
}

bool post_send(Side& s, ibv_wr_opcode op, uint64_t wr_id, ibv_sge* sges, int nsge, uint64_t raddr, uint32_t rkey,
               uint32_t imm = 0, uint64_t cmp = 0, uint64_t swp = 0) {
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg_list = sges;
  wr.num_sge = nsge;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    wr.wr.atomic.remote_addr = raddr;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = cmp;
    wr.wr.atomic.swap = swp;
  } else {
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
  }
  int rc = ibv_post_send(s.qp, &wr, &bad);
  CHECK(rc == 0, "ibv_post_send: %s", std::strerror(rc));
  return true;
}

#define RUN(name, expr)                                     \
  do {                                                      \
    bool ok_ = (expr);                                      \
    std::printf("%-44s %s\n", name, ok_ ? "ok" : "FAILED"); \
    std::fflush(stdout);                                    \
    ok_ ? ++g_passed : ++g_failed;                          \
  } while (0)

bool test_send(Side& a, Side& b, size_t size, uint32_t seed, bool imm) {
  fill(a.buf, 0, size, seed);
  std::memset(b.buf.data() + size, 0, size);
  if (!post_recv(b, 100 + seed, size, size)) return false;
  // Two SGEs on the send side: gather from both halves of the first region.
  size_t half = size / 2;
  ibv_sge sges[2] = {{reinterpret_cast<uint64_t>(a.buf.data()), uint32_t(half), a.mr->lkey},
                     {reinterpret_cast<uint64_t>(a.buf.data() + half), uint32_t(size - half), a.mr->lkey}};
  if (!post_send(a, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, 200 + seed, sges, 2, 0, 0, 0xC0DE0000 + seed))
    return false;
  ibv_wc wc;
  if (!poll_one(b, &wc)) return false;
  CHECK(wc.status == IBV_WC_SUCCESS, "receive status %s", ibv_wc_status_str(wc.status));
  CHECK(wc.opcode == IBV_WC_RECV, "receive opcode %d", wc.opcode);
  CHECK(wc.wr_id == 100 + seed, "receive wr_id %" PRIu64, wc.wr_id);
  CHECK(wc.byte_len == size, "byte_len %u, expected %zu", wc.byte_len, size);
  CHECK(wc.qp_num == b.qp->qp_num, "qp_num 0x%x", wc.qp_num);
  CHECK(wc.src_qp == a.qp->qp_num, "src_qp 0x%x, expected 0x%x", wc.src_qp, a.qp->qp_num);
  if (imm) {
    CHECK(wc.wc_flags & IBV_WC_WITH_IMM, "no IBV_WC_WITH_IMM");
    CHECK(ntohl(wc.imm_data) == 0xC0DE0000 + seed, "imm 0x%x", ntohl(wc.imm_data));
  }
  CHECK(std::memcmp(a.buf.data(), b.buf.data() + size, size) == 0, "received bytes differ");
  if (!poll_one(a, &wc)) return false;
  CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND && wc.wr_id == 200 + seed,
        "send completion status %s opcode %d", ibv_wc_status_str(wc.status), wc.opcode);
  return true;
}

bool test_write(Side& a, Side& b, size_t size, uint32_t seed, bool imm) {
  fill(a.buf, 0, size, seed);
  std::memset(b.buf.data() + size, 0, size);
  if (imm && !post_recv(b, 300 + seed, 0, 0)) return false;
  ibv_sge sge{reinterpret_cast<uint64_t>(a.buf.data()), uint32_t(size), a.mr->lkey};
  if (!post_send(a, imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE, 400 + seed, &sge, 1,
                 reinterpret_cast<uint64_t>(b.buf.data() + size), b.mr->rkey, 0xBEEF + seed))
    return false;
  ibv_wc wc;
  if (!poll_one(a, &wc)) return false;
  CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE, "write completion %s",
        ibv_wc_status_str(wc.status));
  if (imm) {
    if (!poll_one(b, &wc)) return false;
    CHECK(wc.status == IBV_WC_SUCCESS, "recv status %s", ibv_wc_status_str(wc.status));
    CHECK(wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM, "opcode %d", wc.opcode);
    CHECK(wc.byte_len == size, "byte_len %u", wc.byte_len);
    CHECK(ntohl(wc.imm_data) == 0xBEEF + seed, "imm");
  }
  // An RC WRITE is complete at the requester only once acknowledged: the data is there.
  CHECK(std::memcmp(a.buf.data(), b.buf.data() + size, size) == 0, "written bytes differ");
  return true;
}

bool test_read(Side& a, Side& b, size_t size, uint32_t seed) {
  fill(b.buf, 0, size, seed);
  std::memset(a.buf.data() + size, 0, size);
  ibv_sge sge{reinterpret_cast<uint64_t>(a.buf.data() + size), uint32_t(size), a.mr->lkey};
  if (!post_send(a, IBV_WR_RDMA_READ, 500 + seed, &sge, 1, reinterpret_cast<uint64_t>(b.buf.data()), b.mr->rkey))
    return false;
  ibv_wc wc;
  if (!poll_one(a, &wc)) return false;
  CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ, "read completion %s opcode %d",
        ibv_wc_status_str(wc.status), wc.opcode);
  CHECK(wc.byte_len == size, "read byte_len %u", wc.byte_len);
  CHECK(std::memcmp(a.buf.data() + size, b.buf.data(), size) == 0, "read bytes differ");
  return true;
}

bool test_atomics(Side& a, Side& b) {
  *b.atomic_word = 40;
  ibv_sge sge{reinterpret_cast<uint64_t>(a.atomic_word), 8, a.atomic_mr->lkey};
  if (!post_send(a, IBV_WR_ATOMIC_FETCH_AND_ADD, 600, &sge, 1, reinterpret_cast<uint64_t>(b.atomic_word),
                 b.atomic_mr->rkey, 0, 2))
    return false;
  ibv_wc wc;
  if (!poll_one(a, &wc)) return false;
  CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_FETCH_ADD, "fetch-add %s", ibv_wc_status_str(wc.status));
  CHECK(*a.atomic_word == 40, "fetch-add returned %" PRIu64, *a.atomic_word);
  CHECK(*b.atomic_word == 42, "target is %" PRIu64 " after fetch-add", *b.atomic_word);
  if (!post_send(a, IBV_WR_ATOMIC_CMP_AND_SWP, 601, &sge, 1, reinterpret_cast<uint64_t>(b.atomic_word),
                 b.atomic_mr->rkey, 0, 42, 7))
    return false;
  if (!poll_one(a, &wc)) return false;
  CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_COMP_SWAP, "cmp-swap %s", ibv_wc_status_str(wc.status));
  CHECK(*a.atomic_word == 42 && *b.atomic_word == 7, "cmp-swap: got %" PRIu64 ", target %" PRIu64, *a.atomic_word,
        *b.atomic_word);
  return true;
}

// Memory windows: a type 1 window (ibv_bind_mw) takes a WRITE, a type 2 window (BIND_MW work
// request) serves a READ and is then invalidated by the peer's SEND_WITH_INV; rebound, it is
// invalidated locally. B's MR for them has no remote rights of its own.
bool test_memory_windows(Side& a, Side& b, size_t size, uint32_t seed) {
  ibv_mr* wmr = ibv_reg_mr(b.pd, b.buf.data(), b.buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  CHECK(wmr, "ibv_reg_mr(MW_BIND): %s", std::strerror(errno));
  ibv_mw* mw1 = ibv_alloc_mw(b.pd, IBV_MW_TYPE_1);
  CHECK(mw1, "ibv_alloc_mw(type 1): %s", std::strerror(errno));
  ibv_mw* mw2 = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
  CHECK(mw2, "ibv_alloc_mw(type 2): %s", std::strerror(errno));
  ibv_wc wc;

  ibv_mw_bind bind1{};
  bind1.wr_id = 800;
  bind1.send_flags = IBV_SEND_SIGNALED;
  bind1.bind_info.mr = wmr;
  bind1.bind_info.addr = reinterpret_cast<uint64_t>(b.buf.data() + size);
  bind1.bind_info.length = size;
  bind1.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
  uint32_t before = mw1->rkey;
  int rc = ibv_bind_mw(b.qp, mw1, &bind1);
  CHECK(rc == 0, "ibv_bind_mw: %s", std::strerror(rc));
  CHECK(mw1->rkey == ibv_inc_rkey(before), "ibv_bind_mw left rkey 0x%x", mw1->rkey);
  if (!poll_one(b, &wc)) return false;
  CHECK(wc.wr_id == 800 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW, "bind completion %s opcode %d",
        ibv_wc_status_str(wc.status), wc.opcode);
  fill(a.buf, 0, size, seed);
  std::memset(b.buf.data() + size, 0, size);
  ibv_sge sge{reinterpret_cast<uint64_t>(a.buf.data()), uint32_t(size), a.mr->lkey};
  if (!post_send(a, IBV_WR_RDMA_WRITE, 801, &sge, 1, reinterpret_cast<uint64_t>(b.buf.data() + size), mw1->rkey))
    return false;
  if (!poll_one(a, &wc)) return false;
  CHECK(wc.status == IBV_WC_SUCCESS, "WRITE through a type 1 window: %s", ibv_wc_status_str(wc.status));
  CHECK(std::memcmp(a.buf.data(), b.buf.data() + size, size) == 0, "bytes written through the window differ");

  auto bind2 = [&](uint64_t wr_id) {
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = mw2;
    wr.bind_mw.rkey = ibv_inc_rkey(mw2->rkey);
    wr.bind_mw.bind_info.mr = wmr;
    wr.bind_mw.bind_info.addr = reinterpret_cast<uint64_t>(b.buf.data());
    wr.bind_mw.bind_info.length = size;
    wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
    int r = ibv_post_send(b.qp, &wr, &bad);
    if (r == 0) mw2->rkey = wr.bind_mw.rkey;  // the application keeps the key it chose
    return r;
  };
  rc = bind2(802);
  CHECK(rc == 0, "ibv_post_send(BIND_MW): %s", std::strerror(rc));
  if (!poll_one(b, &wc)) return false;
  CHECK(wc.wr_id == 802 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW, "type 2 bind completion %s",
        ibv_wc_status_str(wc.status));
  fill(b.buf, 0, size, seed + 1);
  std::memset(a.buf.data() + size, 0, size);
  ibv_sge rsge{reinterpret_cast<uint64_t>(a.buf.data() + size), uint32_t(size), a.mr->lkey};
  if (!post_send(a, IBV_WR_RDMA_READ, 803, &rsge, 1, reinterpret_cast<uint64_t>(b.buf.data()), mw2->rkey)) return false;
  if (!poll_one(a, &wc)) return false;
  CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == size, "READ through a type 2 window: %s",
        ibv_wc_status_str(wc.status));
  CHECK(std::memcmp(a.buf.data() + size, b.buf.data(), size) == 0, "bytes read through the window differ");

  // SEND_WITH_INV: the receive reports which rkey it invalidated.
  if (!post_recv(b, 804, size, 64)) return false;
  ibv_send_wr wr{}, *bad = nullptr;
  ibv_sge ssge{reinterpret_cast<uint64_t>(a.buf.data()), 64, a.mr->lkey};
  wr.wr_id = 805;
  wr.opcode = IBV_WR_SEND_WITH_INV;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &ssge;
  wr.num_sge = 1;
  wr.invalidate_rkey = mw2->rkey;
  rc = ibv_post_send(a.qp, &wr, &bad);
  CHECK(rc == 0, "ibv_post_send(SEND_WITH_INV): %s", std::strerror(rc));
  if (!poll_one(b, &wc)) return false;
  CHECK(wc.wr_id == 804 && wc.status == IBV_WC_SUCCESS, "SEND_WITH_INV receive: %s", ibv_wc_status_str(wc.status));
  CHECK((wc.wc_flags & IBV_WC_WITH_INV) && wc.invalidated_rkey == mw2->rkey,
        "receive flags 0x%x invalidated_rkey 0x%x, expected 0x%x", wc.wc_flags, wc.invalidated_rkey, mw2->rkey);
  if (!poll_one(a, &wc)) return false;
  CHECK(wc.wr_id == 805 && wc.status == IBV_WC_SUCCESS, "SEND_WITH_INV: %s", ibv_wc_status_str(wc.status));

  // The window is free again: bind it anew, then invalidate it locally.
  rc = bind2(806);
  CHECK(rc == 0, "second BIND_MW: %s", std::strerror(rc));
  if (!poll_one(b, &wc)) return false;
  CHECK(wc.wr_id == 806 && wc.status == IBV_WC_SUCCESS, "rebinding a remotely invalidated window: %s",
        ibv_wc_status_str(wc.status));
  ibv_send_wr inv{};
  inv.wr_id = 807;
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = mw2->rkey;
  rc = ibv_post_send(b.qp, &inv, &bad);
  CHECK(rc == 0, "ibv_post_send(LOCAL_INV): %s", std::strerror(rc));
  if (!poll_one(b, &wc)) return false;
  CHECK(wc.wr_id == 807 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_LOCAL_INV, "LOCAL_INV: %s opcode %d",
        ibv_wc_status_str(wc.status), wc.opcode);

  CHECK(ibv_dereg_mr(wmr) != 0, "ibv_dereg_mr succeeded with a type 1 window still bound");
  CHECK(ibv_dealloc_mw(mw1) == 0 && ibv_dealloc_mw(mw2) == 0, "ibv_dealloc_mw failed");
  CHECK(ibv_dereg_mr(wmr) == 0, "ibv_dereg_mr after the windows are gone: %s", std::strerror(errno));
  return true;
}

bool test_bad_rkey(Side& a, Side& b, size_t size) {
  ibv_sge sge{reinterpret_cast<uint64_t>(a.buf.data()), uint32_t(size), a.mr->lkey};
  if (!post_send(a, IBV_WR_RDMA_WRITE, 700, &sge, 1, reinterpret_cast<uint64_t>(b.buf.data()), b.mr->rkey ^ 0x5a5a00))
    return false;
  if (!post_send(a, IBV_WR_RDMA_WRITE, 701, &sge, 1, reinterpret_cast<uint64_t>(b.buf.data()), b.mr->rkey))
    return false;
  ibv_wc wc;
  if (!poll_one(a, &wc)) return false;
  CHECK(wc.wr_id == 700 && (wc.status == IBV_WC_REM_ACCESS_ERR || (g_lossy && wc.status == IBV_WC_RETRY_EXC_ERR)),
        "bad rkey gave %s (wr %" PRIu64 ")", ibv_wc_status_str(wc.status), wc.wr_id);
  if (!poll_one(a, &wc)) return false;
  CHECK(wc.wr_id == 701 && wc.status == IBV_WC_WR_FLUSH_ERR, "next WR gave %s", ibv_wc_status_str(wc.status));
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  CHECK(ibv_query_qp(a.qp, &attr, IBV_QP_STATE, &init) == 0, "ibv_query_qp");
  CHECK(attr.qp_state == IBV_QPS_ERR, "QP state %d after the error, expected ERR", attr.qp_state);
  // The responder's client hears of it too: an R_Key violation that no receive WQE can carry
  // is an affiliated asynchronous error on the responder's QP (IBA 9.9.3.1.3, C9-222.1.1; rxe
  // and ConnectX raise IBV_EVENT_QP_ACCESS_ERR).
  pollfd p{b.ctx->async_fd, POLLIN, 0};
  CHECK(::poll(&p, 1, 5000) == 1, "no async event on the responder's context within 5 s");
  ibv_async_event ev{};
  CHECK(ibv_get_async_event(b.ctx, &ev) == 0, "ibv_get_async_event: %s", std::strerror(errno));
  const ibv_event_type type = ev.event_type;
  const bool ours = ev.element.qp == b.qp;
  ibv_ack_async_event(&ev);
  CHECK(type == IBV_EVENT_QP_ACCESS_ERR, "responder's async event is %s, expected QP access error",
        ibv_event_type_str(type));
  CHECK(ours, "the QP access error names another QP than the responder's");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const char* dev_a = "simnic0";
  const char* dev_b = "simnic1";
  size_t size = 65536;
  int iters = 3;
  int mtu_bytes = 1024;
  int c;
  while ((c = getopt(argc, argv, "a:b:s:n:m:Lh")) != -1) {
    switch (c) {
      case 'a': dev_a = optarg; break;
      case 'b': dev_b = optarg; break;
      case 's': size = std::strtoul(optarg, nullptr, 0); break;
      case 'n': iters = std::atoi(optarg); break;
      case 'm': mtu_bytes = std::atoi(optarg); break;
      case 'L': g_lossy = true; break;
      default:
        std::printf("usage: %s [-a DEV0] [-b DEV1] [-s BYTES (>=2)] [-n ITERS] [-m MTU] [-L (lossy link)]\n", argv[0]);
        return c == 'h' ? 0 : 2;
    }
  }
  if (size < 2) size = 2;
  ibv_mtu mtu = mtu_bytes >= 4096   ? IBV_MTU_4096
                : mtu_bytes >= 2048 ? IBV_MTU_2048
                : mtu_bytes >= 1024 ? IBV_MTU_1024
                : mtu_bytes >= 512  ? IBV_MTU_512
                                    : IBV_MTU_256;
  Side a, b;
  if (!setup(a, dev_a, size) || !setup(b, dev_b, size) || !connect(a, b, mtu) || !connect(b, a, mtu)) {
    std::printf("setup failed\n0 passed, 1 failed\n");
    return 1;
  }
  std::printf("%s QP 0x%x <-> %s QP 0x%x, %zu bytes, MTU %d\n", dev_a, a.qp->qp_num, dev_b, b.qp->qp_num, size,
              mtu_bytes);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    uint32_t seed = uint32_t(i + 1);
    RUN("SEND (2 SGEs) a->b, bytes compared", test_send(a, b, size, seed, false));
    RUN("SEND_WITH_IMM b->a, bytes and imm", test_send(b, a, size, seed + 100, true));
    RUN("RDMA_WRITE a->b, bytes compared", test_write(a, b, size, seed, false));
    RUN("RDMA_WRITE_WITH_IMM b->a", test_write(b, a, size, seed + 200, true));
    RUN("RDMA_READ a<-b, bytes compared", test_read(a, b, size, seed + 300));
  }
  RUN("ATOMIC FETCH_ADD and CMP_SWP", test_atomics(a, b));
  RUN("memory windows: bind, access, invalidate", test_memory_windows(a, b, size, 900));
  RUN("bad rkey -> REM_ACCESS_ERR, then FLUSH; QP_ACCESS_ERR at the responder", test_bad_rkey(a, b, size));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%.3f s\n", s);
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
