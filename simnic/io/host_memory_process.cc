#include "simnic/io/host_memory_process.h"

#include "simnic/io/proc_stat.h"

#include <sys/uio.h>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

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

// Where the bytes are in simnicd's view of the pages, counted as moved that way; nullptr (the
// caller goes by pid and counts that) when no view covers them.
uint8_t* ProcessMemory::through_view(pid_t pid, uint64_t addr, size_t len) {
  uint8_t* view = views_.find(pid, addr, len);
  if (view) copied_shared_ += len;
  return view;
}

int ProcessMemory::read(pid_t pid, uint64_t addr, void* dst, size_t len) {
  if (const uint8_t* view = through_view(pid, addr, len)) {
    std::memcpy(dst, view, len);
    return 0;
  }
  copied_by_pid_ += len;
  return transfer(pid, addr, dst, len, ::process_vm_readv);
}

int ProcessMemory::write(pid_t pid, uint64_t addr, const void* src, size_t len) {
  if (uint8_t* view = through_view(pid, addr, len)) {
    std::memcpy(view, src, len);
    return 0;
  }
  copied_by_pid_ += len;
  return transfer(pid, addr, const_cast<void*>(src), len, ::process_vm_writev);
}

// The packet is built from the mapping: the bytes move once, into the packet.
const uint8_t* ProcessMemory::mapped(pid_t pid, uint64_t addr, size_t len) { return through_view(pid, addr, len); }

// Any of the process' threads, as /proc shows them: a program that polls and posts on a thread
// of its own while the main one sleeps in pthread_join (rping, UCX's progress thread, a lab's
// server) is running, and its receive waits are extended as a single-threaded program's are.
bool ProcessMemory::runnable(pid_t pid) { return pid > 0 && any_thread_runnable(pid); }

// A write into shared pages is made at once when nothing is queued before it (the queue keeps
// the order of writes that may overlap); the queue itself writes by pid, which reaches the
// same pages.
int ProcessMemory::write_later(pid_t pid, uint64_t addr, const void* src, size_t len) {
  if (!len) return 0;
  uint8_t* view = queue_.empty() ? through_view(pid, addr, len) : nullptr;
  if (view) {
    std::memcpy(view, src, len);
    return 0;
  }
  copied_by_pid_ += len;
  const auto* p = static_cast<const uint8_t*>(src);
  // The next packet of the same message continues the last write: one piece, not two.
  if (!queue_.empty()) {
    Queued& last = queue_.back();
    if (last.pid == pid && last.addr + last.len == addr && last.offset + last.len == bytes_.size()) {
      bytes_.insert(bytes_.end(), p, p + len);
      last.len += len;
      return 0;
    }
  }
  queue_.push_back({pid, addr, bytes_.size(), len});
  bytes_.insert(bytes_.end(), p, p + len);
  return 0;
}

void ProcessMemory::flush(std::vector<FailedWrite>* failed) {
  done_.assign(queue_.size(), false);
  for (size_t i = 0; i < queue_.size(); ++i)
    if (!done_[i]) flush_pid(queue_[i].pid, i, failed);
  queue_.clear();
  bytes_.clear();  // keeps its capacity: no allocation in the next batch
}

// Every queued write into `pid` from entry `first` on, in order, IOV_MAX pieces per
// process_vm_writev. The kernel stops at the first piece it cannot write (a partial count, or
// -1 when it wrote nothing): that piece is reported failed and the call resumes after it.
void ProcessMemory::flush_pid(pid_t pid, size_t first, std::vector<FailedWrite>* failed) {
  std::vector<size_t>& mine = mine_;
  mine.clear();
  for (size_t i = first; i < queue_.size(); ++i)
    if (queue_[i].pid == pid) {
      mine.push_back(i);
      done_[i] = true;
    }
  std::vector<iovec>& local = local_;
  std::vector<iovec>& remote = remote_;
  size_t k = 0, skip = 0;  // the next piece to write, and how much of it is already written
  while (k < mine.size()) {
    const size_t n = std::min(mine.size() - k, size_t(IOV_MAX));
    local.clear();
    remote.clear();
    for (size_t j = 0; j < n; ++j) {
      const Queued& q = queue_[mine[k + j]];
      const size_t off = j == 0 ? skip : 0;
      local.push_back({bytes_.data() + q.offset + off, q.len - off});
      remote.push_back({reinterpret_cast<void*>(q.addr + off), q.len - off});
    }
    ssize_t got = ::process_vm_writev(pid, local.data(), n, remote.data(), n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == ESRCH || errno == EPERM)) {  // the process is gone, or closed to us: all fail
      for (const int err = errno; k < mine.size(); ++k, skip = 0)
        failed->push_back({pid, queue_[mine[k]].addr + skip, queue_[mine[k]].len - skip, err});
      break;
    }
    if (got <= 0) {
      const Queued& q = queue_[mine[k]];
      failed->push_back({pid, q.addr + skip, q.len - skip, got < 0 ? errno : EFAULT});
      ++k;
      skip = 0;
      continue;
    }
    for (size_t left = size_t(got); left;) {
      const size_t rest = queue_[mine[k]].len - skip;
      if (left < rest) {
        skip += left;
        break;
      }
      left -= rest;
      ++k;
      skip = 0;
    }
  }
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
