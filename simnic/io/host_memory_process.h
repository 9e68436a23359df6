// HostMemory over process_vm_readv/writev: simnicd's "DMA" into an application's memory, and
// memcpy where the application shared the MR's pages (SharedViews, issue 26 point 4).
#pragma once
#include <sys/uio.h>

#include <vector>

#include "simnic/core/env.h"
#include "simnic/io/shared_views.h"

namespace simnic::io {

class ProcessMemory final : public core::HostMemory {
 public:
  int read(pid_t pid, uint64_t addr, void* dst, size_t len) override;
  int write(pid_t pid, uint64_t addr, const void* src, size_t len) override;
  int check_mapped(pid_t pid, uint64_t addr, uint64_t len, bool writable) override;
  // Queued writes are copied into one buffer and made with one process_vm_writev per process
  // (IOV_MAX pieces at a time); writes that continue the previous one are merged.
  int write_later(pid_t pid, uint64_t addr, const void* src, size_t len) override;
  bool queued() const override { return !queue_.empty(); }
  void flush(std::vector<FailedWrite>* failed) override;
  int share_pages(pid_t pid, uint32_t key, uint64_t addr, uint64_t len, int fd, uint64_t fd_base) override {
    return views_.share(pid, key, addr, len, fd, fd_base);
  }
  void unshare_pages(uint32_t key) override { views_.unshare(key); }
  const uint8_t* mapped(pid_t pid, uint64_t addr, size_t len) override;
  bool runnable(pid_t pid) override;

  // What `simnic status` shows of shared pages: views, their bytes, and the bytes the NIC
  // moved through them and through process_vm_*.
  struct Stats {
    size_t views = 0;
    uint64_t view_bytes = 0, copied_shared = 0, copied_by_pid = 0;
  };
  Stats stats() const { return {views_.views(), views_.mapped_bytes(), copied_shared_, copied_by_pid_}; }

 private:
  struct Queued {
    pid_t pid;
    uint64_t addr;
    size_t offset;  // in bytes_
    size_t len;
  };
  void flush_pid(pid_t pid, size_t first, std::vector<FailedWrite>* failed);
  uint8_t* through_view(pid_t pid, uint64_t addr, size_t len);
  SharedViews views_;
  uint64_t copied_shared_ = 0, copied_by_pid_ = 0;
  std::vector<Queued> queue_;
  std::vector<uint8_t> bytes_;
  std::vector<bool> done_;  // during flush: the entries already written (by the pid's call)
  // flush_pid's working lists, kept so a flush (several per event) allocates nothing.
  std::vector<size_t> mine_;
  std::vector<iovec> local_, remote_;
};

// Explains an errno from process_vm_* to a user (EPERM usually means Yama ptrace_scope).
const char* explain_dma_errno(int err);

}  // namespace simnic::io
