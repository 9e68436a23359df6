// Posts that send themselves (issue 26 point 4; simnic/abi/direct_send.h), as programs meet
// them: unmodified programs whose RC QPs go idle between posts send those posts' packets from
// their NIC's socket, every byte still arrives and nothing is resent; SIMNIC_DIRECT_SEND=0 in a
// program's environment keeps its posts the NIC's; a NIC that injects faults or writes a pcap
// lends nothing, so every packet goes through them.

#include <gtest/gtest.h>

#include <string>

#include "harness.h"
#include "perftest_pair.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

uint64_t counter(const Nics& nics, const char* nic, const char* name) { return std::stoull(nics.status(nic)[name]); }

uint64_t direct_sends(const Nics& nics) {
  return counter(nics, "simnic0", "direct_sends") + counter(nics, "simnic1", "direct_sends");
}

void expect_clean(const Nics& nics) {
  for (const char* nic : {"simnic0", "simnic1"}) {
    EXPECT_EQ(counter(nics, nic, "completion_errors"), 0u) << nic;
    EXPECT_EQ(counter(nics, nic, "retransmits"), 0u) << nic;
    EXPECT_EQ(counter(nics, nic, "rx_drop_icrc"), 0u) << nic;
  }
}

// A soak round posts one operation on each QP pair and waits for all of them: between rounds
// every QP is idle, so its next SEND or WRITE of up to 4 KiB goes from the program. No history:
// a NIC that traces lends nothing (direct_send.cc).
TEST(DirectSend, ASoaksSendsAndWritesLeaveFromTheProgramAndEveryByteArrives) {
  Nics nics(2, {"--no-history"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  auto soak = nics.run({bin_dir() + "/simnic-soak", "-t", "2", "-q", "4", "-s", "4096", "-d", "4", "-T", "60"}, 90s);
  EXPECT_EQ(soak.exit_code, 0) << soak.output;
  EXPECT_NE(soak.output.find(", errors 0"), std::string::npos) << soak.output;
  EXPECT_GT(direct_sends(nics), 100u) << soak.output;
  expect_clean(nics);
}

// ib_write_lat posts one WRITE at a time and waits for it: after the first, every post of both
// sides sends its own packet. The same run with SIMNIC_DIRECT_SEND=0 in the programs'
// environment sends none.
TEST(DirectSend, PerftestLatencyPostsSendThemselvesUnlessTheProgramSaysNo) {
  if (!have_program("ib_write_lat")) GTEST_SKIP() << "perftest is not installed";
  Nics nics(2, {"--no-history"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  ASSERT_NO_FATAL_FAILURE(run_perftest_pair(nics, "ib_write_lat", {"-s", "2", "-n", "2000"}));
  const uint64_t sent = direct_sends(nics);
  EXPECT_GE(sent, 2 * 2000u * 9 / 10);
  expect_clean(nics);

  const int port = free_tcp_port();
  auto side = [&](const char* nic) {
    return std::vector<std::string>{"env", "SIMNIC_DIRECT_SEND=0", "ib_write_lat", "-d", nic,  "-x", "0",
                                    "-p",  std::to_string(port),   "-s",           "2",  "-n", "500"};
  };
  auto server = nics.start(side("simnic0"));
  ASSERT_TRUE(wait_for_listener(port, 15s)) << server->output();
  std::vector<std::string> client = side("simnic1");
  client.push_back("127.0.0.1");
  Result cl = nics.run(client, 60s);
  Result sv = server->wait(30s);
  ASSERT_EQ(cl.exit_code, 0) << cl.output;
  ASSERT_EQ(sv.exit_code, 0) << sv.output;
  EXPECT_EQ(direct_sends(nics), sent);
}

// Loss injected, or a pcap written: the fault injector must see every packet, and the capture
// must hold it, so no PSN is lent and the programs' posts ring as before.
TEST(DirectSend, ANicThatInjectsFaultsOrCapturesLendsNothing) {
  const ScratchDir scratch("direct-send-pcap");
  const std::string& pcap_dir = scratch.path();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--no-history", "--loss", "0.001", "--seed", "3"},
        std::vector<std::string>{"--no-history", "--pcap-dir", pcap_dir}}) {
    Nics nics(2, args);
    ASSERT_TRUE(nics.ok()) << nics.up_result().output;
    auto soak =
        nics.run({bin_dir() + "/simnic-soak", "-t", "1", "-q", "2", "-s", "4096", "-n", "200", "-T", "60"}, 90s);
    EXPECT_EQ(soak.exit_code, 0) << args[1] << "\n" << soak.output;
    EXPECT_NE(soak.output.find(", errors 0"), std::string::npos) << soak.output;
    EXPECT_EQ(direct_sends(nics), 0u) << args[1];
  }
}

}  // namespace
}  // namespace simnic::it
