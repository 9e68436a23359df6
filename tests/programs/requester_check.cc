// simnic-requester-check: the requester's conformance with rxe and rdma-core (issue 28), as a
// plain verbs program (linked against the system libibverbs) on one device:
//   tclass  a UD SEND through an AH with traffic_class 252 lands behind a GRH whose IPv4
//           header has TOS 252, and ibv_init_ah_from_wc gives traffic_class 252 back;
//   ud-ops  RDMA WRITE, READ, compare-and-swap and fetch-and-add posted on a UD QP: the post
//           succeeds and the WR completes with IBV_WC_LOC_QP_OP_ERR (rxe: next_opcode fails in
//           rxe_req.c), and BIND_MW is refused at post time with EINVAL (rxe's provider);
//   uc-ops  READ, compare-and-swap and fetch-and-add posted on a UC QP: the same.
// Prints one line per case and PASS or FAIL. Run it with `simnic run -- ...`.
//
//   simnic-requester-check [-d DEV]
#include <infiniband/verbs.h>
#include <unistd.h>

#include <getopt.h>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "check_util.h"

namespace {

using namespace check;

constexpr uint32_t kQkey = 0x11111111;
constexpr size_t kBuf = 4096;
constexpr uint8_t kTclass = 252;

struct Env : DeviceSetup {
  ibv_mr* mr = nullptr;
  alignas(8) uint8_t buf[kBuf] = {};
};

bool open_env(Env& e, const char* dev) {
  if (!e.open(dev, 64)) return false;
  e.mr =
      ibv_reg_mr(e.pd, e.buf, kBuf,
                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  CHECK(e.mr, "ibv_reg_mr: %s", std::strerror(errno));
  return true;
}

ibv_qp* make_qp(Env& e, ibv_qp_type type) { return create_qp(e.pd, e.cq, type, 8, 1); }

// UC: RESET -> INIT -> RTR -> RTS towards `peer` (UC takes no RC-only attributes).
bool uc_to_rts(ibv_qp* qp, uint32_t peer, const ibv_gid& gid) {
  return connect_qp(qp, peer, gid, Path{.access = IBV_ACCESS_REMOTE_WRITE, .role = Role::kUc});
}

ibv_ah* make_ah(Env& e, uint8_t tclass) {
  ibv_ah_attr a{};
  a.is_global = 1;
  a.port_num = 1;
  a.grh.dgid = e.gid;  // this device: the datagram comes back to it
  a.grh.hop_limit = 64;
  a.grh.traffic_class = tclass;
  return ibv_create_ah(e.pd, &a);
}

bool case_tclass(Env& e) {
  ibv_qp* tx = make_qp(e, IBV_QPT_UD);
  ibv_qp* rx = make_qp(e, IBV_QPT_UD);
  CHECK(tx && rx && ud_to_rts(tx, kQkey) && ud_to_rts(rx, kQkey), "UD QPs");
  ibv_ah* ah = make_ah(e, kTclass);
  CHECK(ah, "ibv_create_ah: %s", std::strerror(errno));
  std::memset(e.buf, 0, kBuf);
  fill(e.buf, 100, 5);
  ibv_sge rsge{reinterpret_cast<uintptr_t>(e.buf + 1024), 40 + 100, e.mr->lkey};
  ibv_recv_wr rwr{};
  rwr.wr_id = 1;
  rwr.sg_list = &rsge;
  rwr.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  CHECK(ibv_post_recv(rx, &rwr, &bad_r) == 0, "ibv_post_recv");
  ibv_sge sge{reinterpret_cast<uintptr_t>(e.buf), 100, e.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 2;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = rx->qp_num;
  wr.wr.ud.remote_qkey = kQkey;
  ibv_send_wr* bad = nullptr;
  CHECK(ibv_post_send(tx, &wr, &bad) == 0, "ibv_post_send(UD SEND)");
  ibv_wc wc[2]{}, got{};
  for (int n = 0; n < 2; ++n) {
    CHECK(poll_one(e.cq, &got), "UD completions");
    wc[got.wr_id == 1 ? 0 : 1] = got;
  }
  CHECK(wc[1].status == IBV_WC_SUCCESS, "UD send: %s", ibv_wc_status_str(wc[1].status));
  CHECK(wc[0].status == IBV_WC_SUCCESS && (wc[0].wc_flags & IBV_WC_GRH), "UD receive: %s",
        ibv_wc_status_str(wc[0].status));
  CHECK(filled(e.buf + 1024 + 40, 100, 5), "received bytes differ");
  const uint8_t* ip = e.buf + 1024 + 20;  // RoCEv2 over IPv4: the IPv4 header in bytes 20..39
  CHECK(ip[0] == 0x45, "GRH area byte 20 is 0x%02x, not an IPv4 header", ip[0]);
  CHECK(ip[1] == kTclass, "the IPv4 TOS in the GRH area is %u, the AH's traffic class was %u", ip[1], kTclass);
  ibv_ah_attr back{};
  CHECK(ibv_init_ah_from_wc(e.ctx, 1, &wc[0], reinterpret_cast<ibv_grh*>(e.buf + 1024), &back) == 0,
        "ibv_init_ah_from_wc");
  CHECK(back.is_global && back.grh.traffic_class == kTclass, "ibv_init_ah_from_wc: traffic_class %u",
        back.grh.traffic_class);
  // The hop limit is the IPv4 TTL the datagram arrived with (64), as rdma-core's
  // set_ah_attr_by_ipv4 takes it.
  CHECK(ip[8] == 64 && back.grh.hop_limit == ip[8], "ibv_init_ah_from_wc: hop_limit %u, the TTL was %u",
        back.grh.hop_limit, ip[8]);
  CHECK(std::memcmp(&back.grh.dgid, &e.gid, sizeof e.gid) == 0, "ibv_init_ah_from_wc: dgid is not the sender's");
  std::printf("tclass: TOS %u in the receiver's GRH, traffic_class %u from ibv_init_ah_from_wc\n", ip[1],
              back.grh.traffic_class);
  ibv_destroy_ah(ah);
  ibv_destroy_qp(tx);
  ibv_destroy_qp(rx);
  return true;
}

// Posts `op` on `qp` (a UD WR needs its AH) and expects the post to succeed and the WR to
// complete with IBV_WC_LOC_QP_OP_ERR, leaving the send queue stopped (SQE; rxe: ERR).
bool posted_then_loc_qp_op_err(Env& e, ibv_qp* qp, ibv_wr_opcode op, ibv_ah* ah, const char* what) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(e.buf + 2048), 8, e.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 100 + uint64_t(op);
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    wr.wr.atomic.remote_addr = reinterpret_cast<uintptr_t>(e.buf + 3072);
    wr.wr.atomic.rkey = e.mr->rkey;
  } else {
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(e.buf + 3072);
    wr.wr.rdma.rkey = e.mr->rkey;
  }
  if (ah) {  // a UD WR is addressed by its AH (wr.wr is a union: this replaces the fields above)
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = qp->qp_num;
    wr.wr.ud.remote_qkey = kQkey;
  }
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp, &wr, &bad);
  CHECK(rc == 0, "%s: ibv_post_send returned %d (%s); rxe takes the post", what, rc, std::strerror(rc));
  ibv_wc wc{};
  CHECK(poll_one(e.cq, &wc), "%s: no completion", what);
  CHECK(wc.wr_id == wr.wr_id && wc.status == IBV_WC_LOC_QP_OP_ERR, "%s: wr_id %llu status %s", what,
        static_cast<unsigned long long>(wc.wr_id), ibv_wc_status_str(wc.status));
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  CHECK(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init) == 0, "ibv_query_qp");
  CHECK(attr.qp_state == IBV_QPS_SQE || attr.qp_state == IBV_QPS_ERR, "%s: QP state %d after the error", what,
        attr.qp_state);
  std::printf("%s: posted, completed with %s\n", what, ibv_wc_status_str(wc.status));
  return true;
}

bool case_ud_ops(Env& e) {
  ibv_ah* ah = make_ah(e, 0);
  CHECK(ah, "ibv_create_ah");
  const struct {
    ibv_wr_opcode op;
    const char* name;
  } ops[] = {{IBV_WR_RDMA_WRITE, "UD RDMA_WRITE"},
             {IBV_WR_RDMA_READ, "UD RDMA_READ"},
             {IBV_WR_ATOMIC_CMP_AND_SWP, "UD ATOMIC_CMP_AND_SWP"},
             {IBV_WR_ATOMIC_FETCH_AND_ADD, "UD ATOMIC_FETCH_AND_ADD"}};
  for (const auto& o : ops) {
    ibv_qp* qp = make_qp(e, IBV_QPT_UD);
    CHECK(qp && ud_to_rts(qp, kQkey), "UD QP");
    if (!posted_then_loc_qp_op_err(e, qp, o.op, ah, o.name)) return false;
    ibv_destroy_qp(qp);
  }
  // A memory window cannot be bound on a UD QP: rxe's provider refuses that post (EINVAL).
  ibv_qp* qp = make_qp(e, IBV_QPT_UD);
  ibv_mw* mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
  CHECK(qp && ud_to_rts(qp, kQkey) && mw, "UD QP and a type 2 window");
  ibv_send_wr wr{};
  wr.wr_id = 9;
  wr.opcode = IBV_WR_BIND_MW;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = {e.mr, reinterpret_cast<uintptr_t>(e.buf), 64, IBV_ACCESS_REMOTE_READ};
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp, &wr, &bad);
  CHECK(rc == EINVAL && bad == &wr, "UD BIND_MW: ibv_post_send returned %d, expected EINVAL", rc);
  std::printf("UD BIND_MW: refused at post time with EINVAL\n");
  ibv_destroy_qp(qp);
  ibv_dealloc_mw(mw);
  ibv_destroy_ah(ah);
  return true;
}

bool case_uc_ops(Env& e) {
  const struct {
    ibv_wr_opcode op;
    const char* name;
  } ops[] = {{IBV_WR_RDMA_READ, "UC RDMA_READ"},
             {IBV_WR_ATOMIC_CMP_AND_SWP, "UC ATOMIC_CMP_AND_SWP"},
             {IBV_WR_ATOMIC_FETCH_AND_ADD, "UC ATOMIC_FETCH_AND_ADD"}};
  for (const auto& o : ops) {
    ibv_qp* a = make_qp(e, IBV_QPT_UC);
    ibv_qp* b = make_qp(e, IBV_QPT_UC);
    CHECK(a && b && uc_to_rts(a, b->qp_num, e.gid) && uc_to_rts(b, a->qp_num, e.gid), "UC QPs");
    if (!posted_then_loc_qp_op_err(e, a, o.op, nullptr, o.name)) return false;
    ibv_destroy_qp(a);
    ibv_destroy_qp(b);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* dev = nullptr;
  for (int c; (c = getopt(argc, argv, "d:")) != -1;) {
    if (c == 'd') dev = optarg;
    else return 2;
  }
  static Env e;
  const bool ok = open_env(e, dev) && case_tclass(e) && case_ud_ops(e) && case_uc_ops(e);
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
