// simnic-resize-cq-check: ibv_resize_cq as rdma-core and rxe define it, through a plain verbs
// program (linked against the system libibverbs; runs on simnic with `simnic run`, or on a
// real NIC). Two RC QPs on one device: A SENDs to B; B's receive CQ is the one resized.
//
//   1. 40 receive completions wait; 10 are polled. Resizing below the 30 still waiting, to 0,
//      or past max_cqe is EINVAL and leaves cq->cqe alone; resizing to exactly 30 works, reports
//      cq->cqe >= 30, and the 30 arrive in order.
//   2. 400 SENDs flow while a second thread polls B's CQ and the main thread resizes it up and
//      down after every batch: every completion arrives once, in order, with its wr_id.
//
//   simnic-resize-cq-check [-d DEV]       prints "PASS" and exits 0, or "FAIL ..." and 1
#include <infiniband/verbs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "check_util.h"

namespace {

using check::open_dev;

constexpr int kRecvDepth = 256;
constexpr uint64_t kRecvBase = 1'000'000;  // B's receive wr_ids count up from here

struct Nic {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(1 << 16);
  ibv_cq* send_cq = nullptr;  // A's
  ibv_cq* recv_cq = nullptr;  // B's: the CQ under test
  ibv_qp* a = nullptr;
  ibv_qp* b = nullptr;
  ibv_gid gid{};
  int max_cqe = 0;
};

ibv_qp* make_qp(Nic& n, ibv_cq* send_cq, ibv_cq* recv_cq) {
  ibv_qp_init_attr init{};
  init.send_cq = send_cq;
  init.recv_cq = recv_cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 64;
  init.cap.max_recv_wr = kRecvDepth;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  return ibv_create_qp(n.pd, &init);
}

// No remote access, both PSNs 0.
bool connect(ibv_qp* qp, uint32_t dest_qpn, const ibv_gid& gid) {
  return check::connect_qp(qp, dest_qpn, gid, check::Path{.psn = 0, .min_rnr_timer = 1, .hop_limit = 64});
}

bool setup(Nic& n, const char* dev) {
  n.ctx = open_dev(dev);
  CHECK(n.ctx, "cannot open device %s", dev ? dev : "(first)");
  ibv_device_attr da{};
  CHECK(ibv_query_device(n.ctx, &da) == 0, "ibv_query_device");
  n.max_cqe = da.max_cqe;
  n.pd = ibv_alloc_pd(n.ctx);
  n.mr = n.pd ? ibv_reg_mr(n.pd, n.buf.data(), n.buf.size(), int(IBV_ACCESS_LOCAL_WRITE)) : nullptr;
  CHECK(n.mr, "ibv_reg_mr: %s", std::strerror(errno));
  n.send_cq = ibv_create_cq(n.ctx, 64, nullptr, nullptr, 0);
  n.recv_cq = ibv_create_cq(n.ctx, 64, nullptr, nullptr, 0);
  CHECK(n.send_cq && n.recv_cq, "ibv_create_cq: %s", std::strerror(errno));
  n.a = make_qp(n, n.send_cq, n.send_cq);
  n.b = make_qp(n, n.send_cq, n.recv_cq);
  CHECK(n.a && n.b, "ibv_create_qp: %s", std::strerror(errno));
  CHECK(ibv_query_gid(n.ctx, 1, 0, &n.gid) == 0, "ibv_query_gid");
  return connect(n.a, n.b->qp_num, n.gid) && connect(n.b, n.a->qp_num, n.gid);
}

bool post_recvs(Nic& n, uint64_t first, int count) {
  for (int i = 0; i < count; ++i) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(n.buf.data()) + 32768, 64, n.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = first + uint64_t(i);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    int rc = ibv_post_recv(n.b, &wr, &bad);
    CHECK(rc == 0, "ibv_post_recv: %s", std::strerror(rc));
  }
  return true;
}

// Posts `count` signaled SENDs from A (wr_ids first..) and waits for all their completions:
// an ACKed SEND has completed its receive at B, so B's CQ then holds those completions too.
bool send_and_wait(Nic& n, uint64_t first, int count) {
  for (int i = 0; i < count; ++i) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(n.buf.data()), 64, n.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = first + uint64_t(i);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(n.a, &wr, &bad);
    CHECK(rc == 0, "ibv_post_send: %s", std::strerror(rc));
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int done = 0; done < count;) {
    ibv_wc wc[16];
    int got = ibv_poll_cq(n.send_cq, 16, wc);
    CHECK(got >= 0, "ibv_poll_cq(send) returned %d", got);
    for (int i = 0; i < got; ++i, ++done) {
      CHECK(wc[i].status == IBV_WC_SUCCESS, "SEND %" PRIu64 ": %s", wc[i].wr_id, ibv_wc_status_str(wc[i].status));
      CHECK(wc[i].wr_id == first + uint64_t(done), "SEND completion %" PRIu64 ", expected %" PRIu64, wc[i].wr_id,
            first + uint64_t(done));
    }
    CHECK(std::chrono::steady_clock::now() < deadline, "only %d of %d SENDs completed", done, count);
  }
  return true;
}

// Polls up to `want` receive completions and checks they carry wr_ids next, next+1, ...
bool expect_recvs(Nic& n, uint64_t* next, int want) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int done = 0; done < want;) {
    ibv_wc wc[8];
    int got = ibv_poll_cq(n.recv_cq, want - done < 8 ? want - done : 8, wc);
    CHECK(got >= 0, "ibv_poll_cq(recv) returned %d", got);
    for (int i = 0; i < got; ++i, ++done, ++*next) {
      CHECK(wc[i].status == IBV_WC_SUCCESS, "RECV %" PRIu64 ": %s", wc[i].wr_id, ibv_wc_status_str(wc[i].status));
      CHECK(wc[i].wr_id == *next, "RECV completion %" PRIu64 ", expected %" PRIu64, wc[i].wr_id, *next);
    }
    CHECK(std::chrono::steady_clock::now() < deadline, "only %d of %d receive completions", done, want);
  }
  return true;
}

bool refusals_and_exact_fit(Nic& n) {
  uint64_t next = kRecvBase;
  if (!post_recvs(n, kRecvBase, 40) || !send_and_wait(n, 0, 40) || !expect_recvs(n, &next, 10)) return false;
  const int cqe = n.recv_cq->cqe;
  for (int bad : {29, 0, -1, n.max_cqe + 1}) {
    int rc = ibv_resize_cq(n.recv_cq, bad);
    CHECK(rc == EINVAL, "ibv_resize_cq(%d) with 30 completions waiting: %d (%s), expected EINVAL", bad, rc,
          std::strerror(rc));
    CHECK(n.recv_cq->cqe == cqe, "a refused resize changed cq->cqe from %d to %d", cqe, n.recv_cq->cqe);
  }
  int rc = ibv_resize_cq(n.recv_cq, 30);
  CHECK(rc == 0, "ibv_resize_cq(30) with 30 completions waiting: %s", std::strerror(rc));
  CHECK(n.recv_cq->cqe >= 30, "cq->cqe %d after resizing to 30", n.recv_cq->cqe);
  std::printf("resized to 30: cq->cqe %d\n", n.recv_cq->cqe);
  return expect_recvs(n, &next, 30);
}

bool resizes_while_traffic_flows(Nic& n) {
  int rc = ibv_resize_cq(n.recv_cq, kRecvDepth);  // room for every receive that can be posted
  CHECK(rc == 0, "ibv_resize_cq(%d): %s", kRecvDepth, std::strerror(rc));
  constexpr int kTotal = 400, kBatch = 50;
  std::atomic<bool> failed{false};
  std::atomic<int> polled{0};
  std::thread poller([&] {
    uint64_t next = kRecvBase + 100;
    while (polled.load() < kTotal && !failed.load()) {
      if (!expect_recvs(n, &next, 1)) failed = true;
      ++polled;
    }
  });
  const int sizes[] = {kRecvDepth, 1000, 300, 4000, kRecvDepth + 1};
  bool ok = true;
  for (int sent = 0; ok && sent < kTotal && !failed.load(); sent += kBatch) {
    // Keep at most kRecvDepth receives posted: wait for the poller to catch up.
    while (sent + kBatch - polled.load() > kRecvDepth && !failed.load()) std::this_thread::yield();
    ok = post_recvs(n, kRecvBase + 100 + uint64_t(sent), kBatch) && send_and_wait(n, 10'000 + uint64_t(sent), kBatch);
    const int size = sizes[(sent / kBatch) % 5];
    rc = ibv_resize_cq(n.recv_cq, size);  // never fewer than kRecvDepth: no completion can be refused room
    if (ok && (rc != 0 || n.recv_cq->cqe < size)) {
      std::fprintf(stderr, "FAIL: ibv_resize_cq(%d) during traffic: %s (cqe %d)\n", size, std::strerror(rc),
                   n.recv_cq->cqe);
      ok = false;
    }
  }
  if (!ok) failed = true;
  poller.join();
  CHECK(!failed.load(), "see above");
  CHECK(polled.load() == kTotal, "%d of %d receive completions", polled.load(), kTotal);
  ibv_wc extra;
  CHECK(ibv_poll_cq(n.recv_cq, 1, &extra) == 0, "a completion arrived twice or from nowhere");
  std::printf("%d receive completions in order across %d resizes\n", kTotal, kTotal / kBatch + 1);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const char* dev = nullptr;
  for (int c; (c = getopt(argc, argv, "d:h")) != -1;) {
    if (c == 'd') dev = optarg;
    else {
      std::fprintf(stderr, "usage: %s [-d DEVICE]\n", argv[0]);
      return 2;
    }
  }
  Nic n;
  if (!setup(n, dev) || !refusals_and_exact_fit(n) || !resizes_while_traffic_flows(n)) return 1;
  std::printf("PASS\n");
  return 0;
}
