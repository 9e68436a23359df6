// simnic-atomic-write-check: IBTA 1.5 RDMA ATOMIC WRITE between two processes, as a plain
// verbs program (linked against the system libibverbs). The server (device -b, the parent)
// registers a buffer with REMOTE_WRITE and one without; the client (device -a, a child) checks
// the device's IB_UVERBS_DEVICE_ATOMIC_WRITE capability, creates its QP with
// IBV_QP_EX_WITH_ATOMIC_WRITE, and per case connects a fresh RC pair and:
//   0. writes 8 bytes with ibv_post_send(IBV_WR_ATOMIC_WRITE) and 8 more with
//      ibv_wr_atomic_write: both complete IBV_WC_ATOMIC_WRITE, the server compares the bytes;
//   1. aims at an address that is not 8-byte aligned: IBV_WC_REM_INV_REQ_ERR;
//   2. uses the rkey of the MR without REMOTE_WRITE: IBV_WC_REM_ACCESS_ERR;
//   3. gives a 4-byte local buffer: IBV_WC_LOC_LEN_ERR;
// and in cases 1-3 the server checks that not a byte changed. Run it with `simnic run -- ...`.
//
//   simnic-atomic-write-check [-a DEV_A] [-b DEV_B]
#include <infiniband/verbs.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "check_util.h"

namespace {

using namespace check;

constexpr size_t kBuf = 4096;
constexpr uint64_t kCapAtomicWrite = 1ull << 40;  // the kernel's IB_UVERBS_DEVICE_ATOMIC_WRITE
constexpr int kCases = 4;
// REMOTE_WRITE is what rxe checks for an ATOMIC WRITE.
constexpr int kAccess = IBV_ACCESS_REMOTE_WRITE;
constexpr uint64_t kV1 = 0x0123456789abcdefull, kV2 = 0xfedcba9876543210ull;
const ibv_wc_status kExpect[kCases] = {IBV_WC_SUCCESS, IBV_WC_REM_INV_REQ_ERR, IBV_WC_REM_ACCESS_ERR,
                                       IBV_WC_LOC_LEN_ERR};
const char* const kCaseNames[kCases] = {"two 8-byte writes", "misaligned target", "MR without REMOTE_WRITE",
                                        "4-byte local buffer"};

struct Msg {
  uint32_t qpn;
  ibv_gid gid;
  uint64_t addr, ro_addr;  // server: its MR and the MR without REMOTE_WRITE
  uint32_t rkey, ro_rkey;
  int32_t status;  // client: the case's completion status
};

ibv_qp* make_qp(ibv_context* ctx, ibv_pd* pd, ibv_cq* cq) {
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_RC;
  a.send_cq = a.recv_cq = cq;
  a.cap = {8, 8, 1, 1, 16};
  a.pd = pd;
  a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  a.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_RDMA_WRITE;
  return ibv_create_qp_ex(ctx, &a);
}

struct Side : DeviceSetup {
  uint8_t* buf = nullptr;
  ibv_mr* mr = nullptr;
  bool open(const char* dev) {
    if (!DeviceSetup::open(dev, 16)) return false;
    buf = static_cast<uint8_t*>(aligned_alloc(64, kBuf));
    CHECK(buf, "buffer");
    std::memset(buf, 0, kBuf);
    mr = ibv_reg_mr(pd, buf, kBuf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    CHECK(mr, "ibv_reg_mr");
    return true;
  }
};

// One case on the client: 0 posts through both APIs, 1-3 one work request that must fail.
bool client_case(int c, ibv_qp* qp, Side& s, const Msg& srv, ibv_wc_status* status) {
  std::memcpy(s.buf, &kV1, 8);
  ibv_sge sge{uint64_t(uintptr_t(s.buf)), c == 3 ? 4u : 8u, s.mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 100 + c;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_ATOMIC_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = c == 1 ? srv.addr + 4 : c == 2 ? srv.ro_addr : srv.addr;
  wr.wr.rdma.rkey = c == 2 ? srv.ro_rkey : srv.rkey;
  CHECK(ibv_post_send(qp, &wr, &bad) == 0, "ibv_post_send(IBV_WR_ATOMIC_WRITE)");
  ibv_wc wc{};
  if (!poll_one(s.cq, &wc)) return false;
  *status = wc.status;
  CHECK(wc.wr_id == uint64_t(100 + c) && wc.opcode == IBV_WC_ATOMIC_WRITE, "wr_id %llu opcode %d",
        (unsigned long long)wc.wr_id, int(wc.opcode));
  if (c != 0 || wc.status != IBV_WC_SUCCESS) return true;
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(qp);
  CHECK(qx, "ibv_qp_to_qp_ex");
  ibv_wr_start(qx);
  qx->wr_id = 200;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_atomic_write(qx, srv.rkey, srv.addr + 8, &kV2);
  CHECK(ibv_wr_complete(qx) == 0, "ibv_wr_complete");
  if (!poll_one(s.cq, &wc)) return false;
  CHECK(wc.wr_id == 200 && wc.opcode == IBV_WC_ATOMIC_WRITE, "ibv_wr_atomic_write completion");
  *status = wc.status;
  return true;
}

bool client(int fd, const char* dev) {
  Side s;
  if (!s.open(dev)) return false;
  ibv_device_attr_ex attr{};
  CHECK(ibv_query_device_ex(s.ctx, nullptr, &attr) == 0, "ibv_query_device_ex");
  CHECK(attr.device_cap_flags_ex & kCapAtomicWrite, "device_cap_flags_ex lacks IB_UVERBS_DEVICE_ATOMIC_WRITE");
  for (int c = 0; c < kCases; ++c) {
    ibv_qp* qp = make_qp(s.ctx, s.pd, s.cq);
    CHECK(qp, "ibv_create_qp_ex with IBV_QP_EX_WITH_ATOMIC_WRITE");
    Msg srv{}, me{};
    CHECK(recv_msg(fd, &srv), "server message");
    me.qpn = qp->qp_num;
    me.gid = s.gid;
    CHECK(send_msg(fd, me), "send qpn");
    CHECK(connect_qp(qp, srv.qpn, srv.gid, kAccess), "connect");
    CHECK(recv_msg(fd, &srv), "server ready");  // its QP is in RTR: the first packet is not lost
    ibv_wc_status st = IBV_WC_GENERAL_ERR;
    if (!client_case(c, qp, s, srv, &st)) return false;
    CHECK(st == kExpect[c], "%s: %s, expected %s", kCaseNames[c], ibv_wc_status_str(st), ibv_wc_status_str(kExpect[c]));
    me.status = st;
    CHECK(send_msg(fd, me), "send status");
    std::printf("client: %s: %s\n", kCaseNames[c], ibv_wc_status_str(st));
    ibv_destroy_qp(qp);
  }
  return true;
}

// The server's memory after case `c`: the two values, or untouched.
bool server_check(int c, const uint8_t* buf, const uint8_t* ro) {
  uint64_t w0, w1, w2;
  std::memcpy(&w0, buf, 8);
  std::memcpy(&w1, buf + 8, 8);
  std::memcpy(&w2, ro, 8);
  if (c == 0) {
    CHECK(w0 == kV1 && w1 == kV2, "words %016llx %016llx", (unsigned long long)w0, (unsigned long long)w1);
    std::printf("server: 16 bytes landed as written, compared\n");
    return true;
  }
  for (size_t i = 16; i < 32; ++i) CHECK(buf[i] == 0, "%s: byte %zu changed", kCaseNames[c], i);
  CHECK(w2 == 0, "%s: the MR without REMOTE_WRITE changed", kCaseNames[c]);
  return true;
}

bool server(int fd, const char* dev) {
  Side s;
  if (!s.open(dev)) return false;
  uint8_t* ro = static_cast<uint8_t*>(aligned_alloc(64, kBuf));
  std::memset(ro, 0, kBuf);
  ibv_mr* ro_mr = ibv_reg_mr(s.pd, ro, kBuf, int(IBV_ACCESS_REMOTE_READ));
  CHECK(ro_mr, "ibv_reg_mr without REMOTE_WRITE");
  for (int c = 0; c < kCases; ++c) {
    if (c > 0) std::memset(s.buf, 0, kBuf);
    ibv_qp* qp = make_qp(s.ctx, s.pd, s.cq);
    CHECK(qp, "server QP");
    // Cases 1-3 aim at addr + 16 on: what they must not change.
    Msg me{qp->qp_num,  s.gid, uint64_t(uintptr_t(s.buf)) + (c ? 16 : 0), uint64_t(uintptr_t(ro)), s.mr->rkey,
           ro_mr->rkey, 0};
    Msg cl{};
    CHECK(send_msg(fd, me) && recv_msg(fd, &cl), "exchange");
    CHECK(connect_qp(qp, cl.qpn, cl.gid, kAccess) && send_msg(fd, me), "connect");
    CHECK(recv_msg(fd, &cl), "client status");
    if (!server_check(c, s.buf, ro)) return false;
    ibv_destroy_qp(qp);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) { return run_pair_on_devices(argc, argv, client, server); }
