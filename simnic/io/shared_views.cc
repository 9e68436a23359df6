#include "simnic/io/shared_views.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>

namespace simnic::io {

namespace {

uint64_t page_size() {
  static const uint64_t size = uint64_t(::sysconf(_SC_PAGESIZE));
  return size;
}
uint64_t page_floor(uint64_t a) { return a & ~(page_size() - 1); }
uint64_t page_ceil(uint64_t a) { return page_floor(a + page_size() - 1); }

}  // namespace

int check_shared_pages_fd(int fd, uint64_t* size, uint64_t* dev, uint64_t* ino) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno;
  if (!S_ISREG(st.st_mode)) return EINVAL;
  // A file that can shrink would turn the NIC's next access past its end into SIGBUS: only a
  // memfd sealed against it is taken. Files other than memfd/shmem have no seals (EINVAL).
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0) return errno;
  if (!(seals & F_SEAL_SHRINK)) return EPERM;
  if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) return EPERM;  // the NIC writes into it
  const int mode = ::fcntl(fd, F_GETFL);
  if (mode < 0 || (mode & O_ACCMODE) != O_RDWR) return EACCES;
  *size = uint64_t(st.st_size);
  *dev = uint64_t(st.st_dev);
  *ino = uint64_t(st.st_ino);
  return 0;
}

SharedViews::~SharedViews() {
  for (auto& [pid, views] : by_pid_)
    for (auto& [start, v] : views) ::munmap(v.local, v.end - start);
}

std::vector<SharedViews::Views::iterator> SharedViews::overlapping(Views& views, uint64_t start, uint64_t end) {
  std::vector<Views::iterator> out;
  auto it = views.upper_bound(start);
  if (it != views.begin() && std::prev(it)->second.end > start) --it;
  for (; it != views.end() && it->first < end; ++it) out.push_back(it);
  return out;
}

void SharedViews::drop(Views& views, Views::iterator it) {
  for (uint32_t k : it->second.keys) by_key_.erase(k);
  ::munmap(it->second.local, it->second.end - it->first);
  views.erase(it);
}

int SharedViews::share(pid_t pid, uint32_t key, uint64_t addr, uint64_t len, int fd, uint64_t fd_base) {
  unshare(key);  // a key names one registration at a time
  if (len == 0 || addr + len < addr) return EINVAL;
  uint64_t start = page_floor(addr), end = page_ceil(addr + len);
  Views& views = by_pid_[pid];
  uint64_t size = 0, dev = 0, ino = 0;
  int err = fd < 0 ? EBADF : check_shared_pages_fd(fd, &size, &dev, &ino);
  if (!err && (fd_base != page_floor(fd_base) || start < fd_base || end - fd_base > size)) err = EINVAL;
  // What overlaps and is not this memfd at this place is stale: the program's memory there
  // is something else now (process_vm_* reaches it, as it always did).
  std::vector<Views::iterator> same;
  for (Views::iterator it : overlapping(views, start, end)) {
    const View& v = it->second;
    if (!err && v.dev == dev && v.ino == ino && v.fd_base == fd_base) same.push_back(it);
    else drop(views, it);
  }
  if (err) {
    if (views.empty()) by_pid_.erase(pid);
    return err;
  }
  for (Views::iterator it : same) start = std::min(start, it->first), end = std::max(end, it->second.end);
  void* local = ::mmap(nullptr, end - start, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(start - fd_base));
  if (local == MAP_FAILED) {
    if (views.empty()) by_pid_.erase(pid);
    return errno;
  }
  View merged{end, static_cast<uint8_t*>(local), fd_base, dev, ino, {key}};
  for (Views::iterator it : same) {
    merged.keys.insert(merged.keys.end(), it->second.keys.begin(), it->second.keys.end());
    it->second.keys.clear();
    drop(views, it);
  }
  for (uint32_t k : merged.keys) by_key_[k] = {pid, start};
  views.emplace(start, std::move(merged));
  return 0;
}

void SharedViews::unshare(uint32_t key) {
  auto k = by_key_.find(key);
  if (k == by_key_.end()) return;
  const auto [pid, start] = k->second;
  by_key_.erase(k);
  Views& views = by_pid_[pid];
  auto it = views.find(start);
  if (it == views.end()) return;
  auto& keys = it->second.keys;
  keys.erase(std::remove(keys.begin(), keys.end(), key), keys.end());
  if (keys.empty()) drop(views, it);
  if (views.empty()) by_pid_.erase(pid);
}

uint8_t* SharedViews::find(pid_t pid, uint64_t addr, size_t len) {
  if (by_key_.empty() || addr + len < addr) return nullptr;
  auto p = by_pid_.find(pid);
  if (p == by_pid_.end()) return nullptr;
  auto it = p->second.upper_bound(addr);
  if (it == p->second.begin()) return nullptr;
  --it;
  if (addr + len > it->second.end) return nullptr;
  return it->second.local + (addr - it->first);
}

size_t SharedViews::views() const {
  size_t n = 0;
  for (const auto& [pid, views] : by_pid_) n += views.size();
  return n;
}

uint64_t SharedViews::mapped_bytes() const {
  uint64_t n = 0;
  for (const auto& [pid, views] : by_pid_)
    for (const auto& [start, v] : views) n += v.end - start;
  return n;
}

}  // namespace simnic::io
