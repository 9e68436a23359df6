// simnicd's "alive" word: how the shim sees on every post, without a system call, that its NIC
// died. A word simnicd merely sets cannot say it: a killed process clears nothing. The kernel
// does clear one thing for a dead process: every robust futex on its threads' robust lists
// (set_robust_list(2); on exit, the owner TID in the word is replaced by FUTEX_OWNER_DIED).
// simnicd's main thread locks a process-shared robust mutex in a page of its own and never
// unlocks it; the shim maps that page read-only and reads the mutex's futex word: the owner's
// TID while simnicd lives, FUTEX_OWNER_DIED (no TID) from the moment its main thread has exited,
// whether it returned, crashed or was SIGKILLed. The page is sealed against writes
// (F_SEAL_FUTURE_WRITE) before any client sees it, so no client can fake a death for another or
// corrupt the robust list that simnicd's glibc walks.
#pragma once
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace simnic::abi {

constexpr size_t kDaemonAliveBytes = 4096;

struct DaemonAlive {
  pthread_mutex_t owner;  // robust, process-shared, locked by simnicd's main thread for its life
};

// The futex word of a glibc mutex: __data.__lock holds the owner's TID (robust mutexes).
inline const uint32_t* daemon_alive_word(const DaemonAlive* a) {
  return reinterpret_cast<const uint32_t*>(&a->owner.__data.__lock);
}

// The shim's check: one load of a line that never changes while simnicd lives.
inline bool daemon_alive(const DaemonAlive* a) {
  uint32_t w = __atomic_load_n(daemon_alive_word(a), __ATOMIC_ACQUIRE);
  return (w & FUTEX_TID_MASK) != 0 && !(w & FUTEX_OWNER_DIED);
}

// simnicd, on the thread that lives as long as the process (its main thread): a sealed memfd
// whose mutex this thread holds. Returns the memfd (the mapping stays for the process' life),
// or -1 with errno set.
inline int create_daemon_alive_memfd() {
  int fd = ::memfd_create("simnic-alive", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  void* p = MAP_FAILED;
  if (::ftruncate(fd, off_t(kDaemonAliveBytes)) == 0)
    p = ::mmap(nullptr, kDaemonAliveBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  auto* a = static_cast<DaemonAlive*>(p);
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&a->owner, &attr);
  pthread_mutexattr_destroy(&attr);
  int e = pthread_mutex_lock(&a->owner);  // puts it on this thread's robust list
  // Our own mapping stays writable; no new writable mapping or write() is possible after this.
  if (e == 0 && ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0)
    e = errno;
  if (e != 0) {
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

}  // namespace simnic::abi
