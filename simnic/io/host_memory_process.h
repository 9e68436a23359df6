// HostMemory over process_vm_readv/writev: simnicd's "DMA" into an application's memory.
#pragma once
#include "simnic/core/env.h"

namespace simnic::io {

class ProcessMemory final : public core::HostMemory {
 public:
  int read(pid_t pid, uint64_t addr, void* dst, size_t len) override;
  int write(pid_t pid, uint64_t addr, const void* src, size_t len) override;
  int check_mapped(pid_t pid, uint64_t addr, uint64_t len, bool writable) override;
};

// Explains an errno from process_vm_* to a user (EPERM usually means Yama ptrace_scope).
const char* explain_dma_errno(int err);

}  // namespace simnic::io
