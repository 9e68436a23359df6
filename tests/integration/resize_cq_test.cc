// ibv_resize_cq through the shim, from a plain verbs program (tests/programs/resize_cq_check.cc):
// rxe's refusals (EINVAL below the completions waiting, at 0, past max_cqe), an exact fit, and
// resizes up and down while SENDs complete and another thread polls the CQ being resized.
#include <gtest/gtest.h>

#include "check_run.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

TEST(ResizeCq, EveryCompletionArrivesOnceInOrderAcrossResizes) {
  Nics nics(1);
  Result r;
  ASSERT_NO_FATAL_FAILURE(run_check(nics, "simnic-resize-cq-check", {"-d", "simnic0"}, &r));
  EXPECT_NE(r.output.find("resized to 30: cq->cqe 31"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("400 receive completions in order across 9 resizes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << r.output;
  // The NIC never had to drop a completion for want of room.
  EXPECT_EQ(nics.status("simnic0")["cq_overruns"], "0");
}

}  // namespace
}  // namespace simnic::it
