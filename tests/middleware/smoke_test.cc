// The middleware binary's own check: its harness starts NICs and runs a Debian verbs program.
#include <gtest/gtest.h>

#include "harness.h"

namespace simnic::it {
namespace {

TEST(Middleware, HarnessStartsNicsAndRunsAVerbsProgram) {
  if (!have_program("ibv_devices")) GTEST_SKIP() << "needs ibv_devices (Debian package ibverbs-utils)";
  Nics nics(1);
  ASSERT_TRUE(nics.ok());
  Result r = run({bin_dir() + "/simnic", "run", "--", "ibv_devices"}, nics.env(), std::chrono::seconds(20));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("simnic0"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace simnic::it
