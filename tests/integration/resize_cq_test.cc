// ibv_resize_cq through the shim, from a plain verbs program (tests/programs/resize_cq_check.cc):
// rxe's refusals (EINVAL below the completions waiting, at 0, past max_cqe), an exact fit, and
// resizes up and down while SENDs complete and another thread polls the CQ being resized.
#include <gtest/gtest.h>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

TEST(ResizeCq, EveryCompletionArrivesOnceInOrderAcrossResizes) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({bin_dir() + "/simnic-resize-cq-check", "-d", "simnic0"}, 60s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resized to 30: cq->cqe 31"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("400 receive completions in order across 9 resizes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << r.output;
  // The NIC never had to drop a completion for want of room.
  EXPECT_EQ(nics.status("simnic0")["cq_overruns"], "0");
}

}  // namespace
}  // namespace simnic::it
