// Our own verbs program (linked against the system libibverbs, run through `simnic run`):
// SEND with two SGEs, SEND_WITH_IMM, RDMA WRITE (+IMM), RDMA READ and atomics, with every
// byte received compared and every completion's fields checked, between NICs and on one.
#include <gtest/gtest.h>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

void expect_all_passed(const Result& r) {
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(" passed, 0 failed"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.output;
}

TEST(DataIntegrity, EveryRcOperationBetweenTwoNics) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  expect_all_passed(nics.run({bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic1", "-s", "200000",
                              "-n", "3"}, 120s));
  // Both NICs counted the traffic, and nothing was dropped as malformed or for a bad ICRC.
  for (const char* nic : {"simnic0", "simnic1"}) {
    auto st = nics.status(nic);
    EXPECT_GT(std::stoull(st["rx_packets"]), 100u) << nic;
    EXPECT_EQ(st["rx_drop_malformed"], "0") << nic;
    EXPECT_EQ(st["rx_drop_icrc"], "0") << nic;
  }
}

TEST(DataIntegrity, EveryRcOperationOnOneNic) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  expect_all_passed(nics.run({bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic0", "-n", "2"}, 120s));
}

TEST(DataIntegrity, SmallMtuSegmentsLargeMessages) {
  Nics nics(2, {"--mtu", "256"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  expect_all_passed(nics.run({bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic1", "-s", "100000",
                              "-m", "256"}, 120s));
}

TEST(DataIntegrity, LossyLinkStillDeliversEveryByte) {
  Nics nics(2, {"--loss", "0.02", "--seed", "7"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  expect_all_passed(nics.run({bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic1", "-s", "65536",
                              "-n", "2"}, 180s));
  uint64_t retx = std::stoull(nics.status("simnic0")["retransmits"]) + std::stoull(nics.status("simnic1")["retransmits"]);
  EXPECT_GT(retx, 0u) << "2% loss should have forced retransmissions";
}

}  // namespace
}  // namespace simnic::it
