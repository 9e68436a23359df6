// An empty ibv_poll_cq sleeps on its context's completion sequence (shim/poll_wait.cc) and
// simnicd wakes it when it writes a CQE (simnic/core/objects/context_page.cc). Here the pollers sleep
// up to 10 s per empty poll (after no spin, or after the default spin): a ping-pong of 300
// round trips can only end within its limit if every completion wakes the poller that waits
// for it. With SIMNIC_POLL_SPIN_US=off they never sleep (the old yielding poll).
#include <gtest/gtest.h>

#include <functional>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

// The server (`side("simnic0")`) and then its client (`side("simnic1")`, towards 127.0.0.1)
// within their limits: both exit 0, the client prints `done`, neither NIC counts an error
// completion.
void run_pair(const Nics& nics, const std::string& port,
              const std::function<std::vector<std::string>(const char*)>& side, std::chrono::milliseconds client_limit,
              std::chrono::milliseconds server_limit, const char* done) {
  auto srv = nics.start(side("simnic0"));
  ASSERT_TRUE(wait_for_listener(std::stoi(port), 10s)) << srv->output();
  auto client = side("simnic1");
  client.push_back("127.0.0.1");
  Result cl = nics.run(client, client_limit);
  Result sv = srv->wait(server_limit);
  std::string command;
  for (const std::string& a : client) command += a + " ";
  ASSERT_EQ(cl.exit_code, 0) << command << "\nclient:\n" << cl.output << "\nserver:\n" << sv.output;
  ASSERT_EQ(sv.exit_code, 0) << "server:\n" << sv.output;
  EXPECT_NE(cl.output.find(done), std::string::npos) << cl.output;
  for (const char* nic : {"simnic0", "simnic1"}) EXPECT_EQ(nics.status(nic)["completion_errors"], "0") << nic;
}

// `spin`: SIMNIC_POLL_SPIN_US's value, or nullptr for the default; `busy`: SIMNIC_POLL_BUSY_US's.
void sleeping_pingpong(const char* program, const std::vector<std::string>& args, const char* spin = "0",
                       const char* busy = nullptr) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::string port = std::to_string(free_tcp_port());
  auto side = [&](const char* nic) {
    std::vector<std::string> v = {
        "env", "-u", "SIMNIC_POLL_SPIN_US", "-u", "SIMNIC_POLL_BUSY_US", "SIMNIC_POLL_SLEEP_US=10000000"};
    if (spin) v.push_back(std::string("SIMNIC_POLL_SPIN_US=") + spin);
    if (busy) v.push_back(std::string("SIMNIC_POLL_BUSY_US=") + busy);
    v.insert(v.end(), {program, "-d", nic, "-g", "0", "-p", port});
    v.insert(v.end(), args.begin(), args.end());
    return v;
  };
  run_pair(nics, port, side, 120s, 30s, " iters in ");
}

TEST(PollWait, SleepingRcPollersAreWokenByEveryCompletion) {
  sleeping_pingpong("ibv_rc_pingpong", {"-s", "4096", "-n", "300"});
}

// ibv_ud_pingpong polls one CQ for both its sends and its receives; the SRQ ping-pong polls
// one CQ for 4 QPs.
TEST(PollWait, SleepingUdAndSrqPollersAreWokenByEveryCompletion) {
  sleeping_pingpong("ibv_ud_pingpong", {"-s", "1024", "-n", "300"});
  sleeping_pingpong("ibv_srq_pingpong", {"-s", "2048", "-n", "200", "-q", "4"});
}

// The default: a spin that keeps the CPU for 100 us, then the same sleep.
TEST(PollWait, DefaultPollersSpinThenSleepAndAreWoken) {
  sleeping_pingpong("ibv_rc_pingpong", {"-s", "4096", "-n", "300"}, nullptr);
}

// Pollers that only ever spin (never yield, never sleep) on both sides still let both NICs run:
// a NIC with work is woken and preempts a spinning poller.
TEST(PollWait, PollersThatOnlySpinStillLetTheNicsRun) {
  sleeping_pingpong("ibv_rc_pingpong", {"-s", "4096", "-n", "300"}, "100000000", "100000000");
}

// A spin that yields after its first 50 us (SIMNIC_POLL_BUSY_US below the spin, the default
// before 2026-11-27), then sleeps.
TEST(PollWait, PollersThatYieldPartOfTheSpinThenSleepAreWoken) {
  sleeping_pingpong("ibv_rc_pingpong", {"-s", "4096", "-n", "300"}, "100", "50");
}

// The way back to yielding forever, for programs that want a CPU of their own.
TEST(PollWait, PollersThatNeverSleepStillComplete) {
  sleeping_pingpong("ibv_rc_pingpong", {"-s", "4096", "-n", "300"}, "off");
}

// perftest's bandwidth tests stream: 100 posts per signaled completion, receives found in
// batches, so their pollers spin only SIMNIC_POLL_STREAM_SPIN_US (5 us) before they sleep, up to
// 30 s per empty poll here. The run ends within 25 s only if every completion wakes the poller
// that sleeps for it, on both sides, for SENDs, READs and WRITEs.
void sleeping_stream(const char* program, const std::vector<std::string>& args) {
  if (!have_program(program)) GTEST_SKIP() << "perftest is not installed (scripts/setup.sh installs it)";
  Nics nics(2, {"--no-history"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::string port = std::to_string(free_tcp_port());
  auto side = [&](const char* nic) {
    std::vector<std::string> v = {"env",
                                  "-u",
                                  "SIMNIC_POLL_SPIN_US",
                                  "-u",
                                  "SIMNIC_POLL_STREAM_SPIN_US",
                                  "SIMNIC_POLL_SLEEP_US=30000000",
                                  program,
                                  "-d",
                                  nic,
                                  "-x",
                                  "0",
                                  "-p",
                                  port,
                                  "-F"};
    v.insert(v.end(), args.begin(), args.end());
    return v;
  };
  run_pair(nics, port, side, 25s, 10s, "#bytes");
}

TEST(PollWait, StreamingPollersSleepAfterAShortSpinAndAreWoken) {
  sleeping_stream("ib_send_bw", {"-s", "64", "-n", "20000"});
  sleeping_stream("ib_read_bw", {"-s", "256", "-n", "20000"});
  sleeping_stream("ib_write_bw", {"-s", "4096", "-n", "5000"});
}

}  // namespace
}  // namespace simnic::it
