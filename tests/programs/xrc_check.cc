// simnic-xrc-check: a plain verbs program (linked against the system libibverbs) that drives
// XRC end to end and checks bytes and completion fields. An XRC INI QP on device A sends to an
// XRC TGT QP on device B; B has two contexts (as two processes would) that open the same file
// with ibv_open_xrcd and so share one XRC domain, each with an XRC SRQ of its own, plus a
// private domain whose SRQ the TGT QP must not reach. Run it with `simnic run -- ...`, or
// unchanged on an RNIC with XRC.
//
//   simnic-xrc-check [-a DEV_A] [-b DEV_B] [-f FILE]      (FILE: the domain's file)
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <getopt.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check_util.h"

namespace {

using namespace check;

constexpr size_t kBuf = 1 << 16;

// One context's PD, registered buffer and CQ.
struct Host {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(kBuf);
  ibv_mr* mr = nullptr;
  bool open(const char* dev) {
    ctx = open_dev(dev);
    if (!ctx) return false;
    pd = ibv_alloc_pd(ctx);
    cq = pd ? ibv_create_cq(ctx, 64, nullptr, nullptr, 0) : nullptr;
    mr =
        cq ? ibv_reg_mr(pd, buf.data(), kBuf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
           : nullptr;
    return mr != nullptr;
  }
};

ibv_srq* xrc_srq(Host& h, ibv_xrcd* xrcd) {
  ibv_srq_init_attr_ex a{};
  a.attr.max_wr = 16;
  a.attr.max_sge = 1;
  a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD;
  a.srq_type = IBV_SRQT_XRC;
  a.xrcd = xrcd;
  a.cq = h.cq;
  a.pd = h.pd;
  return ibv_create_srq_ex(h.ctx, &a);
}

bool post_srq(Host& h, ibv_srq* srq, uint64_t wr_id, size_t off, uint32_t len) {
  ibv_sge sge{uint64_t(uintptr_t(h.buf.data() + off)), len, h.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_srq_recv(srq, &wr, &bad) == 0;
}

struct World {
  Host a, b1, b2;               // b1 and b2: two contexts of device B, as two processes
  ibv_xrcd* shared1 = nullptr;  // b1's and b2's opens of the same file
  ibv_xrcd* shared2 = nullptr;
  ibv_xrcd* priv = nullptr;  // b1's private domain (fd -1)
  ibv_srq *s1 = nullptr, *s2 = nullptr, *s3 = nullptr;
  uint32_t n1 = 0, n2 = 0, n3 = 0;
  ibv_qp* ini = nullptr;  // on A
  ibv_qp* tgt = nullptr;  // on B, in the shared domain
  int fd1 = -1, fd2 = -1;
};

ibv_xrcd* open_xrcd(ibv_context* ctx, int fd) {
  ibv_xrcd_init_attr x{};
  x.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  x.fd = fd;
  x.oflags = O_CREAT;
  return ibv_open_xrcd(ctx, &x);
}

bool setup(World& w, const char* dev_a, const char* dev_b, const char* file) {
  CHECK(w.a.open(dev_a) && w.b1.open(dev_b) && w.b2.open(dev_b), "open the devices and their PDs, CQs, MRs");
  w.fd1 = ::open(file, O_RDONLY | O_CREAT, 0600);
  w.fd2 = ::open(file, O_RDONLY);
  CHECK(w.fd1 >= 0 && w.fd2 >= 0, "open %s", file);
  w.shared1 = open_xrcd(w.b1.ctx, w.fd1);
  w.shared2 = open_xrcd(w.b2.ctx, w.fd2);
  w.priv = open_xrcd(w.b1.ctx, -1);
  CHECK(w.shared1 && w.shared2 && w.priv, "ibv_open_xrcd: errno %d", errno);
  w.s1 = xrc_srq(w.b1, w.shared1);
  w.s2 = xrc_srq(w.b2, w.shared2);
  w.s3 = xrc_srq(w.b1, w.priv);
  CHECK(w.s1 && w.s2 && w.s3, "ibv_create_srq_ex(IBV_SRQT_XRC): errno %d", errno);
  CHECK(ibv_get_srq_num(w.s1, &w.n1) == 0 && ibv_get_srq_num(w.s2, &w.n2) == 0 && ibv_get_srq_num(w.s3, &w.n3) == 0,
        "ibv_get_srq_num");
  CHECK(w.n1 && w.n2 && w.n1 != w.n2 && w.n1 != w.n3 && w.n1 <= 0xffffff, "SRQ numbers %x %x %x", w.n1, w.n2, w.n3);
  ibv_qp_init_attr_ex i{};
  i.qp_type = IBV_QPT_XRC_SEND;
  i.send_cq = w.a.cq;
  i.cap.max_send_wr = 16;
  i.cap.max_send_sge = 1;
  i.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  i.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE;
  i.pd = w.a.pd;
  w.ini = ibv_create_qp_ex(w.a.ctx, &i);
  ibv_qp_init_attr_ex t{};
  t.qp_type = IBV_QPT_XRC_RECV;
  t.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  t.xrcd = w.shared1;
  w.tgt = ibv_create_qp_ex(w.b1.ctx, &t);
  CHECK(w.ini && w.tgt, "ibv_create_qp_ex(XRC_SEND / XRC_RECV): errno %d", errno);
  ibv_gid ga{}, gb{};
  CHECK(ibv_query_gid(w.a.ctx, 1, 0, &ga) == 0 && ibv_query_gid(w.b1.ctx, 1, 0, &gb) == 0, "ibv_query_gid");
  CHECK(connect_qp(w.ini, w.tgt->qp_num, gb, 0, Role::kXrcIni) &&
            connect_qp(w.tgt, w.ini->qp_num, ga, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, Role::kXrcTgt),
        "connect INI <-> TGT");
  return true;
}

void pattern(Host& h, size_t off, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i) h.buf[off + i] = uint8_t(seed + i * 13 + (i >> 9));
}

bool send(World& w, ibv_wr_opcode op, uint32_t srqn, size_t off, uint32_t len, uint64_t wr_id, uint32_t imm = 0,
          uint64_t raddr = 0, uint32_t rkey = 0) {
  ibv_sge sge{uint64_t(uintptr_t(w.a.buf.data() + off)), len, w.a.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  wr.qp_type.xrc.remote_srqn = srqn;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(w.ini, &wr, &bad) == 0;
}

// The receive completion an XRC SRQ's CQ reports: the TGT QP it came through and the INI QP.
bool check_recv(World& w, Host& h, uint64_t wr_id, uint32_t len, const char* what) {
  ibv_wc wc{};
  CHECK(poll_one(h.cq, &wc), "%s: no receive completion", what);
  CHECK(wc.status == IBV_WC_SUCCESS, "%s: status %s", what, ibv_wc_status_str(wc.status));
  CHECK(wc.wr_id == wr_id && wc.byte_len == len, "%s: wr_id %llu byte_len %u", what, (unsigned long long)wc.wr_id,
        wc.byte_len);
  CHECK(wc.qp_num == w.tgt->qp_num, "%s: wc.qp_num %x, the TGT QP is %x", what, wc.qp_num, w.tgt->qp_num);
  CHECK(wc.src_qp == w.ini->qp_num, "%s: wc.src_qp %x, the INI QP is %x", what, wc.src_qp, w.ini->qp_num);
  ibv_wc sent{};
  CHECK(poll_one(w.a.cq, &sent) && sent.status == IBV_WC_SUCCESS && sent.qp_num == w.ini->qp_num,
        "%s: the send's completion", what);
  return true;
}

bool send_to_own_srq(World& w) {
  pattern(w.a, 0, 3000, 1);
  CHECK(post_srq(w.b1, w.s1, 11, 0, 4096) && post_srq(w.b2, w.s2, 21, 0, 4096), "post SRQ receives");
  CHECK(send(w, IBV_WR_SEND, w.n1, 0, 3000, 1), "ibv_post_send");
  if (!check_recv(w, w.b1, 11, 3000, "SEND to SRQ 1")) return false;
  CHECK(std::memcmp(w.a.buf.data(), w.b1.buf.data(), 3000) == 0, "SRQ 1's buffer holds other bytes");
  return true;
}

// The TGT QP of context b1 delivers into context b2's SRQ: they share the file's domain.
bool send_to_shared_srq(World& w) {
  pattern(w.a, 4096, 700, 2);
  CHECK(send(w, IBV_WR_SEND_WITH_IMM, w.n2, 4096, 700, 2, 0x1234), "ibv_post_send");
  ibv_wc wc{};
  if (!check_recv(w, w.b2, 21, 700, "SEND to SRQ 2 (the other context's)")) return false;
  CHECK(std::memcmp(w.a.buf.data() + 4096, w.b2.buf.data(), 700) == 0, "SRQ 2's buffer holds other bytes");
  (void)wc;
  return true;
}

bool wr_api_send(World& w) {
  pattern(w.a, 8192, 100, 3);
  CHECK(post_srq(w.b1, w.s1, 12, 8192, 4096), "post SRQ receive");
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(w.ini);
  CHECK(qx, "ibv_qp_to_qp_ex");
  ibv_wr_start(qx);
  qx->wr_id = 3;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qx);
  ibv_wr_set_xrc_srqn(qx, w.n1);
  ibv_wr_set_sge(qx, w.a.mr->lkey, uint64_t(uintptr_t(w.a.buf.data() + 8192)), 100);
  CHECK(ibv_wr_complete(qx) == 0, "ibv_wr_complete");
  if (!check_recv(w, w.b1, 12, 100, "ibv_wr_send + ibv_wr_set_xrc_srqn")) return false;
  CHECK(std::memcmp(w.a.buf.data() + 8192, w.b1.buf.data() + 8192, 100) == 0, "bytes of the wr_* SEND");
  return true;
}

bool rdma_write(World& w) {
  pattern(w.a, 12288, 2500, 4);
  uint64_t raddr = uint64_t(uintptr_t(w.b1.buf.data() + 20000));
  CHECK(send(w, IBV_WR_RDMA_WRITE, w.n1, 12288, 2500, 4, 0, raddr, w.b1.mr->rkey), "ibv_post_send");
  ibv_wc wc{};
  CHECK(poll_one(w.a.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE, "WRITE completion");
  CHECK(std::memcmp(w.a.buf.data() + 12288, w.b1.buf.data() + 20000, 2500) == 0, "WRITE bytes");
  return true;
}

// Another context opens the TGT QP (ibv_open_qp, through its open of the same file), and the
// creator destroys its handle: the QP lives on for the opener, and keeps delivering.
bool open_qp_outlives_its_creator(World& w) {
  ibv_qp_open_attr o{};
  o.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  o.qp_num = w.tgt->qp_num;
  o.xrcd = w.shared2;
  o.qp_type = IBV_QPT_XRC_RECV;
  ibv_qp* opened = ibv_open_qp(w.b2.ctx, &o);
  CHECK(opened && opened->qp_num == w.tgt->qp_num, "ibv_open_qp: errno %d", errno);
  o.xrcd = w.priv;  // b1's private domain does not hold this QP
  CHECK(!ibv_open_qp(w.b1.ctx, &o) && errno == EINVAL, "ibv_open_qp through another domain must fail with EINVAL");
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  CHECK(ibv_query_qp(opened, &attr, IBV_QP_STATE, &init) == 0 && attr.qp_state == IBV_QPS_RTS, "ibv_query_qp");
  CHECK(ibv_destroy_qp(w.tgt) == 0, "the creator's ibv_destroy_qp");
  w.tgt = opened;
  pattern(w.a, 16384, 500, 5);
  CHECK(post_srq(w.b2, w.s2, 22, 8192, 4096), "post SRQ receive");
  CHECK(send(w, IBV_WR_SEND, w.n2, 16384, 500, 6), "ibv_post_send");
  if (!check_recv(w, w.b2, 22, 500, "SEND through the opened TGT QP")) return false;
  CHECK(std::memcmp(w.a.buf.data() + 16384, w.b2.buf.data() + 8192, 500) == 0, "bytes through the opened QP");
  return true;
}

// An SRQ of another domain: NAK invalid request, the send completes with REM_INV_REQ_ERR.
bool foreign_srq_is_refused(World& w) {
  CHECK(post_srq(w.b1, w.s3, 31, 30000, 4096), "post SRQ receive");
  CHECK(send(w, IBV_WR_SEND, w.n3, 0, 10, 5), "ibv_post_send");
  ibv_wc wc{};
  CHECK(poll_one(w.a.cq, &wc), "no completion");
  CHECK(wc.status == IBV_WC_REM_INV_REQ_ERR, "status %s, expected remote invalid request",
        ibv_wc_status_str(wc.status));
  CHECK(ibv_poll_cq(w.b1.cq, 1, &wc) == 0, "the foreign SRQ's WQE was consumed");
  return true;
}

bool teardown(World& w) {
  CHECK(ibv_destroy_qp(w.ini) == 0 && ibv_destroy_qp(w.tgt) == 0, "ibv_destroy_qp");
  CHECK(ibv_destroy_srq(w.s1) == 0 && ibv_destroy_srq(w.s2) == 0 && ibv_destroy_srq(w.s3) == 0, "ibv_destroy_srq");
  CHECK(ibv_close_xrcd(w.shared1) == 0 && ibv_close_xrcd(w.shared2) == 0 && ibv_close_xrcd(w.priv) == 0,
        "ibv_close_xrcd");
  ::close(w.fd1);
  ::close(w.fd2);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const char* dev_a = nullptr;
  const char* dev_b = nullptr;
  std::string file = "/tmp/simnic-xrc-check-" + std::to_string(::getpid());
  for (int c; (c = getopt(argc, argv, "a:b:f:")) != -1;) {
    if (c == 'a') dev_a = optarg;
    else if (c == 'b') dev_b = optarg;
    else if (c == 'f') file = optarg;
    else {
      std::fprintf(stderr, "usage: %s [-a DEV_A] [-b DEV_B] [-f FILE]\n", argv[0]);
      return 2;
    }
  }
  World w;
  if (!setup(w, dev_a, dev_b ? dev_b : dev_a, file.c_str())) return 1;
  struct {
    const char* name;
    bool (*fn)(World&);
  } steps[] = {{"send to an SRQ of the TGT QP's domain", send_to_own_srq},
               {"send to another context's SRQ in the shared domain", send_to_shared_srq},
               {"ibv_wr_send with ibv_wr_set_xrc_srqn", wr_api_send},
               {"RDMA WRITE through the TGT QP", rdma_write},
               {"ibv_open_qp: the TGT QP outlives its creator's handle", open_qp_outlives_its_creator},
               {"an SRQ of another domain is refused", foreign_srq_is_refused},
               {"teardown", teardown}};
  int passed = 0, failed = 0;
  for (auto& s : steps) {
    bool ok = s.fn(w);
    std::printf("%s %s\n", ok ? "PASS" : "FAIL", s.name);
    ok ? ++passed : ++failed;
    if (!ok) break;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  ::unlink(file.c_str());
  return failed ? 1 : 0;
}
