// IBTA 1.5 RDMA ATOMIC WRITE through the shim between two processes
// (tests/programs/atomic_write_check.cc): ibv_post_send(IBV_WR_ATOMIC_WRITE) and
// ibv_wr_atomic_write land their 8 bytes (compared by the server), and a misaligned target, an
// MR without REMOTE_WRITE and a 4-byte local buffer complete with the statuses rxe gives.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

TEST(AtomicWrite, BothApisLandEightBytesAndTheErrorsCompleteAsOnRxe) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({bin_dir() + "/simnic-atomic-write-check", "-a", "simnic0", "-b", "simnic1"}, 60s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("server: 16 bytes landed as written, compared"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("client: misaligned target: remote invalid request error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("client: MR without REMOTE_WRITE: remote access error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("client: 4-byte local buffer: local length error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << r.output;
  // The responder's NIC log says which rule each refused request broke.
  std::ifstream in(nics.dir() + "/simnic1.log");
  const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(log.find("ATOMIC WRITE target"), std::string::npos) << log;
  EXPECT_NE(log.find("(IBA A19.4.2) (IBA 9.9.3.1, responder class C)"), std::string::npos) << log;
  EXPECT_NE(log.find("ATOMIC WRITE: rkey"), std::string::npos) << log;
}

}  // namespace
}  // namespace simnic::it
