// CpuShare reads how many tasks are running or runnable from /proc/loadavg's fourth field.
#include "simnic/io/cpu_share.h"

#include <gtest/gtest.h>

namespace simnic::io {
namespace {

TEST(CpuShare, ReadsTheRunnableCountOfALoadavgLine) {
  EXPECT_EQ(runnable_in_loadavg("0.20 0.18 0.12 3/118 4242\n"), 3);
  EXPECT_EQ(runnable_in_loadavg("12.05 9.87 5.10 17/904 123456\n"), 17);
}

TEST(CpuShare, RefusesMalformedLines) {
  EXPECT_EQ(runnable_in_loadavg(""), -1);
  EXPECT_EQ(runnable_in_loadavg("0.20 0.18 0.12"), -1);
  EXPECT_EQ(runnable_in_loadavg("0.20 0.18 0.12 x/118 1"), -1);
  EXPECT_EQ(runnable_in_loadavg("0.20 0.18 0.12 3 1"), -1);
}

}  // namespace
}  // namespace simnic::io
