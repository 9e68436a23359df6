#include "simnic/io/host_memory_process.h"

#include <cerrno>
#include <sys/uio.h>

namespace simnic::io {

namespace {

// The kernel may move fewer bytes than asked (a partial page); loop until done or failed.
template <class Fn>
int transfer(pid_t pid, uint64_t addr, void* local, size_t len, Fn fn) {
  auto* p = static_cast<char*>(local);
  while (len) {
    iovec l{p, len};
    iovec r{reinterpret_cast<void*>(addr), len};
    ssize_t n = fn(pid, &l, 1, &r, 1, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EFAULT;
    p += n;
    addr += uint64_t(n);
    len -= size_t(n);
  }
  return 0;
}

}  // namespace

int ProcessMemory::read(pid_t pid, uint64_t addr, void* dst, size_t len) {
  return transfer(pid, addr, dst, len, ::process_vm_readv);
}

int ProcessMemory::write(pid_t pid, uint64_t addr, const void* src, size_t len) {
  return transfer(pid, addr, const_cast<void*>(src), len, ::process_vm_writev);
}

const char* explain_dma_errno(int err) {
  switch (err) {
    case EPERM:
      return "the kernel refused simnicd access to the application's memory (EPERM). The shim "
             "declares simnicd as its ptracer with prctl(PR_SET_PTRACER); if that was not enough, "
             "check /proc/sys/kernel/yama/ptrace_scope (2 or 3 forbids it: set it to 1) and that "
             "simnicd runs as the same user as the application";
    case ESRCH: return "the application has exited";
    case EFAULT: return "the address is not mapped in the application";
    default: return "unexpected error";
  }
}

}  // namespace simnic::io
