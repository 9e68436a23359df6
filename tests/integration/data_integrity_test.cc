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
  expect_all_passed(
      nics.run({bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic1", "-s", "200000", "-n", "3"}, 120s));
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
  expect_all_passed(
      nics.run({bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic1", "-s", "100000", "-m", "256"},
               120s));
}

TEST(DataIntegrity, LossyLinkStillDeliversEveryByte) {
  Nics nics(2, {"--loss", "0.02", "--seed", "7"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  expect_all_passed(
      nics.run({bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic1", "-s", "65536", "-n", "2", "-L"},
               180s));
  uint64_t retx = std::stoull(nics.status("simnic0")["retransmits"]) +
                  std::stoull(nics.status("simnic1")["retransmits"]);
  EXPECT_GT(retx, 0u) << "2% loss should have forced retransmissions";
}

}  // namespace
}  // namespace simnic::it

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

// 256 MiB of RDMA WRITEs plus SENDs, every byte hashed end to end and every completion
// counted, while both NICs lose 5 %, reorder 5 % and duplicate 2 % of what they send.
TEST(Stress, QuarterGibibyteUnderLossReorderAndDuplication) {
  Nics nics(2, {"--loss", "0.05", "--reorder", "0.05", "--dup", "0.02", "--seed", "3"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({bin_dir() + "/simnic-stress", "-a", "simnic0", "-b", "simnic1", "-t", "256"}, 240s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("256 rounds verified, 268435456 bytes compared"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("256 WRITE + 256 SEND + 256 credit completions"), std::string::npos) << r.output;
  std::printf("%s", r.output.c_str());
  auto s0 = nics.status("simnic0"), s1 = nics.status("simnic1");
  EXPECT_GT(std::stoull(s0["retransmits"]), 0u);
  EXPECT_GT(std::stoull(s0["fault_drops"]) + std::stoull(s1["fault_drops"]), 0u);
  EXPECT_GT(std::stoull(s1["duplicates"]), 0u) << "duplicated packets must be detected, not applied twice";
  EXPECT_EQ(s0["completion_errors"], "0");
  EXPECT_EQ(s1["completion_errors"], "0");
}

// The same traffic through the extended API: ibv_create_qp_ex + ibv_wr_* to post,
// ibv_create_cq_ex + ibv_start_poll/ibv_next_poll/ibv_end_poll to reap, on a lossy link.
TEST(Stress, ExtendedVerbsApiUnderLoss) {
  Nics nics(2, {"--loss", "0.03", "--dup", "0.02", "--seed", "11"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({bin_dir() + "/simnic-stress", "-a", "simnic0", "-b", "simnic1", "-t", "32", "-c", "65536", "-d",
                       "4", "-x"},
                      180s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("extended API"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("512 rounds verified, 33554432 bytes compared"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("512 WRITE + 512 SEND + 512 credit completions"), std::string::npos) << r.output;
}

TEST(Stress, CleanLinkDeliversEveryByte) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({bin_dir() + "/simnic-stress", "-a", "simnic0", "-b", "simnic1", "-t", "64", "-d", "4"}, 120s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("OK"), std::string::npos) << r.output;
  std::printf("%s", r.output.c_str());
}

}  // namespace
}  // namespace simnic::it
