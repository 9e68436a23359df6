// Shared pages (issue 26 point 4): simnicd's own mappings of the memfds applications moved
// their registered memory onto (shim/shared_pages.cc), so the NIC reaches those MRs with
// memcpy instead of process_vm_readv/writev. docs/architecture.md "Shared pages" says why
// this is safe; in short: a view is made only of a memfd sealed against shrinking (no SIGBUS
// can reach simnicd), only for the pid whose context sent it, and only over the MR's own
// pages, so a program reaches nothing through it that it could not reach by pid already.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

namespace simnic::io {

class SharedViews {
 public:
  SharedViews() = default;
  SharedViews(const SharedViews&) = delete;
  SharedViews& operator=(const SharedViews&) = delete;
  ~SharedViews();

  // Maps the pages of [addr, addr + len) from memfd `fd`, whose offset 0 the program maps at
  // `fd_base`, for the MR keyed `key`. Views of one memfd that overlap merge; a view of
  // another file, or of the same file placed elsewhere, that overlaps is stale and dropped.
  // fd -1 (an MR registered without shared pages): only the dropping. 0 or an errno.
  int share(pid_t pid, uint32_t key, uint64_t addr, uint64_t len, int fd, uint64_t fd_base);
  // The MR keyed `key` is gone: its view goes when no other MR uses it.
  void unshare(uint32_t key);
  // Where [addr, addr + len) of `pid` is mapped in simnicd, or nullptr.
  uint8_t* find(pid_t pid, uint64_t addr, size_t len);

  size_t views() const;
  uint64_t mapped_bytes() const;

 private:
  struct View {
    uint64_t end = 0;          // [start (the map key), end) in the program's address space
    uint8_t* local = nullptr;  // where start is mapped in simnicd
    uint64_t fd_base = 0;      // where the memfd's offset 0 is in the program
    uint64_t dev = 0, ino = 0;
    std::vector<uint32_t> keys;  // the MRs that use it
  };
  using Views = std::map<uint64_t, View>;  // by start; never overlapping

  // The views of `pid` that overlap [start, end).
  std::vector<Views::iterator> overlapping(Views& views, uint64_t start, uint64_t end);
  void drop(Views& views, Views::iterator it);

  std::unordered_map<pid_t, Views> by_pid_;
  std::unordered_map<uint32_t, std::pair<pid_t, uint64_t>> by_key_;  // key -> (pid, view start)
};

// Checks that `fd` may be mapped as an application's shared pages: a regular file sealed
// against shrinking (F_SEAL_SHRINK: a memfd), writable. Fills its size, device and inode.
int check_shared_pages_fd(int fd, uint64_t* size, uint64_t* dev, uint64_t* ino);

}  // namespace simnic::io
