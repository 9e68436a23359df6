// What ibv_poll_cq and ibv_start_poll do when they find their CQ empty. A real RNIC has its own
// silicon; simnicd shares the CPUs with the application, so a program that busy-polls must give
// it room. A thread whose polls have found nothing keeps polling for SIMNIC_POLL_SPIN_US
// microseconds (default kDefaultSpinUs), then sleeps on its context's completion sequence
// (abi::ContextShared, a futex) until simnicd writes a CQE for the context or
// SIMNIC_POLL_SLEEP_US (default 1,000) passes: an idle program costs no CPU, and a sleeping
// poller is woken at once. It does not yield the CPU in between unless told to
// (SIMNIC_POLL_BUSY_US below the spin: the spin's rest is spent in sched_yield), because a yield
// hands the CPU to any other runnable task for a whole scheduler slice. SIMNIC_POLL_SPIN_US=off
// keeps yielding forever (simnic before issue 14). docs/performance.md has the measurements.
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "shim/shim.h"
#include "simnic/abi/shared_word.h"

namespace simnic::shim {

namespace {

struct PollTuning {
  int64_t spin_ns;
  int64_t sleep_ns;
  int64_t busy_ns;
  int64_t stream_spin_ns;  // the spin of a thread that streams (streaming() below)
};

int64_t env_us(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long long us = std::strtoll(v, &end, 10);
  return *end || us < 0 ? fallback : us;
}

// Longer than a small message's round trip through two NICs here (15-60 us), so a ping-pong's
// answer is usually found before the thread sleeps (a futex sleep and wake-up on an idle vCPU
// costs more than the answer); short enough that a thread waiting longer soon leaves the CPUs
// to the NICs. Measured against 20 us and against yielding forever: docs/performance.md.
constexpr int64_t kDefaultSpinUs = 100;

int64_t spin_ns_from_env() {
  const char* v = std::getenv("SIMNIC_POLL_SPIN_US");
  if (v && (std::strcmp(v, "off") == 0 || std::strcmp(v, "yield") == 0)) return INT64_MAX;  // never sleep
  return env_us("SIMNIC_POLL_SPIN_US", kDefaultSpinUs) * 1000;
}

// The spin keeps the CPU (no sched_yield) unless SIMNIC_POLL_BUSY_US says for how long: a NIC
// with work is woken by the kernel and preempts a spinning poller, while a yield hands the CPU
// to any runnable task for a whole slice (bench's nice-19 spinners, a build). Spinning 50 us
// and yielding until 100 (the default before 2026-11-27) ended 5-8 % of ib_write_lat and
// ib_send_lat round trips after a scheduler tick (4 ms here) on CPUs kept busy; spinning the
// whole 100 us, 0.1-0.5 % (docs/performance.md, "Polls that do not yield").
// A thread that streams (below) keeps the CPU this long only: its next completion needs its NIC
// to run, usually on this very CPU, so the spin delays what it waits for.
constexpr int64_t kDefaultStreamSpinUs = 5;

const PollTuning& tuning() {
  static const PollTuning t = [] {
    PollTuning p{spin_ns_from_env(), std::max<int64_t>(1, env_us("SIMNIC_POLL_SLEEP_US", 1000)) * 1000, 0, 0};
    const char* stream = std::getenv("SIMNIC_POLL_STREAM_SPIN_US");
    p.stream_spin_ns = (stream && std::strcmp(stream, "off") == 0) || p.spin_ns == INT64_MAX  // yield forever
                           ? p.spin_ns
                           : std::min(p.spin_ns, env_us("SIMNIC_POLL_STREAM_SPIN_US", kDefaultStreamSpinUs) * 1000);
    // The busy spin is part of the spin: none when the spin is off (yield forever, as before)
    // or when there is one CPU (the NIC could not run meanwhile).
    if (p.spin_ns != INT64_MAX && ::sysconf(_SC_NPROCESSORS_ONLN) > 1)
      p.busy_ns = std::min(p.spin_ns, env_us("SIMNIC_POLL_BUSY_US", p.spin_ns / 1000) * 1000);
    return p;
  }();
  return t;
}

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Since when this thread's polls have found nothing (0: its last poll found a CQE).
thread_local int64_t empty_since_ns = 0;
// What the thread did since: how many CQEs its last successful poll returned, how many work
// requests it has posted since.
thread_local int last_found = 0;
thread_local int posts_since_found = 0;

// A thread streams when its last poll found a batch of completions or it has posted several
// requests since (perftest's bandwidth tests: 100 posts per signaled completion, receives
// found 16 at a time); a ping-pong finds one and posts one. A streaming thread's next
// completion comes after its NIC's next turn, which the spin takes the CPU from; a ping-pong's
// comes from the peer, and the spin catches it without a wake-up.
constexpr int kStreamBatch = 2, kStreamPosts = 4;
bool streaming() { return last_found >= kStreamBatch || posts_since_found >= kStreamPosts; }

}  // namespace

uint32_t completion_sequence(ShimContext* c) { return c->page ? c->page->cqe_seq.load(std::memory_order_seq_cst) : 0; }

void note_completions_found(int found) {
  empty_since_ns = 0;
  last_found = found;
  posts_since_found = 0;
}

void note_posts(int posted) { posts_since_found += posted; }

void idle_after_empty_poll(ShimContext* c, uint32_t sequence_before) {
  const int64_t now = now_ns();
  if (!empty_since_ns) empty_since_ns = now;
  const int64_t spin_ns = streaming() ? tuning().stream_spin_ns : tuning().spin_ns;
  if (now - empty_since_ns < std::min(spin_ns, tuning().busy_ns)) {
    abi::cpu_relax();  // spin: keep the CPU, poll again at once
    return;
  }
  if (!c->page || now - empty_since_ns < spin_ns) {  // busy, or a NIC without pages
    sched_yield();
    return;
  }
  // Woken by simnicd when it writes a CQE of this context (context_page.cc).
  abi::sleep_until_moved(c->page->cqe_seq, c->page->sleepers, sequence_before, tuning().sleep_ns);
}

}  // namespace simnic::shim
