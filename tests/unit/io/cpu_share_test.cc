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
// The host's CPU-wait clock (issue 26): the "some" line's total, in microseconds.
TEST(CpuShare, ReadsThePressureSomeTotal) {
  EXPECT_EQ(some_total_in_pressure("some avg10=90.88 avg60=84.76 avg300=49.03 total=5081259586\n"
                                   "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"),
            5081259586u);
  EXPECT_EQ(some_total_in_pressure("full avg10=0.00 avg60=0.00 avg300=0.00 total=7\n"), 0u);
  EXPECT_EQ(some_total_in_pressure("some avg10=0.00\nfull total=9\n"), 0u);  // no total on its line
  EXPECT_EQ(some_total_in_pressure(""), 0u);
}

}  // namespace simnic::io
