// Memory windows through the shim between two processes (tests/programs/mw_check.cc): the type
// 2 flow a conformance suite walks (a bind with a small fresh rkey takes only its key byte,
// WRITE/READ through it, LOCAL_INV, a rebind through another QP, SEND_WITH_INV), and the
// errors as rxe gives them: dereg of an MR with a bound window is EINVAL, a failed LOCAL_INV
// completes with LOC_QP_OP_ERR, a bind of another PD's window or naming the window by a stale
// rkey with MW_BIND_ERR (not EPERM).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "check_run.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

TEST(MemoryWindows, Type2FlowAndErrorsThroughTheShimAsOnRxe) {
  Nics nics(2);
  Result r;
  ASSERT_NO_FATAL_FAILURE(run_check(nics, "simnic-mw-check", {"-a", "simnic0", "-b", "simnic1"}, &r));
  expect_says(r, {
                     "server: type 2 bind with rkey 0x12: the window's rkey is its index | 0x12",
                     "client: WRITE and READ of 4096 bytes through the window, compared",
                     "server: 4096 bytes landed through the window, compared",
                     "client: rebound window: QP 2 wrote, QP 1: remote access error",
                     "server: LOCAL_INV, rebound through QP 2 with ibv_wr_bind_mw; its WRITE compared",
                     "server: SEND_WITH_INV invalidated the window, the receive reports its rkey",
                     "server: ibv_dereg_mr with a bound type 1 window: Invalid argument",
                     "server: BIND_MW with a scatter/gather entry: Invalid argument at post time",
                     "server: LOCAL_INV of a free window: local QP operation error",
                     "server: type 2 bind of another PD's window: memory management operation error",
                     "server: bind naming the window by a stale rkey: memory management operation error",
                     "PASS",
                 });
  // The shim explains the refused verbs; simnicd's log names the rule each failed bind broke.
  EXPECT_NE(r.output.find("memory window(s) bound to it"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("a bind moves no data, num_sge must be 0"), std::string::npos) << r.output;
  std::ifstream in(nics.dir() + "/simnic1.log");
  const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(log.find("are in different PDs (IBA C10-72)"), std::string::npos) << log;
  EXPECT_NE(log.find("LOCAL_INV of rkey"), std::string::npos) << log;
  EXPECT_NE(log.find("ibv_post_send does not update ibv_mw.rkey after a bind"), std::string::npos) << log;
  EXPECT_EQ(log.find("may change only the key byte"), std::string::npos) << log;
}

}  // namespace
}  // namespace simnic::it
