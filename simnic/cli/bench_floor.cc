// The floor of simnic's shape (issue 14): what four processes arranged as simnic is, with none
// of its protocol, move and answer on this machine, measured in the same run as everything else.
//
//   application A --eventfd--> NIC A --UDP--> NIC B --process_vm_writev--> application B
//                  (process_vm_readv)                  (+ a word in shared memory = the CQE)
//
// The NIC processes run in the bench's own session (as `simnic up` starts simnicd), reach the
// applications' memory only with process_vm_readv/writev, sleep in epoll, and wake a waiting
// application with a futex; the applications spin 50 µs for an answer before they sleep (the
// shim's default). There are no headers beyond an 8-byte sequence word, no ICRC, no ACK
// protocol beyond one datagram per message for flow control, no queues, no verbs. simnic cannot
// be faster than this without changing its shape; floor / kernel is what the shape itself costs
// (docs/performance.md, "The floor of simnic's shape"). Three measurements: a ping-pong
// (floor_lat), a stream of large messages (floor_bw) and a stream of small messages posted one
// by one, each with its doorbell, as ib_write_bw posts them (floor_rate, issue 26 point 2).
//
// The same three again for the mapped shape (issue 26 point 4: floor_map_lat, floor_map_bw,
// floor_map_rate), where the application's registered memory lives in a sealed memfd that its
// NIC maps as well:
//
//   application A --eventfd--> NIC A --UDP--> NIC B --memcpy--> application B
//   (memfd, MAP_SHARED)  (sendmsg straight from           (memfd, MAP_SHARED)
//                         the mapping: no NIC copy)
//
// Everything else is as above. Each byte is copied three times (mapping -> socket by the
// sender's kernel, socket -> NIC B, NIC B -> mapping) where the process_vm_* shape copies it
// four times and TCP twice.
//
// And the latency of the direct shape (floor_direct_lat), where a post sends its packet itself
// from the NIC's socket under a lent PSN (docs/architecture.md, "Posts that send themselves"):
//
//   application A --UDP (from the mapping)--> NIC B --memcpy--> application B
//
// one process hand-off per one-way message where the other shapes have two.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "simnic/abi/shared_word.h"
#include "simnic/cli/bench.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace simnic::cli::bench {
namespace {

constexpr size_t kMaxMessage = 1 << 20;
constexpr size_t kChunk = 4096;  // payload per datagram, as simnic's 4096-byte MTU
constexpr size_t kHeader = 8;    // message number and offset
constexpr size_t kDatagram = kHeader + kChunk;
constexpr size_t kGsoRun = 15;       // datagrams per GSO send (under UDP's 64 KiB)
constexpr int kWindow = 16;          // messages in flight, as simnic's 1 MiB per-QP window
constexpr int64_t kSpinNs = 50'000;  // the shim's busy spin before a poller sleeps

// Application memory in the process_vm_* shape: the same address in every process after fork,
// private to each. g_app_send also holds, in every process, the pattern floor_bw moves, which
// the receiving NIC compares with what landed.
alignas(4096) uint8_t g_app_send[kMaxMessage];
alignas(4096) uint8_t g_app_recv[kMaxMessage];

// One application's buffers: what it sends from and what its NIC writes into.
struct AppMemory {
  uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
};

// Shared by the four processes: one "CQ" word per application, and the result.
struct Shared {
  struct Side {
    alignas(64) std::atomic<uint32_t> delivered{0};  // messages written into the application
    std::atomic<uint32_t> sleepers{0};
  } side[2];
  std::atomic<int> go{0};
  std::atomic<int> failed{0};         // a process could not do its part: the others stop waiting
  std::atomic<uint32_t> posted{0};    // rate: messages application 0 has posted (the SQ's tail)
  double result = NAN;                // lat: typical one way, µs; bw: MB/s; rate: messages/s
  double avg_us = NAN, p99_us = NAN;  // lat only
};

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// As the shim waits for a CQE: spin, then sleep on the word until the NIC wakes it. False when
// another process has given up.
bool wait_delivered(const Shared& all, Shared::Side& s, uint32_t want) {
  const int64_t t0 = now_ns();
  while (s.delivered.load(std::memory_order_acquire) < want) {
    if (all.failed.load(std::memory_order_relaxed)) return false;
    if (now_ns() - t0 < kSpinNs) {
      abi::cpu_relax();
      continue;
    }
    const uint32_t seen = s.delivered.load(std::memory_order_seq_cst);
    if (seen < want) abi::sleep_until_moved(s.delivered, s.sleepers, seen, 1'000'000);
  }
  return true;
}

void deliver(Shared::Side& s, uint32_t count) {
  s.delivered.fetch_add(count, std::memory_order_seq_cst);
  if (s.sleepers.load(std::memory_order_seq_cst)) abi::wake_all(&s.delivered);
}

int udp_socket(sockaddr_in* bound) {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int big = 16 << 20;
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *bound = a;
  return fd;
}

// What each of the four processes needs; filled before the forks.
struct Setup {
  Shared* shared = nullptr;
  int doorbell[2] = {-1, -1};
  int sock[2] = {-1, -1};
  sockaddr_in addr[2]{};
  pid_t app[2] = {0, 0};
  size_t size = 0;
  long count = 0;
  bool gso = false;
  int window = 0;       // rate: messages in flight (perftest's -t)
  bool mapped = false;  // NIC i reaches mem[i] through a mapping it shares, not process_vm_*
  bool direct = false;  // latency: application i sends its ping itself (kDirect)
  AppMemory mem[2];     // application i's buffers, at these addresses in application i and NIC i
};

// ---- how a NIC reaches its application's memory: process_vm_*, or the shared mapping ----

// Copies local[k] into remote[k] (equal lengths) in application i: one process_vm_writev, or
// memcpy into the mapping NIC i shares with it. False when the bytes did not all land.
bool write_into_app(const Setup& s, int i, const iovec* local, const iovec* remote, size_t n) {
  if (s.mapped) {
    for (size_t k = 0; k < n; ++k) std::memcpy(remote[k].iov_base, local[k].iov_base, local[k].iov_len);
    return true;
  }
  size_t want = 0;
  for (size_t k = 0; k < n; ++k) want += local[k].iov_len;
  return ::process_vm_writev(s.app[i], local, n, remote, n, 0) == ssize_t(want);
}

// `len` bytes of application i's memory at `from`, as NIC i can read them; empty when it cannot.
std::vector<uint8_t> read_app(const Setup& s, int i, const uint8_t* from, size_t len) {
  std::vector<uint8_t> got(len);
  if (s.mapped) return std::memcpy(got.data(), from, len), got;
  iovec local{got.data(), len}, remote{const_cast<uint8_t*>(from), len};
  if (::process_vm_readv(s.app[i], &local, 1, &remote, 1, 0) != ssize_t(len)) got.clear();
  return got;
}

// ---- latency: a ping-pong of `size` bytes, application 0 measuring round trips ----

void latency_app(const Setup& s, int i) {
  Shared::Side& me = s.shared->side[i];
  std::vector<int64_t> rtt;
  rtt.reserve(size_t(s.count));
  for (long k = 0; k < s.count; ++k) {
    const int64_t t0 = now_ns();
    if (i == 1 && !wait_delivered(*s.shared, me, uint32_t(k + 1))) return;  // the ping, then the pong
    if (k > 0 || i == 1) {  // what arrived is what the other side sent: else no figure
      const uint8_t want = uint8_t(i == 1 ? k : k - 1);
      if (s.mem[i].recv[0] != want || s.mem[i].recv[s.size - 1] != want) return (void)s.shared->failed.store(1);
    }
    std::memset(s.mem[i].send, int(k), s.size);
    if (s.direct) {  // the post sends the packet itself, from the NIC's socket
      ::sendto(s.sock[i], s.mem[i].send, s.size, 0, reinterpret_cast<const sockaddr*>(&s.addr[1 - i]),
               sizeof s.addr[1 - i]);
    } else {
      uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(s.doorbell[i], &one, sizeof one);
    }
    if (i == 0 && !wait_delivered(*s.shared, me, uint32_t(k + 1))) return;
    if (i == 0) rtt.push_back(now_ns() - t0);
  }
  if (i == 0 && !rtt.empty()) {  // one way = half a round trip, in µs, as perftest reports
    std::sort(rtt.begin(), rtt.end());
    double sum = 0;
    for (int64_t t : rtt) sum += double(t);
    s.shared->avg_us = sum / double(rtt.size()) / 2e3;
    s.shared->p99_us = double(rtt[rtt.size() * 99 / 100]) / 2e3;
    s.shared->result = double(rtt[rtt.size() / 2]) / 2e3;
  }
}

// The ping NIC i's application posted: read into `buf` with process_vm_readv and sent from
// there, or sent straight from the mapping. False when the application cannot be read.
bool send_ping(const Setup& s, int i, std::vector<uint8_t>& buf) {
  const uint8_t* payload = s.mem[i].send;
  if (!s.mapped) {
    iovec local{buf.data(), s.size}, remote{s.mem[i].send, s.size};
    if (::process_vm_readv(s.app[i], &local, 1, &remote, 1, 0) != ssize_t(s.size)) return false;  // e.g. Yama
    payload = buf.data();
  }
  ::sendto(s.sock[i], payload, s.size, 0, reinterpret_cast<const sockaddr*>(&s.addr[1 - i]), sizeof s.addr[1 - i]);
  return true;
}

void latency_nic(const Setup& s, int i) {
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  for (int fd : {s.doorbell[i], s.sock[i]}) {
    epoll_event ev{EPOLLIN, {.fd = fd}};
    ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  }
  std::vector<uint8_t> buf(s.size + kHeader);
  for (;;) {
    epoll_event evs[2];
    const int n = ::epoll_wait(ep, evs, 2, -1);
    for (int e = 0; e < n; ++e) {
      if (evs[e].data.fd == s.doorbell[i]) {
        uint64_t rings = 0;
        if (::read(s.doorbell[i], &rings, sizeof rings) != sizeof rings) continue;
        for (uint64_t r = 0; r < rings; ++r)
          if (!send_ping(s, i, buf)) return (void)s.shared->failed.store(1);  // no figure
      } else {
        ssize_t got;
        while ((got = ::recv(s.sock[i], buf.data(), buf.size(), MSG_DONTWAIT)) > 0) {
          iovec local{buf.data(), size_t(got)}, remote{s.mem[i].recv, size_t(got)};
          if (!write_into_app(s, i, &local, &remote, 1)) return (void)s.shared->failed.store(1);
          deliver(s.shared->side[i], 1);
        }
      }
    }
  }
}

// ---- bandwidth: `count` messages of `size` bytes from application 0 into application 1 ----

// Copies the n iovecs of `io` into `out`, each run of iovecs contiguous in memory as one (the
// process_vm_* shape's staged datagrams lie end to end: one iovec per GSO send, as ever).
// Returns how many `out` holds.
size_t coalesce(const iovec* io, size_t n, iovec* out) {
  size_t m = 0;
  for (size_t k = 0; k < n; ++k) {
    if (m > 0 && static_cast<uint8_t*>(out[m - 1].iov_base) + out[m - 1].iov_len == io[k].iov_base)
      out[m - 1].iov_len += io[k].iov_len;
    else out[m++] = io[k];
  }
  return m;
}

// Sends datagrams described by `io`, `per` iovecs each: GSO sends of up to kGsoRun datagrams
// (the iovecs of a run gathered into one buffer that the kernel cuts at kDatagram), or one
// sendmmsg of them all.
void send_datagrams(const Setup& s, std::vector<iovec>& io, size_t per) {
  const size_t datagrams = io.size() / per;
  const sockaddr* to = reinterpret_cast<const sockaddr*>(&s.addr[1]);
  if (s.gso) {
    for (size_t p = 0; p < datagrams; p += kGsoRun) {
      const size_t n = std::min(kGsoRun, datagrams - p);
      iovec run[2 * kGsoRun];
      const size_t parts = coalesce(&io[p * per], n * per, run);
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(uint16_t))] = {};
      msghdr mh{const_cast<sockaddr*>(to), sizeof s.addr[1], run, parts, control, sizeof control, 0};
      cmsghdr* c = CMSG_FIRSTHDR(&mh);
      c->cmsg_level = SOL_UDP, c->cmsg_type = UDP_SEGMENT, c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      const uint16_t seg = uint16_t(kDatagram);
      std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
      ::sendmsg(s.sock[0], &mh, 0);
    }
    return;
  }
  std::vector<mmsghdr> mm(datagrams);
  for (size_t p = 0; p < datagrams; ++p)
    mm[p].msg_hdr = msghdr{const_cast<sockaddr*>(to), sizeof s.addr[1], &io[p * per], per, nullptr, 0, 0};
  for (size_t sent = 0; sent < datagrams;) {
    const int n = ::sendmmsg(s.sock[0], mm.data() + sent, unsigned(datagrams - sent), 0);
    if (n <= 0) break;
    sent += size_t(n);
  }
}

// Sends one message of s.size bytes as datagrams of an 8-byte header and up to kChunk bytes.
// The process_vm_* shape reads the message straight into datagram-shaped slots of `stage` (one
// process_vm_readv) and sends from there; the mapped shape sends each datagram from two
// iovecs, its header in `stage` and its payload straight from the mapping (no NIC-side copy:
// the sending kernel's copy into the socket buffer is the only one on this side).
void send_message(const Setup& s, std::vector<uint8_t>& stage, uint32_t msg) {
  const size_t pieces = (s.size + kChunk - 1) / kChunk;
  std::vector<iovec> local(pieces), io;
  io.reserve(2 * pieces);
  for (size_t p = 0; p < pieces; ++p) {
    uint8_t* slot = stage.data() + p * kDatagram;
    const uint32_t header[2] = {msg, uint32_t(p * kChunk)};
    std::memcpy(slot, header, kHeader);
    const size_t len = std::min(kChunk, s.size - p * kChunk);
    local[p] = {slot + kHeader, len};
    if (s.mapped) {
      io.push_back({slot, kHeader});
      io.push_back({s.mem[0].send + p * kChunk, len});
    } else {
      io.push_back({slot, kHeader + len});
    }
  }
  if (!s.mapped) {
    iovec remote{s.mem[0].send, s.size};
    ::process_vm_readv(s.app[0], local.data(), pieces, &remote, 1, 0);
  }
  send_datagrams(s, io, s.mapped ? 2 : 1);
}

// simnic's per-QP window (kWindow messages), or less when the receiving socket's buffer could
// not be made large (no SO_RCVBUFFORCE without root): at most half of it in flight, so that no
// datagram is dropped (simnic's peer window does the same, docs/congestion.md).
long messages_in_flight(const Setup& s) {
  int rcvbuf = 0;
  socklen_t len = sizeof rcvbuf;
  ::getsockopt(s.sock[1], SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len);  // the kernel's figure: twice the payload
  return std::clamp<long>(long(size_t(rcvbuf) / 4 / s.size), 1, kWindow);
}

void bandwidth_sender(const Setup& s) {
  timeval limit{2, 0};  // a lost datagram ends the measurement instead of hanging it
  ::setsockopt(s.sock[0], SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  std::vector<uint8_t> stage(((s.size + kChunk - 1) / kChunk) * kDatagram);
  const long window = messages_in_flight(s);
  long acked = 0, sent = 0;
  const int64_t t0 = now_ns();
  while (acked < s.count) {
    if (sent < s.count && sent - acked < window) {
      send_message(s, stage, uint32_t(sent++));
      continue;
    }
    uint32_t ack = 0;
    if (::recv(s.sock[0], &ack, sizeof ack, 0) != sizeof ack) return;  // no figure
    ++acked;
  }
  s.shared->result = double(s.size) * double(s.count) / (double(now_ns() - t0) / 1e9) / 1e6;
}

// After the last message: application 1 holds what application 0 sent (our copy of the
// source pattern came with the fork), or the floor reports no figure.
bool landed_intact(const Setup& s) {
  const std::vector<uint8_t> got = read_app(s, 1, s.mem[1].recv, s.size);
  return got.size() == s.size && std::memcmp(got.data(), g_app_send, s.size) == 0;
}

// Receives datagrams (whole GRO buffers when GSO is on), writes every payload into application
// 1 (one process_vm_writev per receive, or a memcpy per payload into the mapping), and
// acknowledges each completed message.
void bandwidth_receiver(const Setup& s) {
  if (s.gso) {
    int on = 1;
    ::setsockopt(s.sock[1], SOL_UDP, UDP_GRO, &on, sizeof on);
  }
  std::vector<uint8_t> buf(65536 + kDatagram);
  std::vector<iovec> local, remote;
  for (;;) {
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    iovec io{buf.data(), buf.size()};
    msghdr mh{nullptr, 0, &io, 1, control, sizeof control, 0};
    const ssize_t got = ::recvmsg(s.sock[1], &mh, 0);
    if (got <= 0) continue;
    size_t seg = size_t(got);
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
      if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) seg = size_t(*reinterpret_cast<int*>(CMSG_DATA(c)));
    local.clear(), remote.clear();
    std::vector<uint32_t> completed;
    for (size_t off = 0; off + kHeader <= size_t(got); off += seg) {
      const size_t len = std::min(seg, size_t(got) - off) - kHeader;
      uint32_t header[2];
      std::memcpy(header, buf.data() + off, kHeader);
      if (header[1] + len > s.size) continue;
      local.push_back({buf.data() + off + kHeader, len});
      remote.push_back({s.mem[1].recv + header[1], len});
      if (header[1] + len == s.size) completed.push_back(header[0]);
    }
    if (!local.empty() && !write_into_app(s, 1, local.data(), remote.data(), local.size()))
      return;  // no ACK: the sender gives up, no figure
    for (uint32_t msg : completed)
      if (msg + 1 == uint32_t(s.count) && !landed_intact(s)) return;
    for (uint32_t msg : completed)
      ::sendto(s.sock[1], &msg, sizeof msg, 0, reinterpret_cast<const sockaddr*>(&s.addr[0]), sizeof s.addr[0]);
  }
}

// ---- message rate: `count` small messages posted one by one by application 0 ----
//
// As perftest's ib_write_bw posts: application 0 writes each message into a slot of its memory,
// moves the SQ's tail (a word in shared memory, as simnic's rings are) and rings the doorbell
// (one eventfd write per post, as the shim's ibv_post_send); it keeps `window` messages in
// flight and waits for completions as the shim waits for CQEs. NIC 0 takes every message posted
// so far at once (one process_vm_readv and one sendmmsg per batch: batching that simnic's shape
// allows), NIC 1 receives a batch (recvmmsg), writes it into application 1 with one
// process_vm_writev and acknowledges it with one datagram, which NIC 0 turns into completions.
// In the mapped shape NIC 0's sendmmsg sends straight from application 0's slots and NIC 1
// copies each message into its slot with memcpy. An RDMA WRITE's responder application does
// nothing per message, and neither does this one.

constexpr size_t kRateBatch = 64;  // datagrams per sendmmsg, recvmmsg and process_vm_* call

// Byte j of message k: a message written into the wrong slot, twice or not at all shows.
uint8_t rate_byte(uint32_t k, size_t j) { return uint8_t(k * 31 + j * 7 + 1); }
uint8_t* rate_slot(uint8_t* ring, const Setup& s, uint32_t k) { return ring + size_t(k % uint32_t(s.window)) * s.size; }

void rate_app(const Setup& s) {
  Shared::Side& me = s.shared->side[0];
  const int64_t t0 = now_ns();
  for (uint32_t k = 0; k < uint32_t(s.count); ++k) {
    if (k >= uint32_t(s.window) && !wait_delivered(*s.shared, me, k - uint32_t(s.window) + 1)) return;
    uint8_t* slot = rate_slot(s.mem[0].send, s, k);
    for (size_t j = 0; j < s.size; ++j) slot[j] = rate_byte(k, j);
    s.shared->posted.store(k + 1, std::memory_order_release);
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(s.doorbell[0], &one, sizeof one);
  }
  if (!wait_delivered(*s.shared, me, uint32_t(s.count))) return;
  s.shared->result = double(s.count) / (double(now_ns() - t0) / 1e9);
}

// Sends every message posted since the last call: read into `stage` with one process_vm_readv
// per batch, or straight from the mapped slots. False when application 0 cannot be read.
bool send_posted(const Setup& s, std::vector<uint8_t>& stage, uint32_t* sent) {
  const uint32_t posted = s.shared->posted.load(std::memory_order_acquire);
  const sockaddr* to = reinterpret_cast<const sockaddr*>(&s.addr[1]);
  while (*sent < posted) {
    const size_t n = std::min<size_t>(kRateBatch, posted - *sent);
    iovec local[kRateBatch], remote[kRateBatch];
    mmsghdr mm[kRateBatch];
    for (size_t i = 0; i < n; ++i) {
      remote[i] = {rate_slot(s.mem[0].send, s, *sent + uint32_t(i)), s.size};
      local[i] = s.mapped ? remote[i] : iovec{stage.data() + i * s.size, s.size};
      mm[i] = {};
      mm[i].msg_hdr = msghdr{const_cast<sockaddr*>(to), sizeof s.addr[1], &local[i], 1, nullptr, 0, 0};
    }
    if (!s.mapped && ::process_vm_readv(s.app[0], local, n, remote, n, 0) != ssize_t(n * s.size)) return false;
    for (size_t done = 0; done < n;) {
      const int k = ::sendmmsg(s.sock[0], mm + done, unsigned(n - done), 0);
      if (k <= 0) return false;
      done += size_t(k);
    }
    *sent += uint32_t(n);
  }
  return true;
}

void rate_sender(const Setup& s) {
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  for (int fd : {s.doorbell[0], s.sock[0]}) {
    epoll_event ev{EPOLLIN, {.fd = fd}};
    ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  }
  std::vector<uint8_t> stage(kRateBatch * s.size);
  uint32_t sent = 0, acked = 0;
  for (;;) {
    epoll_event evs[2];
    const int n = ::epoll_wait(ep, evs, 2, -1);
    for (int e = 0; e < n; ++e) {
      if (evs[e].data.fd == s.doorbell[0]) {
        uint64_t rings = 0;
        [[maybe_unused]] ssize_t r = ::read(s.doorbell[0], &rings, sizeof rings);
        if (!send_posted(s, stage, &sent)) return (void)s.shared->failed.store(1);
        continue;
      }
      uint32_t received = 0;  // the receiving NIC's count of messages written: a cumulative ACK
      while (::recv(s.sock[0], &received, sizeof received, MSG_DONTWAIT) == sizeof received)
        if (received > acked) deliver(s.shared->side[0], received - acked), acked = received;
    }
  }
}

// After the last message: application 1's slots hold the last `window` messages, each where
// its number puts it.
bool rate_landed_intact(const Setup& s) {
  std::vector<uint8_t> got = read_app(s, 1, s.mem[1].recv, size_t(s.window) * s.size);
  if (got.size() != size_t(s.window) * s.size) return false;
  for (uint32_t k = uint32_t(std::max<long>(0, s.count - s.window)); k < uint32_t(s.count); ++k)
    for (size_t j = 0; j < s.size; ++j)
      if (rate_slot(got.data(), s, k)[j] != rate_byte(k, j)) return false;
  return true;
}

void rate_receiver(const Setup& s) {
  std::vector<uint8_t> buf(kRateBatch * s.size);
  iovec local[kRateBatch], remote[kRateBatch];
  mmsghdr mm[kRateBatch];
  uint32_t written = 0;
  for (;;) {
    for (size_t i = 0; i < kRateBatch; ++i) {
      local[i] = {buf.data() + i * s.size, s.size};
      mm[i] = {};
      mm[i].msg_hdr.msg_iov = &local[i], mm[i].msg_hdr.msg_iovlen = 1;
    }
    const int n = ::recvmmsg(s.sock[1], mm, kRateBatch, MSG_WAITFORONE, nullptr);
    if (n <= 0) continue;
    for (int i = 0; i < n; ++i) {
      if (mm[i].msg_len != s.size) return (void)s.shared->failed.store(1);
      remote[i] = {rate_slot(s.mem[1].recv, s, written + uint32_t(i)), s.size};
    }
    if (!write_into_app(s, 1, local, remote, size_t(n))) return (void)s.shared->failed.store(1);
    written += uint32_t(n);
    if (written == uint32_t(s.count) && !rate_landed_intact(s)) return (void)s.shared->failed.store(1);
    ::sendto(s.sock[1], &written, sizeof written, 0, reinterpret_cast<const sockaddr*>(&s.addr[0]), sizeof s.addr[0]);
  }
}

// ---- the four processes ----

pid_t fork_child(const std::function<void()>& body) {
  pid_t pid = ::fork();
  if (pid != 0) {
    if (pid > 0) track_pid(pid);
    return pid;
  }
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);  // the NIC processes read and write our memory
  body();
  ::_exit(0);
}

enum class Shape { kLatency, kBandwidth, kRate };

// What NIC i does in `shape`.
void run_nic(Shape shape, const Setup& s, int i) {
  if (shape == Shape::kLatency) return latency_nic(s, i);
  if (shape == Shape::kBandwidth) return i == 0 ? bandwidth_sender(s) : bandwidth_receiver(s);
  return i == 0 ? rate_sender(s) : rate_receiver(s);
}

// The mapped shape's application memory: one sealed memfd (as the shim's registered memory is
// to be) holding application i's send and receive buffers in region i, mapped MAP_SHARED before
// the forks, so that application i and NIC i reach the same pages at the same addresses.
// MAP_POPULATE: the pages exist before the first message, as the old shape's do by then.
constexpr size_t kMappedBytes = 4 * kMaxMessage;

uint8_t* map_app_memory(Setup* s) {
  const int fd = ::memfd_create("simnic-floor", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return nullptr;
  void* base = MAP_FAILED;
  if (::ftruncate(fd, off_t(kMappedBytes)) == 0 &&
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0)
    base = ::mmap(nullptr, kMappedBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  ::close(fd);  // the mapping keeps the memory
  if (base == MAP_FAILED) return nullptr;
  uint8_t* b = static_cast<uint8_t*>(base);
  for (int i = 0; i < 2; ++i) s->mem[i] = {b + 2 * size_t(i) * kMaxMessage, b + (2 * size_t(i) + 1) * kMaxMessage};
  return b;
}

// Application memory for `path`, with the pattern floor_bw moves in application 0's send
// buffer. Returns the mapping to unmap afterwards (null for process_vm_*); false when the
// mapped shape's memory could not be made.
bool place_app_memory(FloorPath path, Setup* s, uint8_t** mapping) {
  for (size_t i = 0; i < s->size; ++i) g_app_send[i] = uint8_t(i * 7 + 1);  // what bandwidth moves
  *mapping = nullptr;
  s->mapped = path != FloorPath::kProcessVm;
  s->direct = path == FloorPath::kDirect;
  if (!s->mapped) {
    for (AppMemory& m : s->mem) m = {g_app_send, g_app_recv};  // private to each process after fork
    return true;
  }
  if (!(*mapping = map_app_memory(s))) return false;
  std::memcpy(s->mem[0].send, g_app_send, s->size);
  return true;
}

// Runs the four processes; the measuring one (application 0 for latency and rate, NIC 0 for
// bandwidth) leaves its figure in shared memory. NaN when there is none within `limit`.
double run_floor(Shape shape, FloorPath path, size_t size, long count, bool gso, std::chrono::milliseconds limit,
                 std::pair<double, double>* stats = nullptr, int window = 0) {
  const bool latency = shape == Shape::kLatency;
  if (size == 0 || size > kMaxMessage || (latency && size > kChunk)) return NAN;
  if (path == FloorPath::kDirect && !latency) return NAN;  // streams go through the NIC
  if (shape == Shape::kRate && (window <= 0 || size_t(window) * size > kMaxMessage)) return NAN;
  void* mem = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return NAN;
  Setup s;
  s.shared = new (mem) Shared;
  s.size = size, s.count = count, s.gso = gso, s.window = window;
  uint8_t* mapping = nullptr;
  if (!place_app_memory(path, &s, &mapping)) return ::munmap(mem, sizeof(Shared)), NAN;
  for (int i = 0; i < 2; ++i) {
    s.doorbell[i] = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    s.sock[i] = udp_socket(&s.addr[i]);
  }
  auto wait_go = [&] {
    while (!s.shared->go.load()) ::usleep(1000);
  };
  std::vector<pid_t> pids;
  for (int i = 0; i < 2; ++i) {
    const bool measures = shape != Shape::kBandwidth && i == 0;
    s.app[i] = fork_child([&, i, measures] {
      wait_go();
      if (latency) latency_app(s, i);
      if (shape == Shape::kRate && i == 0) rate_app(s);
      if (!measures)
        for (;;) ::pause();  // holds its memory for the NICs until killed
    });
    pids.push_back(s.app[i]);
  }
  pid_t measurer = shape != Shape::kBandwidth ? s.app[0] : 0;
  for (int i = 0; i < 2; ++i) {
    pid_t nic = fork_child([&, i] {
      wait_go();
      run_nic(shape, s, i);
    });
    pids.push_back(nic);
    if (shape == Shape::kBandwidth && i == 0) measurer = nic;
  }
  s.shared->go.store(1);
  wait_for(measurer, limit);
  const double result = s.shared->result;
  if (latency && stats) *stats = {s.shared->avg_us, s.shared->p99_us};
  for (pid_t pid : pids) kill_and_reap(pid);
  for (int i = 0; i < 2; ++i) ::close(s.doorbell[i]), ::close(s.sock[i]);
  ::munmap(mem, sizeof(Shared));
  if (mapping) ::munmap(mapping, kMappedBytes);
  return result;
}

// "floor_lat", or "floor_map_lat" for the mapped shape: the names the table, the JSON and the
// comparison with earlier runs know them by.
std::string floor_name(FloorPath path, const std::string& kind) {
  static const char* const kPrefix[] = {"floor_", "floor_map_", "floor_direct_"};
  return kPrefix[int(path)] + kind;
}

// The progress line of one floor measurement.
std::string floor_step(FloorPath path, const std::string& what) {
  static const char* const kShape[] = {" (simnic's shape", " (the mapped shape: memcpy, no process_vm_*",
                                       " (the direct shape: the application sends, no doorbell"};
  return what + kShape[int(path)] + ", no protocol)";
}

Figure floor_figure(const std::string& test, const std::string& kind, uint64_t size, long count, double value) {
  Figure f;
  f.test = test, f.kind = kind, f.size = size, f.iterations = count, f.value = value;
  if (!std::isfinite(value)) f.status = "failed: the floor measurement did not finish";
  return f;
}

// The latency floor at 2 B, the best of five runs: where the scheduler happens to place four
// processes on two CPUs moves a run's typical latency by a factor of two or more, and a floor
// is the least the shape needs.
Figure best_floor_lat(FloorPath path, long iterations) {
  Figure f = floor_figure(floor_name(path, "lat"), "lat", 2, iterations, NAN);
  for (int run = 0; run < 5 && !interrupted(); ++run) {
    double avg = NAN, p99 = NAN;
    const double typical = floor_lat(path, 2, iterations, &avg, &p99);
    if (std::isfinite(typical) && !(typical >= f.value)) f.value = typical, f.avg_us = avg, f.p99_us = p99;
  }
  if (std::isfinite(f.value)) f.status = "ok";
  return f;
}

// The rate floor at 64 B, ib_write_bw's message-rate row: perftest's default send queue depth
// (128) in flight, the best of three runs (the placement of four processes on two CPUs moves
// a run, as it moves floor_lat).
Figure best_floor_rate(FloorPath path, long messages) {
  constexpr int kPerftestTxDepth = 128;
  Figure f = floor_figure(floor_name(path, "rate"), "rate", 64, messages, NAN);
  for (int run = 0; run < 3 && !interrupted(); ++run) {
    const double rate = floor_rate(path, 64, messages, kPerftestTxDepth);
    if (std::isfinite(rate) && !(rate <= f.value)) f.value = rate;
  }
  if (std::isfinite(f.value)) f.status = "ok";
  return f;
}

}  // namespace

double floor_lat(FloorPath path, uint64_t size, long iterations, double* avg_us, double* p99_us) {
  std::pair<double, double> stats{NAN, NAN};
  const double typical = run_floor(Shape::kLatency, path, size, iterations, false, std::chrono::seconds(60), &stats);
  if (avg_us) *avg_us = stats.first;
  if (p99_us) *p99_us = stats.second;
  return typical;
}

double floor_bw(FloorPath path, uint64_t size, long messages, bool gso) {
  return run_floor(Shape::kBandwidth, path, size, messages, gso, std::chrono::seconds(60));
}

double floor_rate(FloorPath path, uint64_t size, long messages, int window) {
  return run_floor(Shape::kRate, path, size, messages, false, std::chrono::seconds(60), nullptr, window);
}

// Each measurement in both shapes, one after the other, so that the two figures of a pair see
// the same machine.
std::vector<Figure> measure_floor(bool quick, bool gso, StepFn step) {
  constexpr FloorPath kPaths[] = {FloorPath::kProcessVm, FloorPath::kMapped};
  std::vector<Figure> out;
  const long lat_iters = quick ? 1000 : 4000, bw_msgs = quick ? 4000 : 20000;
  for (FloorPath path : {FloorPath::kProcessVm, FloorPath::kMapped, FloorPath::kDirect}) {
    step(floor_step(path, floor_name(path, "lat") + " 2 B, best of 5"));
    if (!interrupted()) out.push_back(best_floor_lat(path, lat_iters));
  }
  for (FloorPath path : kPaths) {
    step(floor_step(path, floor_name(path, "bw") + " 64 KiB"));
    const double mbs = floor_bw(path, 65536, bw_msgs, gso);
    if (!interrupted()) out.push_back(floor_figure(floor_name(path, "bw"), "bw", 65536, bw_msgs, mbs));
  }
  for (FloorPath path : kPaths) {
    step(floor_step(path, floor_name(path, "rate") + " 64 B, best of 3"));
    if (!interrupted()) out.push_back(best_floor_rate(path, quick ? 20000 : 100000));
  }
  return out;
}

}  // namespace simnic::cli::bench
