// simnic-shared-pages-check: registered memory the NIC maps (issue 26 point 4, shim/shared_pages.cc),
// as a plain verbs program. One process, one RC QP pair between device -a and device -b. For a
// small heap buffer, a large malloc (its own mmap) and an mmap'd region: the bytes are the same
// after ibv_reg_mr as before; SEND, WRITE and READ of 64 B, 4 KiB and 200 KiB move exactly the
// bytes sent (compared). It says whether each buffer's pages are now shared (/proc/self/maps
// names the memfd "simnic-mr") so the test can hold it to what it expects. Then a fork: the
// child's writes into a registered buffer stay the child's, and the NIC still writes into the
// parent's pages after it.
//
//   simnic-shared-pages-check [-a DEV_A] [-b DEV_B] [-t]   (-t: a second thread runs during the
//                                                          registrations)
// Run it with `simnic run -- ...`.
#include <infiniband/verbs.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <getopt.h>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "check_util.h"

namespace {

using namespace check;

constexpr int kRw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
constexpr size_t kBig = 1 << 20;

struct Side : DeviceSetup {
  ibv_qp* qp = nullptr;
};

// Whether the page of `p` maps simnic's memfd now.
bool shared(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    unsigned long lo = 0, hi = 0;  // NOLINT: sscanf's %lx
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi)
      return line.find("simnic-mr") != std::string::npos;
  }
  return false;
}

bool post_recv(ibv_qp* qp, void* buf, uint32_t len, uint32_t lkey) {
  ibv_sge sge{uint64_t(uintptr_t(buf)), len, lkey};
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return ibv_post_recv(qp, &wr, &bad) == 0;
}

// A buffer registered on both sides: `a` on side A, `b` on side B, each `len` bytes.
struct Pair {
  const char* name;
  uint8_t *a, *b;
  size_t len;
  ibv_mr *ma = nullptr, *mb = nullptr;
};

// Registration keeps every byte where it was (the shim may move the pages).
bool register_pair(Side& sa, Side& sb, Pair& p) {
  fill(p.a, p.len, 11);
  fill(p.b, p.len, 12);
  p.ma = ibv_reg_mr(sa.pd, p.a, p.len, kRw);
  p.mb = ibv_reg_mr(sb.pd, p.b, p.len, kRw);
  CHECK(p.ma && p.mb, "%s: ibv_reg_mr: %s", p.name, std::strerror(errno));
  CHECK(filled(p.a, p.len, 11) && filled(p.b, p.len, 12), "%s: the bytes changed at registration", p.name);
  std::printf("%s: registered, bytes kept, pages %s\n", p.name, shared(p.a) && shared(p.b) ? "shared" : "not shared");
  return true;
}

// SEND, WRITE and READ of `n` bytes at offset `off`, every byte compared.
bool traffic(Side& sa, Side& sb, Pair& p, size_t off, uint32_t n, uint32_t seed) {
  uint8_t *a = p.a + off, *b = p.b + off;
  fill(a, n, seed);
  CHECK(post_recv(sb.qp, b, n, p.mb->lkey), "post_recv");
  CHECK(post_wait(sa.qp, sa.cq, IBV_WR_SEND, a, n, p.ma->lkey) == IBV_WC_SUCCESS, "%s: SEND %u", p.name, n);
  ibv_wc wc{};
  CHECK(poll_one(sb.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.byte_len == n, "%s: receive %u", p.name, n);
  CHECK(filled(b, n, seed), "%s: SEND of %u bytes: wrong bytes", p.name, n);
  fill(a, n, seed + 1);
  CHECK(post_wait(sa.qp, sa.cq, IBV_WR_RDMA_WRITE, a, n, p.ma->lkey, uint64_t(uintptr_t(b)), p.mb->rkey) ==
            IBV_WC_SUCCESS,
        "%s: WRITE %u", p.name, n);
  CHECK(filled(b, n, seed + 1), "%s: WRITE of %u bytes: wrong bytes", p.name, n);
  fill(b, n, seed + 2);
  CHECK(post_wait(sa.qp, sa.cq, IBV_WR_RDMA_READ, a, n, p.ma->lkey, uint64_t(uintptr_t(b)), p.mb->rkey) ==
            IBV_WC_SUCCESS,
        "%s: READ %u", p.name, n);
  CHECK(filled(a, n, seed + 2), "%s: READ of %u bytes: wrong bytes", p.name, n);
  return true;
}

// A fork after registration: the child scribbles over the registered buffer and exits; the
// parent's bytes are untouched, and a WRITE from the peer still lands in the parent's pages.
bool fork_keeps_pages_apart(Side& sa, Pair& p) {
  fill(p.b, 4096, 40);
  const pid_t child = fork();
  if (child == 0) {
    std::memset(p.b, 0xAA, 4096);
    _exit(p.b[100] == 0xAA ? 0 : 1);
  }
  int status = 0;
  CHECK(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child");
  CHECK(filled(p.b, 4096, 40), "%s: the child's writes reached the parent", p.name);
  fill(p.a, 4096, 41);
  CHECK(post_wait(sa.qp, sa.cq, IBV_WR_RDMA_WRITE, p.a, 4096, p.ma->lkey, uint64_t(uintptr_t(p.b)), p.mb->rkey) ==
            IBV_WC_SUCCESS,
        "WRITE after fork");
  CHECK(filled(p.b, 4096, 41), "%s: the WRITE after the fork did not reach the parent", p.name);
  std::printf("fork: the child's writes stayed the child's; a WRITE after it reached the parent\n");
  return true;
}

std::atomic<bool> g_stop{false};
void* idle_thread(void*) {
  while (!g_stop.load()) usleep(1000);
  return nullptr;
}

bool run(const char* dev_a, const char* dev_b, bool threaded) {
  pthread_t thread{};
  if (threaded) CHECK(pthread_create(&thread, nullptr, idle_thread, nullptr) == 0, "pthread_create");
  Side sa, sb;
  CHECK(sa.open(dev_a, 16) && sb.open(dev_b, 16), "open");
  sa.qp = create_qp(sa.pd, sa.cq, IBV_QPT_RC, 8, 1);
  sb.qp = create_qp(sb.pd, sb.cq, IBV_QPT_RC, 8, 1);
  CHECK(sa.qp && sb.qp, "create_qp");
  CHECK(connect_qp(sa.qp, sb.qp->qp_num, sb.gid, kRw) && connect_qp(sb.qp, sa.qp->qp_num, sa.gid, kRw), "connect");
  auto* mapped =
      static_cast<uint8_t*>(mmap(nullptr, 2 * kBig, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  CHECK(mapped != MAP_FAILED, "mmap");
  Pair pairs[] = {
      {"heap 8 KiB", static_cast<uint8_t*>(std::malloc(8192)), static_cast<uint8_t*>(std::malloc(8192)), 8192},
      {"malloc 1 MiB", static_cast<uint8_t*>(std::malloc(kBig)), static_cast<uint8_t*>(std::malloc(kBig)), kBig},
      {"mmap 1 MiB + 100", mapped + 100, mapped + kBig + 100, kBig - 100},
  };
  for (Pair& p : pairs) CHECK(p.a && p.b && register_pair(sa, sb, p), "register %s", p.name);
  if (threaded) g_stop = true, pthread_join(thread, nullptr);
  uint32_t seed = 100;
  for (Pair& p : pairs)
    for (uint32_t n : {64u, 4096u, 200u * 1024u})
      if (n + 37 <= p.len) CHECK(traffic(sa, sb, p, 37, n, seed += 3), "traffic");
  std::printf("SEND, WRITE and READ of 64 B, 4 KiB and 200 KiB through every buffer: bytes compared\n");
  CHECK(fork_keeps_pages_apart(sa, pairs[1]), "fork");
  for (Pair& p : pairs) CHECK(ibv_dereg_mr(p.ma) == 0 && ibv_dereg_mr(p.mb) == 0, "dereg");
  // Deregistered, the memory is the program's as before.
  std::memset(pairs[1].a, 5, kBig);
  CHECK(pairs[1].a[kBig - 1] == 5 && pairs[1].a[0] == 5, "the buffer after ibv_dereg_mr");
  for (Pair& p : pairs)
    if (p.a != mapped + 100) std::free(p.a), std::free(p.b);
  munmap(mapped, 2 * kBig);
  std::printf("PASS\n");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const char *a = "simnic0", *b = "simnic1";
  bool threaded = false;
  for (int c; (c = getopt(argc, argv, "a:b:t")) != -1;) {
    if (c == 'a') a = optarg;
    else if (c == 'b') b = optarg;
    else if (c == 't') threaded = true;
    else return 2;
  }
  return run(a, b, threaded) ? 0 : 1;
}
