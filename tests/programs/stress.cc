// simnic-stress: a plain verbs program (system libibverbs) that streams RDMA WRITEs and SENDs
// between two RC QPs and checks every byte end to end, for runs under injected loss,
// reordering and duplication.
//
// Each round fills one slot of A's buffer with pseudo-random bytes, RDMA WRITEs it into the
// same slot at B, then SENDs {round, length, hash}. RC ordering means the SEND's arrival
// implies the WRITE landed; B hashes its slot, compares, and SENDs a credit back so A may
// reuse the slot. Every completion is checked (status, opcode, byte_len) and counted, and the
// counts must come out exact with nothing extra afterwards.
//
// With -x it uses the extended API instead: ibv_create_cq_ex + ibv_start_poll/next_poll and
// ibv_create_qp_ex + ibv_wr_start ... ibv_wr_complete.
//
//   simnic-stress [-a DEV0] [-b DEV1] [-t MIB] [-c CHUNK_BYTES] [-d SLOTS] [-m MTU] [-T TIMEOUT] [-x]
#include <infiniband/verbs.h>

#include <getopt.h>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "check_util.h"

namespace {

using check::mix;

struct Msg {
  uint64_t round;
  uint64_t length;
  uint64_t hash;
};

bool g_extended = false;

struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_cq_ex* cq_ex = nullptr;
  ibv_qp* qp = nullptr;
  ibv_qp_ex* qp_ex = nullptr;
  std::vector<uint8_t> data;  // slots * chunk
  std::vector<Msg> msgs;      // slots send + slots receive messages
  ibv_mr* data_mr = nullptr;
  ibv_mr* msg_mr = nullptr;
  ibv_gid gid{};
};

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "FAIL: %s (errno %d: %s)\n", what, errno, std::strerror(errno));
  std::exit(1);
}

void fill(uint8_t* p, size_t n, uint64_t seed) {
  uint64_t s = mix(seed);
  for (size_t i = 0; i + 8 <= n; i += 8) {
    s = mix(s);
    std::memcpy(p + i, &s, 8);
  }
  for (size_t i = n & ~size_t(7); i < n; ++i) p[i] = uint8_t(mix(s + i));
}

uint64_t hash(const uint8_t* p, size_t n) {  // FNV-1a over 8-byte words, then the tail
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

ibv_context* open_dev(const char* name) {
  ibv_context* ctx = check::open_dev(name);
  if (!ctx) die("device not found or not opened");
  return ctx;
}

void setup(Side& s, const char* dev, size_t slots, size_t chunk) {
  s.ctx = open_dev(dev);
  if (!(s.pd = ibv_alloc_pd(s.ctx))) die("ibv_alloc_pd");
  if (g_extended) {
    ibv_cq_init_attr_ex ca{};
    ca.cqe = uint32_t(slots * 4 + 16);
    ca.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM;
    if (!(s.cq_ex = ibv_create_cq_ex(s.ctx, &ca))) die("ibv_create_cq_ex");
    s.cq = ibv_cq_ex_to_cq(s.cq_ex);
  } else if (!(s.cq = ibv_create_cq(s.ctx, int(slots * 4 + 16), nullptr, nullptr, 0))) {
    die("ibv_create_cq");
  }
  s.data.resize(slots * chunk);
  s.msgs.resize(slots * 2);
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (!(s.data_mr = ibv_reg_mr(s.pd, s.data.data(), s.data.size(), access))) die("ibv_reg_mr data");
  if (!(s.msg_mr = ibv_reg_mr(s.pd, s.msgs.data(), s.msgs.size() * sizeof(Msg), int(IBV_ACCESS_LOCAL_WRITE))))
    die("ibv_reg_mr msgs");
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = s.cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = uint32_t(slots * 2 + 2);
  init.cap.max_recv_wr = uint32_t(slots + 2);
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  if (g_extended) {
    ibv_qp_init_attr_ex ex{};
    ex.send_cq = ex.recv_cq = s.cq;
    ex.qp_type = IBV_QPT_RC;
    ex.cap = init.cap;
    ex.pd = s.pd;
    ex.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ex.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND;
    if (!(s.qp = ibv_create_qp_ex(s.ctx, &ex))) die("ibv_create_qp_ex");
    if (!(s.qp_ex = ibv_qp_to_qp_ex(s.qp))) die("ibv_qp_to_qp_ex");
  } else if (!(s.qp = ibv_create_qp(s.pd, &init))) {
    die("ibv_create_qp");
  }
  if (ibv_query_gid(s.ctx, 1, 0, &s.gid)) die("ibv_query_gid");
}

void connect(Side& a, const Side& b, ibv_mtu mtu, uint8_t timeout) {
  // Both PSNs near the 2^24 wrap, so long runs cross it.
  const check::Path path{.access = IBV_ACCESS_REMOTE_WRITE,
                         .mtu = mtu,
                         .psn = 0xfff000,
                         .min_rnr_timer = 1,
                         .hop_limit = 64,
                         .timeout = timeout};
  if (!check::connect_qp(a.qp, b.qp->qp_num, b.gid, path)) die("connect");
}

void post_recv(Side& s, size_t i) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(&s.msgs[i]), sizeof(Msg), s.msg_mr->lkey};
  ibv_recv_wr wr{}, *bad;
  wr.wr_id = i;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (ibv_post_recv(s.qp, &wr, &bad)) die("ibv_post_recv");
}

void post_send(Side& s, ibv_wr_opcode op, uint64_t wr_id, void* addr, uint32_t len, uint32_t lkey, uint64_t remote = 0,
               uint32_t rkey = 0) {
  if (s.qp_ex) {
    ibv_wr_start(s.qp_ex);
    s.qp_ex->wr_id = wr_id;
    s.qp_ex->wr_flags = IBV_SEND_SIGNALED;
    if (op == IBV_WR_RDMA_WRITE) ibv_wr_rdma_write(s.qp_ex, rkey, remote);
    else ibv_wr_send(s.qp_ex);
    ibv_wr_set_sge(s.qp_ex, lkey, reinterpret_cast<uintptr_t>(addr), len);
    if (int e = ibv_wr_complete(s.qp_ex)) {
      errno = e;
      die("ibv_wr_complete");
    }
    return;
  }
  ibv_sge sge{reinterpret_cast<uintptr_t>(addr), len, lkey};
  ibv_send_wr wr{}, *bad;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  if (ibv_post_send(s.qp, &wr, &bad)) die("ibv_post_send");
}

// ibv_poll_cq, or the extended poll loop turned into the same ibv_wc records.
int poll(Side& s, int max, ibv_wc* wc) {
  if (!s.cq_ex) return ibv_poll_cq(s.cq, max, wc);
  ibv_poll_cq_attr attr{};
  int ret = ibv_start_poll(s.cq_ex, &attr);
  if (ret == ENOENT) return 0;
  if (ret) return -1;
  int n = 0;
  do {
    wc[n] = {};
    wc[n].wr_id = s.cq_ex->wr_id;
    wc[n].status = s.cq_ex->status;
    wc[n].opcode = ibv_wc_read_opcode(s.cq_ex);
    wc[n].byte_len = ibv_wc_read_byte_len(s.cq_ex);
    wc[n].qp_num = ibv_wc_read_qp_num(s.cq_ex);
    ++n;
  } while (n < max && (ret = ibv_next_poll(s.cq_ex)) == 0);
  ibv_end_poll(s.cq_ex);
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  const char* dev_a = "simnic0";
  const char* dev_b = "simnic1";
  size_t total_mib = 256, chunk = 1 << 20, slots = 8;
  int mtu_bytes = 4096, timeout = 12;
  for (int c; (c = getopt(argc, argv, "a:b:t:c:d:m:T:x")) != -1;) {
    switch (c) {
      case 'a': dev_a = optarg; break;
      case 'b': dev_b = optarg; break;
      case 't': total_mib = std::strtoull(optarg, nullptr, 10); break;
      case 'c': chunk = std::strtoull(optarg, nullptr, 10); break;
      case 'd': slots = std::strtoull(optarg, nullptr, 10); break;
      case 'm': mtu_bytes = std::atoi(optarg); break;
      case 'T': timeout = std::atoi(optarg); break;
      case 'x': g_extended = true; break;
      default:
        std::fprintf(stderr,
                     "usage: %s [-a DEV0] [-b DEV1] [-t MIB] [-c CHUNK] [-d SLOTS] [-m MTU] [-T TIMEOUT] [-x]\n",
                     argv[0]);
        return 2;
    }
  }
  const ibv_mtu mtu = mtu_bytes == 256    ? IBV_MTU_256
                      : mtu_bytes == 512  ? IBV_MTU_512
                      : mtu_bytes == 1024 ? IBV_MTU_1024
                      : mtu_bytes == 2048 ? IBV_MTU_2048
                                          : IBV_MTU_4096;
  const uint64_t rounds = (uint64_t(total_mib) << 20) / chunk;
  Side a, b;
  setup(a, dev_a, slots, chunk);
  setup(b, dev_b, slots, chunk);
  connect(a, b, mtu, uint8_t(timeout));
  connect(b, a, mtu, uint8_t(timeout));
  for (size_t i = 0; i < slots; ++i) post_recv(a, slots + i), post_recv(b, slots + i);
  std::printf("%s QP 0x%x -> %s QP 0x%x: %" PRIu64 " rounds of %zu bytes (%zu MiB), %zu slots%s\n", dev_a, a.qp->qp_num,
              dev_b, b.qp->qp_num, rounds, chunk, total_mib, slots, g_extended ? ", extended API (wr_*, cq_ex)" : "");

  // wr_id encodes the kind: 0 = WRITE, 1 = SEND, 2 = credit; the round in the upper bits.
  uint64_t next = 0, credits = slots, verified = 0, bad_bytes = 0;
  uint64_t write_done = 0, send_done = 0, credit_sent = 0, credit_recv = 0;
  auto t0 = std::chrono::steady_clock::now();
  auto last_progress = t0;
  ibv_wc wc[32];
  while (verified < rounds || credit_recv < rounds || write_done < rounds || send_done < rounds ||
         credit_sent < rounds) {
    while (credits && next < rounds) {
      size_t slot = next % slots;
      uint8_t* p = &a.data[slot * chunk];
      fill(p, chunk, next);
      Msg& m = a.msgs[slot];
      m = {next, chunk, hash(p, chunk)};
      post_send(a, IBV_WR_RDMA_WRITE, next << 2 | 0, p, uint32_t(chunk), a.data_mr->lkey,
                reinterpret_cast<uintptr_t>(&b.data[slot * chunk]), b.data_mr->rkey);
      post_send(a, IBV_WR_SEND, next << 2 | 1, &m, sizeof(Msg), a.msg_mr->lkey);
      --credits;
      ++next;
    }
    bool progressed = false;
    for (Side* s : {&a, &b}) {
      int n = poll(*s, 32, wc);
      if (n < 0) die("ibv_poll_cq");
      for (int i = 0; i < n; ++i) {
        progressed = true;
        if (wc[i].status != IBV_WC_SUCCESS) {
          std::fprintf(stderr, "FAIL: %s completion wr_id %" PRIu64 ": %s\n", s == &a ? "A" : "B", wc[i].wr_id,
                       ibv_wc_status_str(wc[i].status));
          return 1;
        }
        if (wc[i].opcode == IBV_WC_RECV) {
          if (wc[i].byte_len != sizeof(Msg)) {
            std::fprintf(stderr, "FAIL: receive of %u bytes, expected %zu\n", wc[i].byte_len, sizeof(Msg));
            return 1;
          }
          size_t mi = size_t(wc[i].wr_id);
          Msg m = s->msgs[mi];
          post_recv(*s, mi);
          if (s == &b) {  // a round arrived: check its slot, then return the credit
            size_t slot = m.round % slots;
            if (m.round != verified || m.length != chunk) {
              std::fprintf(stderr, "FAIL: message for round %" PRIu64 " arrived, expected %" PRIu64 "\n", m.round,
                           verified);
              return 1;
            }
            if (hash(&b.data[slot * chunk], chunk) != m.hash) {
              std::vector<uint8_t> want(chunk);
              fill(want.data(), chunk, m.round);
              for (size_t k = 0; k < chunk; ++k) bad_bytes += want[k] != b.data[slot * chunk + k];
              std::fprintf(stderr, "FAIL: round %" PRIu64 ": %" PRIu64 " bytes differ\n", m.round, bad_bytes);
              return 1;
            }
            ++verified;
            Msg& c = b.msgs[slot];
            c = {m.round, 0, 0};
            post_send(b, IBV_WR_SEND, m.round << 2 | 2, &c, sizeof(Msg), b.msg_mr->lkey);
          } else {
            ++credits;
            ++credit_recv;
          }
        } else {
          uint64_t kind = wc[i].wr_id & 3;
          ibv_wc_opcode want = kind == 0 ? IBV_WC_RDMA_WRITE : IBV_WC_SEND;
          if (wc[i].opcode != want || (s == &a) != (kind != 2)) {
            std::fprintf(stderr, "FAIL: unexpected send completion opcode %d wr_id %" PRIu64 "\n", wc[i].opcode,
                         wc[i].wr_id);
            return 1;
          }
          (kind == 0 ? write_done : kind == 1 ? send_done : credit_sent)++;
        }
      }
    }
    auto now = std::chrono::steady_clock::now();
    if (progressed) last_progress = now;
    else if (now - last_progress > std::chrono::seconds(30)) {
      std::fprintf(stderr, "FAIL: no completion for 30 s (verified %" PRIu64 " of %" PRIu64 ")\n", verified, rounds);
      return 1;
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Nothing more may complete: every completion has been accounted for exactly once.
  auto quiet = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (std::chrono::steady_clock::now() < quiet)
    for (Side* s : {&a, &b})
      if (poll(*s, 32, wc) != 0) {
        std::fprintf(stderr, "FAIL: an extra completion (wr_id %" PRIu64 ")\n", wc[0].wr_id);
        return 1;
      }
  std::printf("%" PRIu64 " rounds verified, %" PRIu64 " bytes compared by hash, %" PRIu64 " WRITE + %" PRIu64
              " SEND + %" PRIu64 " credit completions, %.2f s, %.1f MB/s\n",
              verified, verified * chunk, write_done, send_done, credit_sent, secs,
              double(verified * chunk) / secs / 1e6);
  std::puts("OK");
  for (Side* s : {&a, &b}) {
    ibv_destroy_qp(s->qp);
    ibv_dereg_mr(s->data_mr);
    ibv_dereg_mr(s->msg_mr);
    ibv_destroy_cq(s->cq);  // also for a CQ from ibv_create_cq_ex, as in rdma-core
    ibv_dealloc_pd(s->pd);
    ibv_close_device(s->ctx);
  }
  return 0;
}
