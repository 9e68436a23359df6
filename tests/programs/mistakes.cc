// The mistakes students make, one per run, on two RC QPs of one NIC: each must end with the
// error a real NIC gives, and (under `simnic run`) an explanation on stderr. stdout gets one
// line, "done <what the program saw>", and nothing else, so a test can tell the two apart.
// Usage: simnic-mistakes gid-index | post-before-rts | bad-rkey | no-recv | no-recv-forever | wrong-qpn
//        | a refused verb: alloc-pd-full | create-cq-cqe | create-cq-ex-flags | create-srq-wr | create-srq-ex-tm |
//        create-ah-port
//          | query-gid-index | query-gid-ex-index | query-gid-table-small | query-port-2 | alloc-mw-type
//          | create-qp-no-cq | dealloc-pd-busy | destroy-cq-busy (each prints "done <errno name>")
#include <infiniband/verbs.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "check_util.h"

namespace {

struct Setup {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* a = nullptr;  // requester
  ibv_qp* b = nullptr;  // responder
  ibv_mr* mr = nullptr;
  ibv_gid gid{};
  char buf[4096] = {};
};

bool open_all(Setup& s) {
  s.ctx = check::open_dev(nullptr);
  if (!s.ctx) return false;
  s.pd = ibv_alloc_pd(s.ctx);
  s.cq = ibv_create_cq(s.ctx, 16, nullptr, nullptr, 0);
  s.mr = ibv_reg_mr(s.pd, s.buf, sizeof s.buf, int(IBV_ACCESS_LOCAL_WRITE));  // no remote access
  s.a = check::create_qp(s.pd, s.cq, IBV_QPT_RC, 4, 1);
  s.b = check::create_qp(s.pd, s.cq, IBV_QPT_RC, 4, 1);
  return s.pd && s.cq && s.mr && s.a && s.b && ibv_query_gid(s.ctx, 1, 0, &s.gid) == 0;
}

// Both PSNs 0, no hop limit, the responder's QP allowing remote writes (the MR does not).
check::Path path(uint8_t retries, uint8_t sgid_index = 0) {
  // ~1 ms, raised to simnic's 8 ms floor. The endless RNR storm waits longer (~0.5 s): each
  // RNR NAK answers a retransmission, and one answer later than the ACK timeout (a busy
  // machine) costs a transport retry, which only completed work renews (as in rxe).
  const uint8_t timeout = retries == 7 ? 17 : 8;
  return {.access = IBV_ACCESS_REMOTE_WRITE,
          .psn = 0,
          .min_rnr_timer = 1,
          .hop_limit = 0,
          .sgid_index = sgid_index,
          .timeout = timeout,
          .retries = retries};
}

bool connect(Setup& s, uint32_t a_dest, uint8_t retries) {
  return check::connect_qp(s.a, a_dest, s.gid, path(retries)) &&
         check::connect_qp(s.b, s.a->qp_num, s.gid, path(retries));
}

int post(Setup& s, ibv_wr_opcode op, uint32_t rkey = 0) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(s.buf), 64, s.mr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(s.buf + 1024);
  wr.wr.rdma.rkey = rkey;
  return ibv_post_send(s.a, &wr, &bad);
}

// The first completion with status != success on the CQ (both QPs share it), or "timeout".
std::string first_error(Setup& s, int seconds = 10) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  ibv_wc wc{};
  while (std::chrono::steady_clock::now() < end) {
    int n = ibv_poll_cq(s.cq, 1, &wc);
    if (n < 0) return "poll error";
    if (n == 1 && wc.status != IBV_WC_SUCCESS) return ibv_wc_status_str(wc.status);
  }
  return "timeout";
}

// The errno a refused verb left, by name ("done EINVAL"); "accepted" when it was not refused.
std::string refused(bool failed) { return failed ? strerrorname_np(errno) : "accepted"; }

// One verb called wrongly, as a student might; "" for a mode that is not one of these.
std::string refused_verb(Setup& s, const std::string& mode) {
  if (mode == "alloc-pd-full") {  // more PDs than the NIC has (max_pd)
    for (int i = 0; i < 100000; ++i)
      if (!ibv_alloc_pd(s.ctx)) return refused(true);
    return "accepted";
  }
  if (mode == "dealloc-pd-busy") return refused(ibv_dealloc_pd(s.pd) != 0);  // its MR and QPs still use it
  if (mode == "destroy-cq-busy") return refused(ibv_destroy_cq(s.cq) != 0);  // the QPs still use it
  if (mode == "create-cq-cqe")
    return refused(!ibv_create_cq(s.ctx, 1 << 23, nullptr, nullptr, 0));  // past max_cqe (2^22 - 1)
  if (mode == "create-cq-ex-flags") {
    ibv_cq_init_attr_ex attr{};
    attr.cqe = 16;
    attr.wc_flags = IBV_WC_EX_WITH_CVLAN;
    return refused(!ibv_create_cq_ex(s.ctx, &attr));
  }
  if (mode == "create-srq-wr") {
    ibv_srq_init_attr init{};
    init.attr.max_wr = 1u << 20;
    init.attr.max_sge = 1;
    return refused(!ibv_create_srq(s.pd, &init));
  }
  if (mode == "create-srq-ex-tm") {  // a tag-matching SRQ
    ibv_srq_init_attr_ex init{};
    init.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
    init.srq_type = IBV_SRQT_TM;
    init.pd = s.pd;
    init.attr.max_wr = 4;
    init.attr.max_sge = 1;
    return refused(!ibv_create_srq_ex(s.ctx, &init));
  }
  if (mode == "create-ah-port") {
    ibv_ah_attr ah{};
    ah.is_global = 1;
    ah.grh.dgid = s.gid;
    ah.port_num = 2;
    return refused(!ibv_create_ah(s.pd, &ah));
  }
  ibv_gid gid{};
  if (mode == "query-gid-index") return refused(ibv_query_gid(s.ctx, 1, 1, &gid) != 0);
  ibv_gid_entry entry{};
  if (mode == "query-gid-ex-index") return refused(ibv_query_gid_ex(s.ctx, 1, 5, &entry, 0) != 0);
  if (mode == "query-gid-table-small") {
    ssize_t n = ibv_query_gid_table(s.ctx, &entry, 0, 0);
    if (n < 0) errno = int(-n);
    return refused(n < 0);
  }
  ibv_port_attr port{};
  if (mode == "query-port-2") return refused(ibv_query_port(s.ctx, 2, &port) != 0);
  if (mode == "alloc-mw-type") return refused(!ibv_alloc_mw(s.pd, ibv_mw_type(7)));
  if (mode == "create-qp-no-cq") {
    ibv_qp_init_attr init{};
    init.send_cq = s.cq;  // recv_cq forgotten
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = 4;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    return refused(!ibv_create_qp(s.pd, &init));
  }
  return "";
}

std::string run(Setup& s, const std::string& mode) {
  if (std::string r = refused_verb(s, mode); !r.empty()) return r;
  if (mode == "gid-index") {
    if (check::to_init(s.a, path(7))) return "init failed";
    return check::to_rtr(s.a, s.b->qp_num, s.gid, path(7, 1)) == EINVAL ? "EINVAL" : "accepted";
  }
  if (mode == "reg-mr-access") {  // REMOTE_WRITE without LOCAL_WRITE
    ibv_mr* mr = ibv_reg_mr(s.pd, s.buf, 64, int(IBV_ACCESS_REMOTE_WRITE));
    return mr ? "accepted" : errno == EINVAL ? "EINVAL" : "other";
  }
  if (mode == "create-qp-caps") {  // far deeper queues than the device has
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = s.cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = 1u << 20;
    init.cap.max_recv_wr = 4;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    ibv_qp* qp = ibv_create_qp(s.pd, &init);
    return qp ? "accepted" : errno == EINVAL ? "EINVAL" : "other";
  }
  if (mode == "post-before-rts") {
    if (check::to_init(s.a, path(7))) return "init failed";
    return post(s, IBV_WR_SEND) == EINVAL ? "EINVAL" : "accepted";
  }
  if (mode == "bad-rkey") {  // the MR was registered without REMOTE_WRITE
    if (!connect(s, s.b->qp_num, 7) || post(s, IBV_WR_RDMA_WRITE, s.mr->rkey)) return "setup failed";
    std::string first = first_error(s);
    ibv_sge sge{reinterpret_cast<uintptr_t>(s.buf), 64, s.mr->lkey};
    ibv_recv_wr rwr{};
    ibv_recv_wr* bad = nullptr;
    rwr.sg_list = &sge;
    rwr.num_sge = 1;
    ibv_post_recv(s.b, &rwr, &bad);  // the responder is in ERR: flushed, and explained
    return first + " / " + first_error(s);
  }
  if (mode == "no-recv") {
    if (!connect(s, s.b->qp_num, 1) || post(s, IBV_WR_SEND)) return "setup failed";
    return first_error(s);
  }
  if (mode == "no-recv-forever") {  // rnr_retry = 7: the requester retries forever; nothing completes
    if (!connect(s, s.b->qp_num, 7) || post(s, IBV_WR_SEND)) return "setup failed";
    return first_error(s, 3);
  }
  if (mode == "wrong-qpn") {
    if (!connect(s, (s.b->qp_num + 1) & 0xffffff, 1) || post(s, IBV_WR_SEND)) return "setup failed";
    return first_error(s);
  }
  return "unknown mode";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: simnic-mistakes gid-index|post-before-rts|bad-rkey|no-recv|wrong-qpn\n");
    return 2;
  }
  Setup s;
  if (!open_all(s)) {
    std::fprintf(stderr, "no RDMA device found, or setup failed\n");
    return 1;
  }
  std::printf("done %s\n", run(s, argv[1]).c_str());
  return 0;
}
