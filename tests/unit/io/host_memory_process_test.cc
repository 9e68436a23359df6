// ProcessMemory's queued writes on this very process (process_vm_writev on oneself needs no
// ptrace permission): they land only at flush, in order, pieces that continue each other are
// merged, and a piece that cannot be written is reported while the others still land.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <vector>

#include "simnic/io/host_memory_process.h"

namespace simnic::io {
namespace {

uint64_t at(const void* p) { return reinterpret_cast<uint64_t>(p); }

TEST(ProcessMemory, QueuedWritesLandAtFlushInOrder) {
  ProcessMemory mem;
  std::vector<uint8_t> dst(3 * 4096, 0), src(3 * 4096);
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 13 + 1);
  const pid_t self = ::getpid();
  // Three packets' worth, one after the other (merged into one piece), and a later write over
  // the first bytes that must win.
  for (size_t k = 0; k < 3; ++k)
    ASSERT_EQ(mem.write_later(self, at(dst.data() + k * 4096), src.data() + k * 4096, 4096), 0);
  const uint8_t over[4] = {9, 9, 9, 9};
  ASSERT_EQ(mem.write_later(self, at(dst.data()), over, 4), 0);
  EXPECT_TRUE(mem.queued());
  EXPECT_EQ(dst[100], 0);  // nothing yet
  std::vector<core::HostMemory::FailedWrite> failed;
  mem.flush(&failed);
  EXPECT_TRUE(failed.empty());
  EXPECT_FALSE(mem.queued());
  EXPECT_EQ(std::memcmp(dst.data() + 4, src.data() + 4, dst.size() - 4), 0);
  EXPECT_EQ(std::memcmp(dst.data(), over, 4), 0);
}

TEST(ProcessMemory, MorePiecesThanOneCallTakesAllLand) {
  ProcessMemory mem;
  constexpr size_t kPieces = 2 * IOV_MAX + 7;  // three process_vm_writev calls
  std::vector<uint8_t> dst(2 * kPieces, 0);
  const pid_t self = ::getpid();
  for (size_t i = 0; i < kPieces; ++i) {
    const uint8_t v = uint8_t(i % 251 + 1);
    ASSERT_EQ(mem.write_later(self, at(dst.data() + 2 * i), &v, 1), 0);  // every other byte: no merging
  }
  std::vector<core::HostMemory::FailedWrite> failed;
  mem.flush(&failed);
  EXPECT_TRUE(failed.empty());
  for (size_t i = 0; i < kPieces; ++i) {
    ASSERT_EQ(dst[2 * i], uint8_t(i % 251 + 1)) << i;
    ASSERT_EQ(dst[2 * i + 1], 0) << i;
  }
}

TEST(ProcessMemory, AnUnwritablePieceIsReportedAndTheOthersLand) {
  ProcessMemory mem;
  void* hole = ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(hole, MAP_FAILED);
  std::vector<uint8_t> a(100, 0), b(100, 0);
  const std::vector<uint8_t> src(100, 0x5a);
  const pid_t self = ::getpid();
  ASSERT_EQ(mem.write_later(self, at(a.data()), src.data(), 100), 0);
  ASSERT_EQ(mem.write_later(self, at(hole), src.data(), 100), 0);
  ASSERT_EQ(mem.write_later(self, at(b.data()), src.data(), 100), 0);
  std::vector<core::HostMemory::FailedWrite> failed;
  mem.flush(&failed);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].addr, at(hole));
  EXPECT_EQ(failed[0].len, 100u);
  EXPECT_EQ(failed[0].err, EFAULT);
  EXPECT_EQ(a, src);
  EXPECT_EQ(b, src);
  ::munmap(hole, 4096);
}

}  // namespace
}  // namespace simnic::io
