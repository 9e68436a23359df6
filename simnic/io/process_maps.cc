// ProcessMemory::check_mapped: whether a range is mapped, and with which rights, read from
// /proc/PID/maps, the way the kernel's pin_user_pages walks the VMAs when ibv_reg_mr pins an MR
// (ib_umem_get): a hole or a page without read access fails with EFAULT, and so does a page
// without write access when the MR is writable (FOLL_WRITE, ib_access_writable).
#include <inttypes.h>
#include <cerrno>
#include <cstdio>

#include "simnic/io/host_memory_process.h"

namespace simnic::io {

namespace {

struct Vma {
  uint64_t start = 0, end = 0;
  bool readable = false, writable = false;
};

// One line of /proc/PID/maps: "start-end perms offset dev inode [path]".
bool next_vma(std::FILE* f, Vma* v) {
  char perms[8] = {};
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s", &v->start, &v->end, perms) != 3) continue;
    v->readable = perms[0] == 'r';
    v->writable = perms[1] == 'w';
    return true;
  }
  return false;
}

}  // namespace

int ProcessMemory::check_mapped(pid_t pid, uint64_t addr, uint64_t len, bool writable) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/maps", int(pid));
  std::FILE* f = std::fopen(path, "re");
  if (!f) return errno == ENOENT ? ESRCH : EPERM;
  // The VMAs come in address order: walk them from addr until the range is covered.
  uint64_t at = addr;
  const uint64_t end = addr + len;
  int result = EFAULT;
  for (Vma v; next_vma(f, &v);) {
    if (v.end <= at) continue;
    if (v.start > at || !v.readable || (writable && !v.writable)) break;  // a hole, or no right
    at = v.end;
    if (at >= end) {
      result = 0;
      break;
    }
  }
  std::fclose(f);
  return result;
}

}  // namespace simnic::io
