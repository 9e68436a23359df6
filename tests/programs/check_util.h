// What the verbs programs in tests/programs share: a CHECK that reports and fails the step,
// opening a device by name, the walk of an RC, UC, XRC or UD QP to RTS (with the attributes a
// check cares about in a Path), polling and posting one work request, the fixed-size message
// two processes exchange over a socket, byte patterns, and the main of a two-device check.
// Plain verbs only: these programs also run, unchanged, on a real RDMA NIC. (mcast.c is C and
// cm_check.cc walks no QP of its own: rdma_cm does.)
#pragma once

#include <getopt.h>
#include <infiniband/verbs.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

// Fails the enclosing bool function with the file, line, errno and a message.
#define CHECK(cond, ...)                                                          \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::fprintf(stderr, "FAIL %s:%d (errno %d): ", __FILE__, __LINE__, errno); \
      std::fprintf(stderr, __VA_ARGS__);                                          \
      std::fprintf(stderr, "\n");                                                 \
      return false;                                                               \
    }                                                                             \
  } while (0)

namespace check {

// The device called `name` (any device when null), opened; null when there is none.
inline ibv_context* open_dev(const char* name) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = nullptr;
  for (int i = 0; list && i < n && !ctx; ++i)
    if (!name || std::strcmp(ibv_get_device_name(list[i]), name) == 0) ctx = ibv_open_device(list[i]);
  if (list) ibv_free_device_list(list);
  return ctx;
}

// A device opened with a PD, a CQ of `cqe` entries and its GID 0: what every check starts from.
struct DeviceSetup {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_gid gid{};
  bool open(const char* dev, int cqe) {
    ctx = open_dev(dev);
    CHECK(ctx, "cannot open device %s", dev ? dev : "(first)");
    pd = ibv_alloc_pd(ctx);
    cq = ibv_create_cq(ctx, cqe, nullptr, nullptr, 0);
    CHECK(pd && cq, "ibv_alloc_pd/ibv_create_cq: %s", std::strerror(errno));
    CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0, "ibv_query_gid");
    return true;
  }
};

// A QP of `type` with one CQ for both queues, `depth` WRs and `sges` SGEs each way.
inline ibv_qp* create_qp(ibv_pd* pd, ibv_cq* cq, ibv_qp_type type, uint32_t depth, uint32_t sges) {
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.qp_type = type;
  init.cap.max_send_wr = init.cap.max_recv_wr = depth;
  init.cap.max_send_sge = init.cap.max_recv_sge = sges;
  return ibv_create_qp(pd, &init);
}

inline bool modify(ibv_qp* qp, ibv_qp_attr a, int mask) { return ibv_modify_qp(qp, &a, mask) == 0; }

// Which columns of the QP state table the walk uses: an XRC INI QP takes no responder
// attributes, an XRC TGT QP no requester ones (IBA 11.2.4.2 via rdma-core's ibv_modify_qp); a UC
// QP neither (no READ/atomic, no ACKs: no retries, timeout or RNR timer, IBA 9.7.7).
enum class Role { kRc, kXrcIni, kXrcTgt, kUc };

// The attributes of a walk to RTS. The defaults are what most checks use; a program sets the
// few it tests (a PSN near the 2^24 wrap, a larger MTU, more READs outstanding, short retries).
struct Path {
  int access = 0;  // the QP's remote access flags, set at INIT
  ibv_mtu mtu = IBV_MTU_1024;
  uint32_t psn = 1;       // both directions' first PSN (rq_psn at RTR, sq_psn at RTS)
  uint8_t rd_atomic = 1;  // READ/atomic outstanding each way
  uint8_t min_rnr_timer = 12;
  uint8_t hop_limit = 1;
  uint8_t sgid_index = 0;
  uint8_t timeout = 14;  // local ACK timeout, 4.096 us * 2^timeout
  uint8_t retries = 7;   // retry_cnt and rnr_retry
  Role role = Role::kRc;
};

// Each step of the walk on its own, as ibv_modify_qp answers it (0 or an errno), for programs
// that make a step fail on purpose.
inline int to_init(ibv_qp* qp, const Path& p) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = unsigned(p.access);
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

inline int to_rtr(ibv_qp* qp, uint32_t peer_qpn, const ibv_gid& peer_gid, const Path& p) {
  const bool responder = p.role == Role::kRc || p.role == Role::kXrcTgt;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = p.mtu;
  a.dest_qp_num = peer_qpn;
  a.rq_psn = p.psn;
  a.max_dest_rd_atomic = p.rd_atomic;
  a.min_rnr_timer = p.min_rnr_timer;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer_gid;
  a.ah_attr.grh.sgid_index = p.sgid_index;
  a.ah_attr.grh.hop_limit = p.hop_limit;
  a.ah_attr.port_num = 1;
  const int resp = responder ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | resp);
}

inline int to_rts(ibv_qp* qp, const Path& p) {
  const bool requester = p.role == Role::kRc || p.role == Role::kXrcIni;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = p.timeout;
  a.retry_cnt = p.retries;
  a.rnr_retry = p.retries;
  a.sq_psn = p.psn;
  a.max_rd_atomic = p.rd_atomic;
  const int timeout = p.role == Role::kUc ? 0 : IBV_QP_TIMEOUT;
  const int req = requester ? IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC : 0;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | timeout | req);
}

// RESET -> INIT -> RTR -> RTS towards the peer's QP and RoCE GID; a failing step is reported.
inline bool connect_qp(ibv_qp* qp, uint32_t peer_qpn, const ibv_gid& peer_gid, const Path& p) {
  int rc = to_init(qp, p);
  CHECK(rc == 0, "RESET->INIT: %s", std::strerror(rc));
  rc = to_rtr(qp, peer_qpn, peer_gid, p);
  CHECK(rc == 0, "INIT->RTR: %s", std::strerror(rc));
  rc = to_rts(qp, p);
  CHECK(rc == 0, "RTR->RTS: %s", std::strerror(rc));
  return true;
}

// The walk with the default path and `access`: MTU 1024, both PSNs 1, one READ/atomic
// outstanding each way, retries 7.
inline bool connect_qp(ibv_qp* qp, uint32_t peer_qpn, const ibv_gid& peer_gid, int access, Role role = Role::kRc) {
  return connect_qp(qp, peer_qpn, peer_gid, Path{.access = access, .role = role});
}

// A UD QP to RTS with `qkey` (a UD QP has no peer: the AH of each send names it, IBA 9.8).
inline bool ud_to_rts(ibv_qp* qp, uint32_t qkey) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = qkey;
  CHECK(modify(qp, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), "UD INIT");
  a = {};
  a.qp_state = IBV_QPS_RTR;
  CHECK(modify(qp, a, IBV_QP_STATE), "UD RTR");
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 1;
  CHECK(modify(qp, a, IBV_QP_STATE | IBV_QP_SQ_PSN), "UD RTS");
  return true;
}

// One completion, polling for at most `limit`; false when none came.
inline bool poll_one(ibv_cq* cq, ibv_wc* wc, std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    int n = ibv_poll_cq(cq, 1, wc);
    CHECK(n >= 0, "ibv_poll_cq: %d", n);
    if (n == 1) return true;
  }
  CHECK(false, "no completion within %lld s", static_cast<long long>(limit.count()));
}

// One signalled work request with one SGE (or none when len is 0 and lkey is 0), waited for: its status,
// -1 if the post failed, -2 if no completion came (poll_one says so).
inline int post_wait(ibv_qp* qp, ibv_cq* cq, ibv_wr_opcode op, const void* local, uint32_t len, uint32_t lkey,
                     uint64_t raddr = 0, uint32_t rkey = 0) {
  ibv_sge sge{uint64_t(uintptr_t(local)), len, lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 1;
  wr.opcode = op;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  if (ibv_post_send(qp, &wr, &bad)) return -1;
  ibv_wc wc{};
  if (!poll_one(cq, &wc)) return -2;
  return int(wc.status);
}

// The fixed-size message two check processes exchange over their socket pair.
template <typename Msg>
bool send_msg(int fd, const Msg& m) {
  return ::send(fd, &m, sizeof m, 0) == ssize_t(sizeof m);
}
template <typename Msg>
bool recv_msg(int fd, Msg* m) {
  return ::recv(fd, m, sizeof *m, MSG_WAITALL) == ssize_t(sizeof *m);
}

// splitmix64: a well-mixed 64-bit value from a counter or seed, for patterns and hashes.
inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A byte pattern that differs with the seed and along the buffer, so a misplaced or stale
// page shows.
inline void fill(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = uint8_t(seed * 31 + i * 7 + (i >> 8));
}
inline bool filled(const uint8_t* p, size_t n, uint32_t seed) {
  std::vector<uint8_t> want(n);
  fill(want.data(), n, seed);
  return std::memcmp(p, want.data(), n) == 0;
}

// The two processes of a check, joined by a socket pair: `client(fd)` in a child, `server(fd)`
// here. Prints PASS or FAIL and returns main's exit status: 0 when both sides passed.
template <typename Client, typename Server>
int run_pair(Client client, Server server) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) return 1;
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(sv[0]);
    const bool ok = client(sv[1]);
    std::fflush(stdout);
    ::_exit(ok ? 0 : 1);
  }
  ::close(sv[1]);
  bool ok = server(sv[0]);
  ::close(sv[0]);  // a client still waiting sees EOF
  int status = 0;
  ::waitpid(child, &status, 0);
  ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

// main of a two-device check: `-a DEV` for the client (simnic0 by default), `-b DEV` for the
// server (simnic1); `client(fd, dev_a)` and `server(fd, dev_b)` run as run_pair runs them.
// An unknown option exits 2.
template <typename Client, typename Server>
int run_pair_on_devices(int argc, char** argv, Client client, Server server) {
  const char* dev_a = "simnic0";
  const char* dev_b = "simnic1";
  for (int o; (o = ::getopt(argc, argv, "a:b:")) != -1;) {
    if (o == 'a') dev_a = optarg;
    else if (o == 'b') dev_b = optarg;
    else return 2;
  }
  return run_pair([&](int fd) { return client(fd, dev_a); }, [&](int fd) { return server(fd, dev_b); });
}

}  // namespace check
