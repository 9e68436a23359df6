// Waiting on a 32-bit word in memory shared between processes (a futex; abi::ContextShared's
// cqe_seq): how a thread spins on it, sleeps until it moves, and how another process wakes it.
// The shim's idle pollers (shim/poll_wait.cc), simnicd's notifier (simnic/io/fd_notifier.cc)
// and the bench's floor (simnic/cli/bench_floor.cc) all wait this way.
#pragma once
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <ctime>

namespace simnic::abi {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex is a plain 32-bit word");

// A hint to the CPU that this is a spin-wait loop (x86 PAUSE, Arm YIELD): it saves power and
// lets a sibling hyper-thread run. Nothing on other architectures.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield");
#endif
}

// Sleeps while `word` still reads `seen`, for at most `timeout_ns`. The thread counts itself in
// `sleepers` before it compares, and the waker moves the word before it looks at `sleepers`
// (both sequentially consistent): either this thread sees the new value, or the waker sees it
// asleep and wakes it (wake_all). No wake-up is lost and no move waits out the timeout.
inline void sleep_until_moved(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleepers, uint32_t seen,
                              int64_t timeout_ns) {
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (word.load(std::memory_order_seq_cst) == seen) {
    timespec limit{time_t(timeout_ns / 1'000'000'000), long(timeout_ns % 1'000'000'000)};
    // Not FUTEX_PRIVATE_FLAG: the waker is another process.
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, seen, &limit, nullptr, 0);
  }
  sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

// Wakes every thread of any process asleep on `word` (after the word has moved).
inline void wake_all(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace simnic::abi
