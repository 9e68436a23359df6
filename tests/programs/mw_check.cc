// simnic-mw-check: memory windows between two processes as a conformance suite walks them, as
// a plain verbs program (linked against the system libibverbs). The server (device -b, the
// parent) owns a buffer registered with LOCAL_WRITE | MW_BIND only, so every remote access goes
// through a window; the client (device -a, a child) reads and writes through the windows' rkeys.
// Four RC QP pairs (1 to 4). In order:
//   1. ibv_post_send(BIND_MW) of a type 2 window through QP 1 with bind_mw.rkey = 0x12, a small
//      fresh value: only its key byte is taken (rxe), the window's rkey is its index | 0x12;
//      the client WRITEs 4 KiB through it and READs them back, both sides compare the bytes;
//   2. LOCAL_INV of that rkey, then ibv_wr_bind_mw through QP 2 with REMOTE_WRITE only: the
//      client WRITEs through QP 2 (compared), and through QP 1 gets IBV_WC_REM_ACCESS_ERR (a
//      type 2 window serves only the QP that bound it);
//   3. SEND_WITH_INV from the client on QP 2: the server's receive reports the rkey;
//   4. ibv_dereg_mr of an MR with a bound type 1 window: EINVAL (rxe), then 0 once unbound;
//   5. post-time: BIND_MW with a scatter/gather entry is EINVAL (rxe's validate_send_wr);
//   6. LOCAL_INV of the now free window on QP 3: IBV_WC_LOC_QP_OP_ERR (rxe);
//   7. BIND_MW of a type 2 window of another PD through QP 2: ibv_post_send returns 0 and the
//      bind completes with IBV_WC_MW_BIND_ERR (IBA C10-72, as rxe), no post-time EPERM;
//   8. BIND_MW through QP 4 naming the window by a stale ibv_mw.rkey: IBV_WC_MW_BIND_ERR (rxe).
// Run it with `simnic run -- simnic-mw-check`.
//
//   simnic-mw-check [-a DEV_A] [-b DEV_B]
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "check_util.h"

namespace {

using namespace check;

constexpr size_t kBuf = 64 * 1024;
constexpr uint32_t kLen = 4096;
constexpr int kPairs = 4;
constexpr int kQpAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

struct Msg {
  uint32_t qpn[kPairs];
  ibv_gid gid;
  uint64_t addr;   // server: where the window starts
  uint32_t rkey;   // server: the window's rkey
  int32_t status;  // client: the status of the step's last completion
};

struct Side : DeviceSetup {
  uint8_t* buf = nullptr;
  ibv_mr* mr = nullptr;
  ibv_qp* qp[kPairs] = {};
  bool open(const char* dev, int mr_access) {
    if (!DeviceSetup::open(dev, 64)) return false;
    buf = static_cast<uint8_t*>(aligned_alloc(4096, kBuf));
    CHECK(buf, "buffer");
    std::memset(buf, 0, kBuf);
    mr = ibv_reg_mr(pd, buf, kBuf, mr_access);
    CHECK(mr, "ibv_reg_mr: %s", std::strerror(errno));
    for (auto& q : qp) {
      ibv_qp_init_attr_ex a{};
      a.qp_type = IBV_QPT_RC;
      a.send_cq = a.recv_cq = cq;
      a.cap = {16, 16, 1, 1, 0};
      a.pd = pd;
      a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
      a.send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND |
                         IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ;
      q = ibv_create_qp_ex(ctx, &a);
      CHECK(q, "ibv_create_qp_ex: %s", std::strerror(errno));
    }
    return ibv_query_gid(ctx, 1, 0, &gid) == 0;
  }
  Msg hello() const {
    Msg m{};
    for (int i = 0; i < kPairs; ++i) m.qpn[i] = qp[i]->qp_num;
    m.gid = gid;
    return m;
  }
  bool connect(const Msg& peer) {
    for (int i = 0; i < kPairs; ++i) CHECK(connect_qp(qp[i], peer.qpn[i], peer.gid, kQpAccess), "connect QP %d", i + 1);
    return true;
  }
};

// One signaled work request with at most one SGE; 0 or ibv_post_send's errno.
int post(ibv_qp* qp, ibv_send_wr wr, ibv_sge* sge) {
  ibv_send_wr* bad = nullptr;
  wr.send_flags |= IBV_SEND_SIGNALED;
  wr.sg_list = sge;
  wr.num_sge = sge ? 1 : 0;
  return ibv_post_send(qp, &wr, &bad);
}

// The next completion must be `wr_id` with `opcode` and `status`.
bool expect_wc(ibv_cq* cq, uint64_t wr_id, ibv_wc_opcode opcode, ibv_wc_status status, ibv_wc* out = nullptr) {
  ibv_wc wc{};
  if (!poll_one(cq, &wc)) return false;
  CHECK(wc.wr_id == wr_id && wc.status == status && (status != IBV_WC_SUCCESS || wc.opcode == opcode),
        "wr_id %llu: %s opcode %d, expected wr_id %llu: %s opcode %d", (unsigned long long)wc.wr_id,
        ibv_wc_status_str(wc.status), int(wc.opcode), (unsigned long long)wr_id, ibv_wc_status_str(status),
        int(opcode));
  if (out) *out = wc;
  return true;
}

// ---- client ----

// An RDMA WRITE or READ of kLen bytes at buf + off through (raddr, rkey); the completion status.
bool rdma(Side& s, int pair, ibv_wr_opcode op, size_t off, uint64_t raddr, uint32_t rkey, ibv_wc_status* st) {
  ibv_sge sge{uint64_t(uintptr_t(s.buf + off)), kLen, s.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 100 + uint64_t(op);
  wr.opcode = op;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  CHECK(post(s.qp[pair], wr, &sge) == 0, "ibv_post_send");
  ibv_wc wc{};
  if (!poll_one(s.cq, &wc)) return false;
  *st = wc.status;
  return true;
}

bool client(int fd, const char* dev) {
  Side s;
  if (!s.open(dev, IBV_ACCESS_LOCAL_WRITE)) return false;
  Msg srv{}, me = s.hello();
  CHECK(recv_msg(fd, &srv) && send_msg(fd, me), "exchange");
  CHECK(s.connect(srv) && recv_msg(fd, &srv), "connect");  // the server's QPs are in RTS too
  // 1. WRITE then READ through the first window (QP 1).
  CHECK(recv_msg(fd, &srv), "first window");
  fill(s.buf, kLen, 1);
  ibv_wc_status st = IBV_WC_GENERAL_ERR;
  if (!rdma(s, 0, IBV_WR_RDMA_WRITE, 0, srv.addr, srv.rkey, &st)) return false;
  CHECK(st == IBV_WC_SUCCESS, "WRITE through rkey 0x%x: %s", srv.rkey, ibv_wc_status_str(st));
  if (!rdma(s, 0, IBV_WR_RDMA_READ, 8192, srv.addr, srv.rkey, &st)) return false;
  CHECK(st == IBV_WC_SUCCESS, "READ through rkey 0x%x: %s", srv.rkey, ibv_wc_status_str(st));
  CHECK(filled(s.buf + 8192, kLen, 1), "the READ brought other bytes back");
  std::printf("client: WRITE and READ of %u bytes through the window, compared\n", kLen);
  CHECK(send_msg(fd, me), "step 1 done");
  // 2. The window rebound through QP 2: QP 2 writes, QP 1 is refused.
  CHECK(recv_msg(fd, &srv), "second window");
  fill(s.buf, kLen, 2);
  if (!rdma(s, 1, IBV_WR_RDMA_WRITE, 0, srv.addr, srv.rkey, &st)) return false;
  CHECK(st == IBV_WC_SUCCESS, "WRITE through QP 2: %s", ibv_wc_status_str(st));
  if (!rdma(s, 0, IBV_WR_RDMA_WRITE, 0, srv.addr, srv.rkey, &st)) return false;
  CHECK(st == IBV_WC_REM_ACCESS_ERR, "WRITE through QP 1: %s, expected remote access error", ibv_wc_status_str(st));
  std::printf("client: rebound window: QP 2 wrote, QP 1: %s\n", ibv_wc_status_str(st));
  CHECK(send_msg(fd, me), "step 2 done");
  // 3. SEND_WITH_INV of the window's rkey on QP 2.
  CHECK(recv_msg(fd, &srv), "receive posted");
  ibv_sge sge{uint64_t(uintptr_t(s.buf)), 100, s.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 300;
  wr.opcode = IBV_WR_SEND_WITH_INV;
  wr.invalidate_rkey = srv.rkey;
  CHECK(post(s.qp[1], wr, &sge) == 0, "ibv_post_send(SEND_WITH_INV)");
  if (!expect_wc(s.cq, 300, IBV_WC_SEND, IBV_WC_SUCCESS)) return false;
  CHECK(send_msg(fd, me), "step 3 done");
  CHECK(recv_msg(fd, &srv), "server finished");
  return true;
}

// ---- server ----

// BIND_MW of `mw` over [addr, +kLen) of `mr` through `qp` with ibv_post_send; its errno.
int post_bind(ibv_qp* qp, ibv_mw* mw, ibv_mr* mr, uint64_t addr, uint32_t rkey, unsigned access, uint64_t wr_id) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = rkey;
  wr.bind_mw.bind_info = {mr, addr, kLen, access};
  return post(qp, wr, nullptr);
}

int post_local_inv(ibv_qp* qp, uint32_t rkey, uint64_t wr_id) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_LOCAL_INV;
  wr.invalidate_rkey = rkey;
  return post(qp, wr, nullptr);
}

// Step 1: a type 2 bind with a small fresh rkey takes only its key byte.
bool bind_with_fresh_key(Side& s, ibv_mw* mw, int fd) {
  const uint64_t addr = uint64_t(uintptr_t(s.buf));
  const uint32_t want = (mw->rkey & ~0xffu) | 0x12;
  CHECK(post_bind(s.qp[0], mw, s.mr, addr, 0x12,
                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, 10) == 0,
        "ibv_post_send(BIND_MW)");
  if (!expect_wc(s.cq, 10, IBV_WC_BIND_MW, IBV_WC_SUCCESS)) return false;
  mw->rkey = want;  // the application keeps the key it gave (rdma-core leaves ibv_mw.rkey alone)
  std::printf("server: type 2 bind with rkey 0x12: the window's rkey is its index | 0x12\n");
  Msg m{};
  m.addr = addr;
  m.rkey = mw->rkey;
  CHECK(send_msg(fd, m) && recv_msg(fd, &m), "step 1");
  CHECK(filled(s.buf, kLen, 1), "the client's WRITE did not land as written");
  std::printf("server: %u bytes landed through the window, compared\n", kLen);
  return true;
}

// Step 2: LOCAL_INV, then ibv_wr_bind_mw through QP 2 with REMOTE_WRITE only.
bool rebind_through_qp2(Side& s, ibv_mw* mw, int fd) {
  CHECK(post_local_inv(s.qp[0], mw->rkey, 20) == 0, "ibv_post_send(LOCAL_INV)");
  if (!expect_wc(s.cq, 20, IBV_WC_LOCAL_INV, IBV_WC_SUCCESS)) return false;
  const uint64_t addr = uint64_t(uintptr_t(s.buf)) + 16384;
  const uint32_t rkey = ibv_inc_rkey(mw->rkey);
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(s.qp[1]);
  CHECK(qx, "ibv_qp_to_qp_ex");
  ibv_wr_start(qx);
  qx->wr_id = 21;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_mw_bind_info info{s.mr, addr, kLen, IBV_ACCESS_REMOTE_WRITE};
  ibv_wr_bind_mw(qx, mw, rkey, &info);
  CHECK(ibv_wr_complete(qx) == 0, "ibv_wr_complete(bind_mw)");
  if (!expect_wc(s.cq, 21, IBV_WC_BIND_MW, IBV_WC_SUCCESS)) return false;
  mw->rkey = rkey;
  Msg m{};
  m.addr = addr;
  m.rkey = rkey;
  CHECK(send_msg(fd, m) && recv_msg(fd, &m), "step 2");
  CHECK(filled(s.buf + 16384, kLen, 2), "QP 2's WRITE did not land as written");
  std::printf("server: LOCAL_INV, rebound through QP 2 with ibv_wr_bind_mw; its WRITE compared\n");
  return true;
}

// Step 3: the peer's SEND_WITH_INV frees the window and the receive reports its rkey.
bool remote_invalidate(Side& s, ibv_mw* mw, int fd) {
  ibv_sge sge{uint64_t(uintptr_t(s.buf)) + 32768, 256, s.mr->lkey};
  ibv_recv_wr rwr{}, *bad = nullptr;
  rwr.wr_id = 30;
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  CHECK(ibv_post_recv(s.qp[1], &rwr, &bad) == 0, "ibv_post_recv");
  Msg m{};
  m.rkey = mw->rkey;
  CHECK(send_msg(fd, m) && recv_msg(fd, &m), "step 3");
  ibv_wc wc{};
  if (!expect_wc(s.cq, 30, IBV_WC_RECV, IBV_WC_SUCCESS, &wc)) return false;
  CHECK((wc.wc_flags & IBV_WC_WITH_INV) && wc.invalidated_rkey == mw->rkey,
        "receive flags 0x%x invalidated_rkey 0x%x, expected 0x%x", wc.wc_flags, wc.invalidated_rkey, mw->rkey);
  std::printf("server: SEND_WITH_INV invalidated the window, the receive reports its rkey\n");
  return true;
}

// Step 4: an MR with a bound type 1 window stays registered: EINVAL, as rxe_dereg_mr.
bool dereg_with_bound_window(Side& s) {
  uint8_t* b2 = static_cast<uint8_t*>(aligned_alloc(4096, kLen));
  ibv_mr* mr = ibv_reg_mr(s.pd, b2, kLen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  ibv_mw* mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
  CHECK(b2 && mr && mw, "type 1 window and its MR: %s", std::strerror(errno));
  ibv_mw_bind bind{};
  bind.wr_id = 40;
  bind.send_flags = IBV_SEND_SIGNALED;
  bind.bind_info = {mr, uint64_t(uintptr_t(b2)), kLen, IBV_ACCESS_REMOTE_READ};
  CHECK(ibv_bind_mw(s.qp[1], mw, &bind) == 0, "ibv_bind_mw");
  if (!expect_wc(s.cq, 40, IBV_WC_BIND_MW, IBV_WC_SUCCESS)) return false;
  int rc = ibv_dereg_mr(mr);
  CHECK(rc == EINVAL, "ibv_dereg_mr of an MR with a bound window: %d (%s), expected EINVAL", rc, std::strerror(rc));
  std::printf("server: ibv_dereg_mr with a bound type 1 window: %s\n", std::strerror(rc));
  bind.wr_id = 41;
  bind.bind_info = {nullptr, 0, 0, 0};  // unbind
  CHECK(ibv_bind_mw(s.qp[1], mw, &bind) == 0, "ibv_bind_mw (unbind)");
  if (!expect_wc(s.cq, 41, IBV_WC_BIND_MW, IBV_WC_SUCCESS)) return false;
  CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr once unbound");
  CHECK(ibv_dealloc_mw(mw) == 0, "ibv_dealloc_mw");
  std::free(b2);
  return true;
}

// Steps 5-8: the errors, in the order that keeps a usable QP for each.
bool bind_errors(Side& s, ibv_mw* mw) {
  ibv_sge sge{uint64_t(uintptr_t(s.buf)), 8, s.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 50;
  wr.opcode = IBV_WR_BIND_MW;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = {s.mr, uint64_t(uintptr_t(s.buf)), kLen, IBV_ACCESS_REMOTE_READ};
  int rc = post(s.qp[1], wr, &sge);
  CHECK(rc == EINVAL, "BIND_MW with num_sge 1: %d, expected EINVAL", rc);
  std::printf("server: BIND_MW with a scatter/gather entry: %s at post time\n", std::strerror(rc));
  CHECK(post_local_inv(s.qp[2], mw->rkey, 60) == 0, "ibv_post_send(LOCAL_INV)");
  if (!expect_wc(s.cq, 60, IBV_WC_LOCAL_INV, IBV_WC_LOC_QP_OP_ERR)) return false;
  std::printf("server: LOCAL_INV of a free window: %s\n", ibv_wc_status_str(IBV_WC_LOC_QP_OP_ERR));
  ibv_pd* pd2 = ibv_alloc_pd(s.ctx);
  ibv_mw* other = pd2 ? ibv_alloc_mw(pd2, IBV_MW_TYPE_2) : nullptr;
  CHECK(other, "a window of another PD: %s", std::strerror(errno));
  rc = post_bind(s.qp[1], other, s.mr, uint64_t(uintptr_t(s.buf)), ibv_inc_rkey(other->rkey), IBV_ACCESS_REMOTE_READ,
                 70);
  CHECK(rc == 0, "ibv_post_send(BIND_MW of another PD's window): %d (%s), expected 0", rc, std::strerror(rc));
  if (!expect_wc(s.cq, 70, IBV_WC_BIND_MW, IBV_WC_MW_BIND_ERR)) return false;
  std::printf("server: type 2 bind of another PD's window: %s\n", ibv_wc_status_str(IBV_WC_MW_BIND_ERR));
  CHECK(ibv_dealloc_mw(other) == 0, "ibv_dealloc_mw");
  const uint32_t current = mw->rkey;
  mw->rkey = current - 1;  // a program that kept an older rkey of the window
  rc = post_bind(s.qp[3], mw, s.mr, uint64_t(uintptr_t(s.buf)), ibv_inc_rkey(current), IBV_ACCESS_REMOTE_READ, 80);
  mw->rkey = current;
  CHECK(rc == 0, "ibv_post_send(BIND_MW with a stale ibv_mw.rkey): %d", rc);
  if (!expect_wc(s.cq, 80, IBV_WC_BIND_MW, IBV_WC_MW_BIND_ERR)) return false;
  std::printf("server: bind naming the window by a stale rkey: %s\n", ibv_wc_status_str(IBV_WC_MW_BIND_ERR));
  return true;
}

bool server(int fd, const char* dev) {
  Side s;
  if (!s.open(dev, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)) return false;
  ibv_mw* mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
  CHECK(mw, "ibv_alloc_mw(type 2): %s", std::strerror(errno));
  Msg me = s.hello(), cl{};
  CHECK(send_msg(fd, me) && recv_msg(fd, &cl), "exchange");
  CHECK(s.connect(cl) && send_msg(fd, me), "connect");
  if (!bind_with_fresh_key(s, mw, fd) || !rebind_through_qp2(s, mw, fd) || !remote_invalidate(s, mw, fd)) return false;
  if (!dereg_with_bound_window(s) || !bind_errors(s, mw)) return false;
  CHECK(send_msg(fd, me), "finished");
  CHECK(ibv_dealloc_mw(mw) == 0, "ibv_dealloc_mw");
  return true;
}

}  // namespace

int main(int argc, char** argv) { return run_pair_on_devices(argc, argv, client, server); }
