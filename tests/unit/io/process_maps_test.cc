// ProcessMemory::check_mapped against this test's own memory map: what ibv_reg_mr of a pinned
// MR accepts, as the kernel's pin_user_pages does (every page, with the rights the MR needs).
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "simnic/io/host_memory_process.h"

namespace simnic::io {
namespace {

class ProcessMaps : public ::testing::Test {
 protected:
  void SetUp() override {
    page_ = size_t(::sysconf(_SC_PAGESIZE));
    void* p = ::mmap(nullptr, 4 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    base_ = static_cast<uint8_t*>(p);
  }
  void TearDown() override { ::munmap(base_, 4 * page_); }
  uint64_t at(size_t page) const { return reinterpret_cast<uint64_t>(base_ + page * page_); }
  int check(size_t first_page, size_t pages, bool writable) {
    return memory_.check_mapped(::getpid(), at(first_page), pages * page_, writable);
  }

  ProcessMemory memory_;
  uint8_t* base_ = nullptr;
  size_t page_ = 4096;
};

TEST_F(ProcessMaps, AMappedWritableRangePassesEitherWay) {
  EXPECT_EQ(check(0, 4, true), 0);
  EXPECT_EQ(check(0, 4, false), 0);
  // Part of a page counts as the page.
  EXPECT_EQ(memory_.check_mapped(::getpid(), at(1) + 5, 10, true), 0);
}

TEST_F(ProcessMaps, AHoleInTheMiddleFailsThoughBothEndsAreMapped) {
  ASSERT_EQ(::munmap(base_ + page_, page_), 0);
  EXPECT_EQ(check(0, 4, false), EFAULT);
  EXPECT_EQ(check(2, 2, false), 0);
}

TEST_F(ProcessMaps, AReadOnlyPageFailsOnlyAWritableRegistration) {
  ASSERT_EQ(::mprotect(base_ + 2 * page_, page_, PROT_READ), 0);
  EXPECT_EQ(check(0, 4, true), EFAULT);
  EXPECT_EQ(check(0, 4, false), 0);
}

TEST_F(ProcessMaps, APageWithoutAccessFailsEvenReadOnly) {
  ASSERT_EQ(::mprotect(base_ + 3 * page_, page_, PROT_NONE), 0);
  EXPECT_EQ(check(0, 4, false), EFAULT);
  EXPECT_EQ(check(0, 3, false), 0);
}

TEST_F(ProcessMaps, AProcessThatIsGoneIsNotFound) {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(memory_.check_mapped(child, at(0), page_, false), ESRCH);
}

}  // namespace
}  // namespace simnic::io
