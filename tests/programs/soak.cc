// simnic-soak: a plain verbs program (system libibverbs) that runs every RC operation (SEND,
// SEND_WITH_IMM, RDMA WRITE, WRITE_WITH_IMM, READ, CMP_SWP, FETCH_ADD) over many QP pairs from
// several threads at once, checks every byte, every completion and every atomic result, and
// prints the totals. scripts/soak.sh runs it for minutes under loss; scripts/test.sh runs it
// under ThreadSanitizer (several threads and client processes on the same NICs).
//
// Each thread has its own PDs, CQs and QP pairs (A side on DEV0, B side on DEV1); with -c it
// also opens its own device contexts, otherwise the threads share one context per device,
// which exercises the library's locking. A round posts one operation on every pair (the
// opcode rotates per pair and round), waits for all completions and compares.
//
//   simnic-soak [-a DEV0] [-b DEV1] [-t THREADS] [-q PAIRS] [-s MAX_BYTES] [-d SECONDS | -n ROUNDS]
//               [-c] [-T COMPLETION_TIMEOUT_S]
#include <infiniband/verbs.h>

#include <endian.h>

#include <getopt.h>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "check_util.h"

namespace {

using check::mix;

struct Options {
  std::string dev_a = "simnic0", dev_b = "simnic1";
  int threads = 2, pairs = 8, max_bytes = 8192, seconds = 0, timeout_s = 60;
  long rounds = 20;
  bool own_contexts = false;
};

struct Totals {
  std::atomic<uint64_t> ops{0}, bytes{0}, errors{0};
  std::atomic<uint64_t> per_op[7] = {};
};

const char* const kOpNames[7] = {"SEND", "SEND_WITH_IMM", "WRITE", "WRITE_WITH_IMM", "READ", "CMP_SWP", "FETCH_ADD"};

Options g_opt;
Totals g_totals;
std::mutex g_print;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "FAIL: %s (errno %d: %s)\n", what, errno, std::strerror(errno));
  std::exit(1);
}

void error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void error(const char* fmt, ...) {
  ++g_totals.errors;
  std::lock_guard<std::mutex> lock(g_print);
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "ERROR: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
}

void fill(uint8_t* p, size_t n, uint64_t seed) {
  uint64_t s = mix(seed);
  for (size_t i = 0; i < n; ++i) {
    if (i % 8 == 0) s = mix(s);
    p[i] = uint8_t(s >> (8 * (i % 8)));
  }
}

ibv_context* open_device(const std::string& name) {
  ibv_context* ctx = check::open_dev(name.c_str());
  if (!ctx) die(("open " + name).c_str());
  return ctx;
}

// One side of a QP pair: its QP and registered buffers.
struct End {
  ibv_qp* qp = nullptr;
  std::vector<uint8_t> buf;  // [0, max): data; [max, 2max): READ/receive target; last 8: atomic word
  ibv_mr* mr = nullptr;
  ibv_gid gid{};
};

struct Pair {
  End a, b;
  uint64_t atomic_value = 0;  // what b's atomic word holds
};

void connect(End& me, const End& peer, uint32_t peer_qpn) {
  const int access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  // Both PSNs near the 2^24 wrap: long runs cross it.
  const check::Path path{
      .access = access, .psn = 0xffff00, .rd_atomic = 4, .min_rnr_timer = 1, .hop_limit = 64, .timeout = 12};
  if (!check::connect_qp(me.qp, peer_qpn, peer.gid, path)) die("connect");
}

class Worker {
 public:
  Worker(int id, ibv_context* ctx_a, ibv_context* ctx_b) : id_(id), ctx_a_(ctx_a), ctx_b_(ctx_b) {}

  void run() {
    setup();
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(g_opt.seconds);
    for (long r = 0; g_opt.seconds ? std::chrono::steady_clock::now() < end : r < g_opt.rounds; ++r) {
      if (!round(uint64_t(r))) break;
    }
    teardown();
  }

 private:
  const size_t kMax = size_t(g_opt.max_bytes);
  size_t atomic_off() const { return 2 * kMax; }

  void setup() {
    if (!ctx_a_) ctx_a_ = own_a_ = open_device(g_opt.dev_a);
    if (!ctx_b_) ctx_b_ = own_b_ = open_device(g_opt.dev_b);
    pd_a_ = ibv_alloc_pd(ctx_a_);
    pd_b_ = ibv_alloc_pd(ctx_b_);
    if (!pd_a_ || !pd_b_) die("ibv_alloc_pd");
    const int depth = 2 * g_opt.pairs + 4;
    cq_a_ = ibv_create_cq(ctx_a_, depth, nullptr, nullptr, 0);
    cq_b_ = ibv_create_cq(ctx_b_, depth, nullptr, nullptr, 0);
    if (!cq_a_ || !cq_b_) die("ibv_create_cq");
    pairs_.resize(size_t(g_opt.pairs));
    for (Pair& p : pairs_) {
      make_end(p.a, ctx_a_, pd_a_, cq_a_);
      make_end(p.b, ctx_b_, pd_b_, cq_b_);
    }
    for (Pair& p : pairs_) {
      connect(p.a, p.b, p.b.qp->qp_num);
      connect(p.b, p.a, p.a.qp->qp_num);
    }
  }
  void make_end(End& e, ibv_context* ctx, ibv_pd* pd, ibv_cq* cq) {
    e.buf.assign(2 * kMax + 8, 0);
    e.mr = ibv_reg_mr(pd, e.buf.data(), e.buf.size(),
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                          IBV_ACCESS_REMOTE_ATOMIC);
    if (!e.mr) die("ibv_reg_mr");
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap = {4, 4, 1, 1, 0};
    e.qp = ibv_create_qp(pd, &init);
    if (!e.qp) die("ibv_create_qp");
    if (ibv_query_gid(ctx, 1, 0, &e.gid)) die("ibv_query_gid");
  }
  void teardown() {
    for (Pair& p : pairs_)
      for (End* e : {&p.a, &p.b}) {
        if (ibv_destroy_qp(e->qp)) error("ibv_destroy_qp");
        if (ibv_dereg_mr(e->mr)) error("ibv_dereg_mr");
      }
    if (ibv_destroy_cq(cq_a_) || ibv_destroy_cq(cq_b_)) error("ibv_destroy_cq");
    if (ibv_dealloc_pd(pd_a_) || ibv_dealloc_pd(pd_b_)) error("ibv_dealloc_pd");
    if (own_a_) ibv_close_device(own_a_);
    if (own_b_) ibv_close_device(own_b_);
  }

  // One operation on every pair, then every completion, then every check.
  bool round(uint64_t r) {
    std::vector<int> ops(pairs_.size());
    std::vector<uint32_t> lens(pairs_.size());
    int want_a = 0, want_b = 0;
    for (size_t i = 0; i < pairs_.size(); ++i) {
      ops[i] = int((r + i) % 7);
      const uint64_t seed = (uint64_t(id_) << 48) ^ (uint64_t(i) << 32) ^ r;
      lens[i] = ops[i] >= 5 ? 8 : uint32_t(1 + mix(seed) % kMax);
      if (!post(pairs_[i], i, ops[i], lens[i], seed)) return false;
      ++want_a;
      if (ops[i] <= 1 || ops[i] == 3) ++want_b;
    }
    std::vector<ibv_wc> got_a, got_b;
    if (!collect(cq_a_, want_a, &got_a)) return missing(got_a, ops, r, /*requester=*/true), false;
    if (!collect(cq_b_, want_b, &got_b)) return missing(got_b, ops, r, /*requester=*/false), false;
    for (const ibv_wc& wc : got_a) check_a(wc, ops, lens);
    for (const ibv_wc& wc : got_b) check_b(wc, ops, lens);
    return g_totals.errors == 0;
  }

  bool post(Pair& p, size_t i, int op, uint32_t len, uint64_t seed) {
    uint8_t* a = p.a.buf.data();
    uint8_t* b = p.b.buf.data();
    ibv_sge sge{reinterpret_cast<uintptr_t>(a), len, p.a.mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htobe32(uint32_t(seed));
    if (op <= 1 || op == 3) {  // the B side receives into its second half
      ibv_sge rsge{reinterpret_cast<uintptr_t>(b + kMax), uint32_t(kMax), p.b.mr->lkey};
      ibv_recv_wr rwr{}, *rbad = nullptr;
      rwr.wr_id = i;
      rwr.sg_list = &rsge;
      rwr.num_sge = 1;
      if (ibv_post_recv(p.b.qp, &rwr, &rbad)) return error("ibv_post_recv: %s", std::strerror(errno)), false;
    }
    switch (op) {
      case 0:
        fill(a, len, seed);
        wr.opcode = IBV_WR_SEND;
        break;
      case 1:
        fill(a, len, seed);
        wr.opcode = IBV_WR_SEND_WITH_IMM;
        break;
      case 2:
      case 3:
        fill(a, len, seed);
        wr.opcode = op == 2 ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.wr.rdma = {reinterpret_cast<uintptr_t>(b + (op == 2 ? 0 : kMax)), p.b.mr->rkey};
        break;
      case 4:  // READ b's first half (filled here, as its owner would) into a's second half
        fill(b, len, seed);
        sge.addr = reinterpret_cast<uintptr_t>(a + kMax);
        wr.opcode = IBV_WR_RDMA_READ;
        wr.wr.rdma = {reinterpret_cast<uintptr_t>(b), p.b.mr->rkey};
        break;
      case 5:
      case 6: {
        sge.addr = reinterpret_cast<uintptr_t>(a + atomic_off());
        wr.opcode = op == 5 ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.wr.atomic.remote_addr = reinterpret_cast<uintptr_t>(b + atomic_off());
        wr.wr.atomic.rkey = p.b.mr->rkey;
        wr.wr.atomic.compare_add = op == 5 ? p.atomic_value : (seed | 1);
        wr.wr.atomic.swap = mix(seed);
        expected_orig_[i] = p.atomic_value;
        p.atomic_value = op == 5 ? mix(seed) : p.atomic_value + (seed | 1);
        break;
      }
    }
    seeds_[i] = seed;
    if (ibv_post_send(p.a.qp, &wr, &bad)) return error("ibv_post_send: %s", std::strerror(errno)), false;
    return true;
  }

  bool collect(ibv_cq* cq, int want, std::vector<ibv_wc>* out) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(g_opt.timeout_s);
    ibv_wc wc[16];
    while (int(out->size()) < want) {
      int n = ibv_poll_cq(cq, 16, wc);
      if (n < 0) return error("ibv_poll_cq: %d", n), false;
      out->insert(out->end(), wc, wc + n);
      if (n == 0 && std::chrono::steady_clock::now() > deadline)
        return error("thread %d: %zu of %d completions after %d s", id_, out->size(), want, g_opt.timeout_s), false;
      if (n == 0) std::this_thread::yield();
    }
    return true;
  }

  // Which operations never completed, so a stall can be looked for in a trace.
  void missing(const std::vector<ibv_wc>& got, const std::vector<int>& ops, uint64_t r, bool requester) {
    std::vector<bool> seen(pairs_.size());
    for (const ibv_wc& wc : got)
      if (wc.wr_id < seen.size()) seen[wc.wr_id] = true;
    for (size_t i = 0; i < pairs_.size(); ++i) {
      const bool expected = requester || ops[i] <= 1 || ops[i] == 3;
      if (expected && !seen[i])
        error("thread %d round %" PRIu64 " pair %zu: no %s completion of %s (QP 0x%x -> QP 0x%x)", id_, r, i,
              requester ? "requester" : "receive", kOpNames[ops[i]], pairs_[i].a.qp->qp_num, pairs_[i].b.qp->qp_num);
    }
  }

  void check_a(const ibv_wc& wc, const std::vector<int>& ops, const std::vector<uint32_t>& lens) {
    const size_t i = wc.wr_id;
    if (i >= pairs_.size() || wc.status != IBV_WC_SUCCESS)
      return error("thread %d pair %zu: requester completion %s", id_, i, ibv_wc_status_str(wc.status));
    Pair& p = pairs_[i];
    const int op = ops[i];
    ++g_totals.ops;
    ++g_totals.per_op[op];
    if (op == 2) compare(p.b.buf.data(), lens[i], seeds_[i], i, "WRITE");
    if (op == 4) compare(p.a.buf.data() + kMax, lens[i], seeds_[i], i, "READ");
    if (op >= 5) {
      uint64_t orig;
      std::memcpy(&orig, p.a.buf.data() + atomic_off(), 8);
      uint64_t now;
      std::memcpy(&now, p.b.buf.data() + atomic_off(), 8);
      if (orig != expected_orig_[i] || now != p.atomic_value)
        error("thread %d pair %zu: %s returned %" PRIx64 " (want %" PRIx64 "), word %" PRIx64 " (want %" PRIx64 ")",
              id_, i, kOpNames[op], orig, expected_orig_[i], now, p.atomic_value);
      else g_totals.bytes += 8;
    }
  }
  void check_b(const ibv_wc& wc, const std::vector<int>& ops, const std::vector<uint32_t>& lens) {
    const size_t i = wc.wr_id;
    if (i >= pairs_.size() || wc.status != IBV_WC_SUCCESS)
      return error("thread %d pair %zu: receive completion %s", id_, i, ibv_wc_status_str(wc.status));
    const int op = ops[i];
    const bool imm = op == 1 || op == 3;
    const ibv_wc_opcode want = op == 3 ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
    if (wc.opcode != want || wc.byte_len != lens[i] || bool(wc.wc_flags & IBV_WC_WITH_IMM) != imm ||
        (imm && wc.imm_data != htobe32(uint32_t(seeds_[i]))))
      return error("thread %d pair %zu: receive of %s: opcode %d byte_len %u flags %#x", id_, i, kOpNames[op],
                   int(wc.opcode), wc.byte_len, unsigned(wc.wc_flags));
    compare(pairs_[i].b.buf.data() + kMax, lens[i], seeds_[i], i, kOpNames[op]);
  }
  void compare(const uint8_t* got, size_t len, uint64_t seed, size_t i, const char* what) {
    std::vector<uint8_t> want(len);
    fill(want.data(), len, seed);
    if (std::memcmp(got, want.data(), len) != 0) return error("thread %d pair %zu: %s data differs", id_, i, what);
    g_totals.bytes += len;
  }

  int id_;
  ibv_context *ctx_a_, *ctx_b_, *own_a_ = nullptr, *own_b_ = nullptr;
  ibv_pd *pd_a_ = nullptr, *pd_b_ = nullptr;
  ibv_cq *cq_a_ = nullptr, *cq_b_ = nullptr;
  std::vector<Pair> pairs_;
  std::vector<uint64_t> seeds_ = std::vector<uint64_t>(size_t(g_opt.pairs));
  std::vector<uint64_t> expected_orig_ = std::vector<uint64_t>(size_t(g_opt.pairs));
};

void parse(int argc, char** argv) {
  int c;
  while ((c = getopt(argc, argv, "a:b:t:q:s:d:n:cT:h")) != -1) {
    switch (c) {
      case 'a': g_opt.dev_a = optarg; break;
      case 'b': g_opt.dev_b = optarg; break;
      case 't': g_opt.threads = std::atoi(optarg); break;
      case 'q': g_opt.pairs = std::atoi(optarg); break;
      case 's': g_opt.max_bytes = std::atoi(optarg); break;
      case 'd': g_opt.seconds = std::atoi(optarg); break;
      case 'n': g_opt.rounds = std::atol(optarg); break;
      case 'c': g_opt.own_contexts = true; break;
      case 'T': g_opt.timeout_s = std::atoi(optarg); break;
      default:
        std::printf(
            "usage: %s [-a DEV0] [-b DEV1] [-t THREADS] [-q PAIRS] [-s MAX_BYTES] [-d SECONDS | -n ROUNDS] [-c] "
            "[-T TIMEOUT_S]\n",
            argv[0]);
        std::exit(c == 'h' ? 0 : 2);
    }
  }
  g_opt.max_bytes &= ~7;  // the atomic word after two buffers stays 8-byte aligned
  if (g_opt.threads < 1 || g_opt.pairs < 1 || g_opt.max_bytes < 8) {
    std::fprintf(stderr, "need -t >= 1, -q >= 1, -s >= 8\n");
    std::exit(2);
  }
}

}  // namespace

int main(int argc, char** argv) {
  parse(argc, argv);
  ibv_context* shared_a = g_opt.own_contexts ? nullptr : open_device(g_opt.dev_a);
  ibv_context* shared_b = g_opt.own_contexts ? nullptr : open_device(g_opt.dev_b);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  std::vector<Worker> workers;
  workers.reserve(size_t(g_opt.threads));
  for (int t = 0; t < g_opt.threads; ++t) workers.emplace_back(t, shared_a, shared_b);
  for (Worker& w : workers) threads.emplace_back([&w] { w.run(); });
  for (std::thread& t : threads) t.join();
  if (shared_a) ibv_close_device(shared_a);
  if (shared_b) ibv_close_device(shared_b);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("soak: %d threads x %d QP pairs, %.1f s: operations %" PRIu64 ", bytes verified %" PRIu64
              ", errors %" PRIu64 "\n",
              g_opt.threads, g_opt.pairs, secs, g_totals.ops.load(), g_totals.bytes.load(), g_totals.errors.load());
  std::printf("soak: per opcode:");
  for (int op = 0; op < 7; ++op) std::printf(" %s %" PRIu64, kOpNames[op], g_totals.per_op[op].load());
  std::printf("\n");
  return g_totals.errors == 0 && g_totals.ops > 0 ? 0 : 1;
}
