#include "simnic/io/shm_memfd.h"

#include <sys/mman.h>
#include <unistd.h>
#include <cerrno>

namespace simnic::io {

bool MemfdAllocator::allocate(size_t size, const std::string& name, core::ShmRegion* out, int* err) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  size = (size + page - 1) / page * page;
  int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return false;
  }
  if (::ftruncate(fd, off_t(size)) != 0) {
    *err = errno;
    ::close(fd);
    return false;
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    *err = errno;
    ::close(fd);
    return false;
  }
  out->addr = p;  // a new memfd reads as zeros
  out->size = size;
  out->fd = fd;
  return true;
}

void MemfdAllocator::release(core::ShmRegion& region) {
  if (region.addr) ::munmap(region.addr, region.size);
  if (region.fd >= 0) ::close(region.fd);
  region = core::ShmRegion{};
}

}  // namespace simnic::io
