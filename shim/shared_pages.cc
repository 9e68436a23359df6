// Shared pages (issue 26 point 4; docs/shim.md "Shared pages"): at ibv_reg_mr the shim moves
// the registered anonymous pages onto a sealed memfd mapped at the same address, and sends the
// memfd with the registration; simnicd maps it and reaches the MR with memcpy instead of
// process_vm_readv/writev. The program sees the same bytes at the same addresses before and
// after. Done only where it cannot lose a write:
//  - one thread in the process (no other thread can write the pages between the copy and the
//    remap), with every signal blocked while the pages move (no handler can either);
//  - private anonymous read-write memory (malloc, mmap, the heap), never the stack, a file or
//    memory that is already shared, and not within reach of the running stack;
//  - nothing is allocated between the read of which pages are in use and the remap (the heap
//    may be the memory moving).
// Anything else registers as before (simnicd reaches it by pid). A fork gets a private copy of
// every moved region (pthread_atfork), as a real RNIC's pinned pages are copied for the child
// (the kernel's FOLL_PIN copy-on-fork, so ibv_is_fork_initialized says IBV_FORK_UNNEEDED).
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "shim/shim.h"

namespace simnic::shim {

// Named, not anonymous: in a unity build (the TSan stage) this file shares a translation unit
// with the shim's others, whose anonymous namespaces hold names like g_mu too.
namespace shared_pages_detail {

constexpr uint64_t kMaxWholeVma = 256ull << 20;  // a VMA up to this moves whole (later MRs in it reuse it)
constexpr uint64_t kMaxMoved = 1ull << 30;       // larger registrations stay reached by pid

struct Region {
  uintptr_t lo, hi;  // page-aligned, [lo, hi) maps the memfd from offset 0
  int fd;
  uint64_t ino;
};

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
std::vector<Region> g_regions;
bool g_atfork_set = false;

struct Vma {
  uintptr_t lo = 0, hi = 0;
  char perms[5] = {};
  uint64_t offset = 0, ino = 0;
  char path[64] = {};
};

uintptr_t page_size() {
  static const uintptr_t size = uintptr_t(::sysconf(_SC_PAGESIZE));
  return size;
}

bool enabled() {
  const char* v = std::getenv("SIMNIC_SHARED_PAGES");
  return !v || std::strcmp(v, "0") != 0;
}

std::vector<Vma> read_vmas() {
  std::vector<Vma> out;
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) return out;
  char line[4096];  // as simnicd reads maps (simnic/io/process_maps.cc): long paths stay on their line
  while (std::fgets(line, sizeof line, f)) {
    Vma v;
    unsigned long lo, hi, off, ino;  // NOLINT: sscanf's %lx
    int path_at = 0;
    if (std::sscanf(line, "%lx-%lx %4s %lx %*s %lu %n", &lo, &hi, v.perms, &off, &ino, &path_at) < 5) continue;
    v.lo = lo, v.hi = hi, v.offset = off, v.ino = ino;
    std::snprintf(v.path, sizeof v.path, "%s", line + path_at);
    v.path[std::strcspn(v.path, "\n")] = 0;
    out.push_back(v);
  }
  std::fclose(f);
  return out;
}

const Vma* vma_at(const std::vector<Vma>& vmas, uintptr_t addr) {
  for (const Vma& v : vmas)
    if (addr >= v.lo && addr < v.hi) return &v;
  return nullptr;
}

bool single_threaded() {
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return false;
  int n = 0;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n == 1;
}

// [lo, hi) still maps region r's memfd at its place (the program may have unmapped or
// replaced it since).
bool region_live(const std::vector<Vma>& vmas, const Region& r, uintptr_t lo, uintptr_t hi) {
  for (uintptr_t at = lo; at < hi;) {
    const Vma* v = vma_at(vmas, at);
    if (!v || v->ino != r.ino || v->perms[3] != 's' || v->offset != v->lo - r.lo) return false;
    at = v->hi;
  }
  return true;
}

// Private anonymous read-write memory that is neither a stack nor near the running one.
bool movable(const Vma& v, uintptr_t lo, uintptr_t hi) {
  if (std::strcmp(v.perms, "rw-p") != 0 || v.ino != 0) return false;
  if (v.path[0] && std::strcmp(v.path, "[heap]") != 0) return false;  // [stack], [vvar], named files
  const auto sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  constexpr uintptr_t kReach = 8u << 20;  // the frames above ours, and a signal's below
  return hi <= sp - (sp > kReach ? kReach : sp) || lo > sp + kReach;
}

// Which pages of [lo, lo + n) hold something (present or swapped, /proc/self/pagemap); a page
// never touched reads as zero from the memfd as from anonymous memory, so it is not copied
// (a registered but untouched buffer stays unallocated). `used` is sized by the caller, so that
// nothing is allocated here. False: copy every page.
bool pages_in_use(uintptr_t lo, size_t pages, std::vector<uint64_t>& used) {
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t want = ssize_t(pages * sizeof(uint64_t));
  const ssize_t got = ::pread(fd, used.data(), size_t(want), off_t(lo / page_size() * sizeof(uint64_t)));
  ::close(fd);
  return got == want;
}

void copy_pages(uintptr_t lo, uint8_t* to, size_t pages, const std::vector<uint64_t>* used) {
  constexpr uint64_t kPresentOrSwapped = (1ull << 63) | (1ull << 62);
  for (size_t i = 0; i < pages; ++i)
    if (!used || (used->at(i) & kPresentOrSwapped))
      std::memcpy(to + i * page_size(), reinterpret_cast<const void*>(lo + i * page_size()), page_size());
}

// Moves [lo, hi) onto a new memfd mapped at the same address. The memfd, or -1 (nothing moved).
int move_onto_memfd(uintptr_t lo, uintptr_t hi) {
  const size_t n = hi - lo, pages = n / page_size();
  const int fd = ::memfd_create("simnic-mr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  void* copy = ::ftruncate(fd, off_t(n)) == 0 ? ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                                              : MAP_FAILED;
  if (copy == MAP_FAILED) {
    ::close(fd);
    return -1;
  }
  std::vector<uint64_t> used(pages);
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  // From here to the remap: system calls and copies only, no allocation.
  const bool known = pages_in_use(lo, pages, used);
  copy_pages(lo, static_cast<uint8_t*>(copy), pages, known ? &used : nullptr);
  void* at = ::mmap(reinterpret_cast<void*>(lo), n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
  if (at == MAP_FAILED) {
    // The kernel may have unmapped the old pages before it failed: put the bytes back privately.
    ::mmap(reinterpret_cast<void*>(lo), n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    std::memcpy(reinterpret_cast<void*>(lo), copy, n);
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::munmap(copy, n);
  if (at == MAP_FAILED) {
    ::close(fd);
    return -1;
  }
  // Sealed so that simnicd can map it without fearing SIGBUS (it refuses an unsealed memfd).
  ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  return fd;
}

// After fork, in the child (one thread): every moved region becomes private memory again,
// holding what it held at the fork, so the child's writes stay its own and the parent's NIC
// keeps the parent's pages. No allocation (the child of a threaded program).
void privatize_in_child() {
  for (const Region& r : g_regions) {
    const size_t n = r.hi - r.lo;
    void* mine = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mine != MAP_FAILED) {
      std::memcpy(mine, reinterpret_cast<void*>(r.lo), n);
      ::mremap(mine, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(r.lo));
    }
    ::close(r.fd);
  }
  g_regions.clear();
  ::pthread_mutex_unlock(&g_mu);
}

void lock_for_fork() { ::pthread_mutex_lock(&g_mu); }
void unlock_after_fork() { ::pthread_mutex_unlock(&g_mu); }

// A region of ours that covers [lo, hi) and is still in place, forgetting those that are not.
const Region* live_region(const std::vector<Vma>& vmas, uintptr_t lo, uintptr_t hi, bool* overlaps) {
  *overlaps = false;
  for (size_t i = 0; i < g_regions.size();) {
    Region& r = g_regions[i];
    if (hi <= r.lo || lo >= r.hi) {  // elsewhere: not looked at
      ++i;
      continue;
    }
    if (!region_live(vmas, r, std::max(lo, r.lo), std::min(hi, r.hi)) ||
        !region_live(vmas, r, r.lo, r.lo + page_size())) {
      ::close(r.fd);
      g_regions.erase(g_regions.begin() + ptrdiff_t(i));
      continue;
    }
    if (lo >= r.lo && hi <= r.hi) return &r;
    *overlaps = true;
    ++i;
  }
  return nullptr;
}

SharedPages move_registration(const void* addr, size_t length, unsigned access) {
  SharedPages none;
  if (!enabled() || length == 0 || (access & IBV_ACCESS_ON_DEMAND)) return none;
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (a + length < a) return none;
  const uintptr_t lo = a & ~(page_size() - 1), hi = (a + length + page_size() - 1) & ~(page_size() - 1);
  const std::vector<Vma> vmas = read_vmas();
  ::pthread_mutex_lock(&g_mu);
  bool overlaps = false;
  if (const Region* r = live_region(vmas, lo, hi, &overlaps)) {
    none = SharedPages{r->fd, r->lo};
    ::pthread_mutex_unlock(&g_mu);
    return none;
  }
  const Vma* v = vma_at(vmas, lo);
  if (!overlaps && v && hi <= v->hi && single_threaded()) {
    // The whole VMA when it is small (the buffers a program carves from it move once), else
    // the MR's own pages.
    const bool whole = v->hi - v->lo <= kMaxWholeVma;
    const uintptr_t from = whole ? v->lo : lo, to = whole ? v->hi : hi;
    if (to - from <= kMaxMoved && movable(*v, from, to)) {
      if (!g_atfork_set) g_atfork_set = ::pthread_atfork(lock_for_fork, unlock_after_fork, privatize_in_child) == 0;
      g_regions.reserve(g_regions.size() + 1);  // no allocation after the move
      if (g_atfork_set) {
        const int fd = move_onto_memfd(from, to);
        struct stat st {};
        if (fd >= 0 && ::fstat(fd, &st) == 0) {
          g_regions.push_back(Region{from, to, fd, uint64_t(st.st_ino)});
          none = SharedPages{fd, from};
        }
      }
    }
  }
  ::pthread_mutex_unlock(&g_mu);
  return none;
}

}  // namespace shared_pages_detail

SharedPages share_pages(const void* addr, size_t length, unsigned access) {
  return shared_pages_detail::move_registration(addr, length, access);
}

}  // namespace simnic::shim
