// Issue 14 point 3: 1,000 RC QP pairs between two NICs, 64 KiB WRITEs at queue depth 4 each
// (Debian's ib_write_bw -q 1000 -n 5, unmodified; perftest wants at least 5 iterations), with
// no loss injected: no completion fails, the receiving NIC's socket buffer never overflows, and
// the per-peer window (simnic/core/engines/congestion.h) holds nothing once the run is over. With loss injected the
// window is halved (AIMD) and every operation still completes.
#include <gtest/gtest.h>

#include "harness.h"
#include "perftest_pair.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

// Server on simnic0, client on simnic1: ib_write_bw with `args`. Both must exit 0.
void run_write_bw(const Nics& nics, std::vector<std::string> args) {
  args.push_back("-F");
  std::string out;
  ASSERT_NO_FATAL_FAILURE(run_perftest_pair(nics, "ib_write_bw", args, &out, PerftestLimits{60s, 240s, 60s}));
  EXPECT_NE(out.find("#bytes"), std::string::npos) << out;
}

TEST(ManyQps, AThousandQpPairsWriteWithoutAnErrorCompletion) {
  if (!have_program("ib_write_bw")) GTEST_SKIP() << "perftest is not installed (scripts/setup.sh installs it)";
  Nics nics(2, {"--no-history"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  run_write_bw(nics, {"-s", "65536", "-t", "4", "-q", "1000", "-n", "5"});
  for (const char* nic : {"simnic0", "simnic1"}) {
    auto st = nics.status(nic);
    EXPECT_EQ(st["completion_errors"], "0") << nic;
    EXPECT_EQ(st["rx_drop_socket_overflow"], "0") << nic << ": the receiver's socket buffer overflowed";
    EXPECT_EQ(st["cc_in_flight"], "0") << nic << ": credit still held after the run";
    EXPECT_EQ(st["cc_waiting_qps"], "0") << nic;
    EXPECT_NE(st["rx_socket_buffer"], "0") << nic;
    std::printf("%s: retransmits %s timeouts %s cc_waits %s cc_wakeups %s\n", nic, st["retransmits"].c_str(),
                st["timeouts"].c_str(), st["cc_waits"].c_str(), st["cc_wakeups"].c_str());
  }
  // 5,000 messages of 64 KiB from 1,000 QPs do not fit in one window: the sender's QPs waited.
  EXPECT_NE(nics.status("simnic1")["cc_waits"], "0");
}

TEST(ManyQps, LossHalvesThePeerWindowAndEverythingCompletes) {
  if (!have_program("ib_write_bw")) GTEST_SKIP() << "perftest is not installed (scripts/setup.sh installs it)";
  Nics nics(2, {"--no-history", "--loss", "0.005", "--seed", "7"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  run_write_bw(nics, {"-s", "65536", "-t", "4", "-q", "32", "-n", "50"});
  for (const char* nic : {"simnic0", "simnic1"}) {
    auto st = nics.status(nic);
    EXPECT_EQ(st["completion_errors"], "0") << nic;
    EXPECT_EQ(st["cc_in_flight"], "0") << nic;
  }
  auto sender = nics.status("simnic1");
  EXPECT_NE(sender["fault_drops"], "0");
  EXPECT_NE(sender["retransmits"], "0");
  EXPECT_NE(sender["cc_cuts"], "0") << "losses should halve the window towards the peer";
}

}  // namespace
}  // namespace simnic::it
