// Host memory for the fuzzers that checks the NIC's DMA against the registrations: every write
// must land wholly inside an MR the test registered as writable for the process written to.
// A write anywhere else (an unregistered gap, a read-only MR, a deregistered MR, another
// process's memory) aborts, which libFuzzer reports as a crash with the input that caused it.
#pragma once
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "simnic/core/env.h"

namespace simnic::fuzz {

class CheckedMemory : public core::HostMemory {
 public:
  static constexpr uint64_t kBase = 0x10000000;
  static constexpr size_t kSpaceBytes = 64 * 1024;

  // The process's space, created zeroed on first use.
  uint8_t* space(pid_t pid) {
    auto& v = spaces_[pid];
    if (v.empty()) v.resize(kSpaceBytes);
    return v.data();
  }
  uint64_t addr(pid_t pid, size_t offset) {
    space(pid);
    return kBase + offset;
  }
  // The DMA engine may write [addr, addr+len) of `pid` from now on, until forbid_writes.
  void allow_writes(pid_t pid, uint64_t addr, uint64_t len) { writable_[pid][addr] = len; }
  void forbid_writes(pid_t pid, uint64_t addr) { writable_[pid].erase(addr); }

  int read(pid_t pid, uint64_t addr, void* dst, size_t len) override {
    uint8_t* p = locate(pid, addr, len);
    if (!p) return EFAULT;
    std::memcpy(dst, p, len);
    return 0;
  }
  int write(pid_t pid, uint64_t addr, const void* src, size_t len) override {
    uint8_t* p = locate(pid, addr, len);
    if (!p) return EFAULT;
    if (!writable(pid, addr, len)) {
      std::fprintf(stderr, "DMA write outside a writable MR: pid %d addr 0x%llx len %zu\n", int(pid),
                   static_cast<unsigned long long>(addr), len);
      std::abort();
    }
    std::memcpy(p, src, len);
    ++writes;
    return 0;
  }
  uint64_t writes = 0;

 private:
  bool writable(pid_t pid, uint64_t addr, size_t len) const {
    auto it = writable_.find(pid);
    if (it == writable_.end()) return false;
    for (auto& [start, n] : it->second)
      if (addr >= start && len <= n && addr - start <= n - len) return true;
    return false;
  }
  uint8_t* locate(pid_t pid, uint64_t addr, size_t len) {
    auto it = spaces_.find(pid);
    if (it == spaces_.end() || addr < kBase || len > kSpaceBytes || addr - kBase > kSpaceBytes - len) return nullptr;
    return it->second.data() + (addr - kBase);
  }
  std::map<pid_t, std::vector<uint8_t>> spaces_;
  std::map<pid_t, std::map<uint64_t, uint64_t>> writable_;  // start -> length
};

// Logs nothing: the fuzzers look at effects, and formatting every line would only slow them.
class NullLogger : public core::Logger {
 public:
  void log(core::LogLevel, const std::string&) override {}
};

// The wire: counts what the NIC sends and drops it.
class CountingSink : public core::PacketSink {
 public:
  core::SendOutcome send(uint32_t, uint16_t, std::span<const uint8_t>) override {
    ++sent;
    return core::SendOutcome::kSent;
  }
  uint64_t sent = 0;
};

}  // namespace simnic::fuzz
