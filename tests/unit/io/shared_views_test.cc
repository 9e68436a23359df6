// Shared pages on simnicd's side (issue 26 point 4): which descriptors it maps (only a memfd
// sealed against shrinking, writable, large enough, placed on a page), how views of one memfd
// merge and go, how a registration without one drops a stale view, and that ProcessMemory
// moves bytes through a view with memcpy (and by pid without one).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "simnic/io/host_memory_process.h"
#include "simnic/io/shared_views.h"

namespace simnic::io {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kBase = 0x7f0000000000;  // where the "program" maps the memfd

// A memfd of `pages` pages, sealed with `seals`, filled with its page numbers.
int memfd(size_t pages, int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) {
  const int fd = ::memfd_create("test-mr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::ftruncate(fd, off_t(pages * kPage)), 0);
  for (size_t i = 0; i < pages; ++i) {
    const uint8_t b = uint8_t(i + 1);
    EXPECT_EQ(::pwrite(fd, &b, 1, off_t(i * kPage)), 1);
  }
  if (seals) {
    EXPECT_EQ(::fcntl(fd, F_ADD_SEALS, seals), 0);
  }
  return fd;
}

struct Fd {
  int fd;
  ~Fd() { ::close(fd); }
};

TEST(SharedViews, ASealedMemfdIsMappedAndReachesTheSameBytes) {
  SharedViews views;
  Fd f{memfd(4)};
  ASSERT_EQ(views.share(7, 1, kBase + kPage + 10, 2 * kPage, f.fd, kBase), 0);
  uint8_t* p = views.find(7, kBase + kPage, 1);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 2);  // page 1 of the memfd
  *p = 99;           // the NIC's write is the program's byte
  uint8_t b = 0;
  ASSERT_EQ(::pread(f.fd, &b, 1, off_t(kPage)), 1);
  EXPECT_EQ(b, 99);
  // Only the MR's pages: [kBase + page 1, kBase + page 4) (the MR ends 10 bytes into page 3).
  EXPECT_EQ(views.find(7, kBase, 1), nullptr);
  EXPECT_NE(views.find(7, kBase + 3 * kPage + 9, 1), nullptr);
  EXPECT_EQ(views.find(7, kBase + 3 * kPage, kPage + 1), nullptr);
  EXPECT_EQ(views.find(8, kBase + kPage, 1), nullptr);  // another pid reaches nothing
  EXPECT_EQ(views.mapped_bytes(), 3 * kPage);
  views.unshare(1);
  EXPECT_EQ(views.find(7, kBase + kPage, 1), nullptr);
  EXPECT_EQ(views.views(), 0u);
}

TEST(SharedViews, DescriptorsThatCouldFailTheNicAreRefused) {
  SharedViews views;
  Fd unsealed{memfd(2, 0)};
  EXPECT_EQ(views.share(7, 1, kBase, kPage, unsealed.fd, kBase), EPERM);  // could shrink: SIGBUS
  Fd write_sealed{memfd(2, F_SEAL_SHRINK | F_SEAL_WRITE)};
  EXPECT_EQ(views.share(7, 1, kBase, kPage, write_sealed.fd, kBase), EPERM);
  Fd small{memfd(2)};
  EXPECT_EQ(views.share(7, 1, kBase, 3 * kPage, small.fd, kBase), EINVAL);      // beyond its end
  EXPECT_EQ(views.share(7, 1, kBase - kPage, kPage, small.fd, kBase), EINVAL);  // before its start
  EXPECT_EQ(views.share(7, 1, kBase + 8, kPage, small.fd, kBase + 8), EINVAL);  // base not on a page
  const std::string path = "/proc/self/fd/" + std::to_string(small.fd);
  Fd read_only{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  EXPECT_EQ(views.share(7, 1, kBase, kPage, read_only.fd, kBase), EACCES);
  FILE* tmp = std::tmpfile();
  ASSERT_NE(tmp, nullptr);
  EXPECT_NE(views.share(7, 1, kBase, 1, ::fileno(tmp), kBase), 0);  // a file: no seals
  std::fclose(tmp);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  EXPECT_EQ(views.share(7, 1, kBase, 1, pipe_fds[0], kBase), EINVAL);
  ::close(pipe_fds[0]), ::close(pipe_fds[1]);
  EXPECT_EQ(views.share(7, 1, kBase, 1, -1, kBase), EBADF);
  EXPECT_EQ(views.views(), 0u);
  EXPECT_EQ(views.find(7, kBase, 1), nullptr);
}

TEST(SharedViews, OverlappingMrsOfOneMemfdShareAViewUntilTheLastGoes) {
  SharedViews views;
  Fd f{memfd(8)};
  ASSERT_EQ(views.share(7, 1, kBase, 3 * kPage, f.fd, kBase), 0);
  ASSERT_EQ(views.share(7, 2, kBase + 2 * kPage + 100, 3 * kPage, f.fd, kBase), 0);  // pages 2-5
  EXPECT_EQ(views.views(), 1u);
  EXPECT_EQ(views.mapped_bytes(), 6 * kPage);
  ASSERT_NE(views.find(7, kBase + kPage, 4 * kPage), nullptr);  // across both MRs
  EXPECT_EQ(*views.find(7, kBase + 5 * kPage, 1), 6);
  views.unshare(1);
  EXPECT_NE(views.find(7, kBase, 1), nullptr);  // MR 2 still uses the view
  views.unshare(2);
  EXPECT_EQ(views.views(), 0u);
}

// The program unmapped registered memory and registered something else there: the old view
// is stale; a registration without shared pages (or with another memfd) drops it.
TEST(SharedViews, ARegistrationWithoutSharedPagesDropsAStaleView) {
  SharedViews views;
  Fd f{memfd(4)}, g{memfd(4)};
  ASSERT_EQ(views.share(7, 1, kBase, 4 * kPage, f.fd, kBase), 0);
  EXPECT_EQ(views.share(7, 2, kBase + kPage, 10, -1, 0), EBADF);
  EXPECT_EQ(views.find(7, kBase, 1), nullptr);
  EXPECT_EQ(views.views(), 0u);
  ASSERT_EQ(views.share(7, 3, kBase, 4 * kPage, f.fd, kBase), 0);
  ASSERT_EQ(views.share(7, 4, kBase + kPage, kPage, g.fd, kBase), 0);  // another memfd there
  EXPECT_EQ(views.views(), 1u);
  EXPECT_EQ(*views.find(7, kBase + kPage, 1), 2);  // g's page 1
  EXPECT_EQ(views.find(7, kBase, 1), nullptr);     // f's view went whole
  views.unshare(3);                                // already gone: nothing happens
  EXPECT_EQ(views.views(), 1u);
}

TEST(SharedViews, ProcessMemoryCopiesThroughAViewAndByPidWithout) {
  ProcessMemory mem;
  Fd f{memfd(2)};
  // This process maps the memfd, as the shim does at the registered address.
  auto* mine = static_cast<uint8_t*>(::mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, f.fd, 0));
  ASSERT_NE(mine, MAP_FAILED);
  const pid_t self = ::getpid();
  const uint64_t at = reinterpret_cast<uint64_t>(mine);
  ASSERT_EQ(mem.share_pages(self, 1, at, 2 * kPage, f.fd, at), 0);
  const char hello[] = "through the view";
  ASSERT_EQ(mem.write_later(self, at + 100, hello, sizeof hello), 0);
  EXPECT_FALSE(mem.queued());  // nothing before it: written at once
  EXPECT_EQ(std::memcmp(mine + 100, hello, sizeof hello), 0);
  char back[sizeof hello] = {};
  ASSERT_EQ(mem.read(self, at + 100, back, sizeof back), 0);
  EXPECT_STREQ(back, hello);
  EXPECT_EQ(mem.stats().copied_shared, 2 * sizeof hello);
  EXPECT_EQ(mem.stats().copied_by_pid, 0u);
  std::vector<uint8_t> other(64, 0);
  const uint8_t byte = 5;
  ASSERT_EQ(mem.write(self, reinterpret_cast<uint64_t>(other.data()), &byte, 1), 0);  // no view: by pid
  EXPECT_EQ(other[0], 5);
  EXPECT_EQ(mem.stats().copied_by_pid, 1u);
  mem.unshare_pages(1);
  EXPECT_EQ(mem.stats().views, 0u);
  ::munmap(mine, 2 * kPage);
}

}  // namespace
}  // namespace simnic::io
