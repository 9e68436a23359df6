// The command line as a student meets it: --help on every subcommand (never taken for a NIC or
// program name), a taken address that suggests --addr, `simnic status NAME` that explains its
// counters and lists QPs, and `simnic logs` that finds the logs, this run's and the last.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <thread>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

class CliHelp : public ::testing::TestWithParam<const char*> {};

TEST_P(CliHelp, PrintsUsageAndExitsZero) {
  Result r = run({bin_dir() + "/simnic", GetParam(), "--help"}, {{"SIMNIC_DIR", "/nonexistent/simnic-help"}}, 10s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("usage: simnic", 0), 0u) << r.output;
  EXPECT_EQ(r.output.find("not running"), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(EverySubcommand, CliHelp,
                         ::testing::Values("up", "down", "status", "run", "env", "fault", "step", "viz", "lab", "logs",
                                           "bench"));

TEST(Cli, RunHelpDoesNotRunAProgram) {
  Result r = run({bin_dir() + "/simnic", "run", "--help"}, {}, 10s);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("--quiet"), std::string::npos) << r.output;
}

TEST(Cli, ATakenAddressSuggestsAddr) {
  Nics first(1);
  ASSERT_TRUE(first.ok()) << first.up_result().output;
  char dir[] = "/tmp/simnic-it-taken-XXXXXX";  // another SIMNIC_DIR, the same address
  ASSERT_NE(::mkdtemp(dir), nullptr);
  Result r = run({bin_dir() + "/simnic", "up", "1", "--addr", first.addr(0)}, {{"SIMNIC_DIR", dir}}, 30s);
  run({bin_dir() + "/simnic", "down"}, {{"SIMNIC_DIR", dir}}, 30s);
  run({"rm", "-rf", dir});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("Address already in use"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("simnic up --addr 127.0.N.1"), std::string::npos) << r.output;
}

TEST(Cli, StatusOfOneNicExplainsItsCountersAndListsQps) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  // A pingpong in flight: its QP shows, with its peer.
  const std::string port = std::to_string(free_tcp_port());
  auto srv = nics.start({"ibv_rc_pingpong", "-d", "simnic0", "-g", "0", "-n", "200000", "-p", port});
  ASSERT_TRUE(wait_for_listener(std::stoi(port), 10s)) << srv->output();
  auto cli = nics.start({"ibv_rc_pingpong", "-d", "simnic1", "-g", "0", "-n", "200000", "-p", port, nics.addr(0)});
  std::string text;
  for (int i = 0; i < 100 && text.find(" RC RTS peer=" + nics.addr(1)) == std::string::npos; ++i) {
    std::this_thread::sleep_for(50ms);
    text = run({bin_dir() + "/simnic", "status", "simnic0"}, nics.env(), 10s).output;
  }
  EXPECT_NE(text.find("rx_drop_no_qp"), std::string::npos) << text;
  EXPECT_NE(text.find("for a QPN this NIC does not have"), std::string::npos) << text;
  EXPECT_NE(text.find("Reliability (RC)"), std::string::npos) << text;
  EXPECT_NE(text.find(" RC RTS peer=" + nics.addr(1) + "/0x"), std::string::npos) << text;
  Result raw = run({bin_dir() + "/simnic", "status", "simnic0", "--raw"}, nics.env(), 10s);
  EXPECT_NE(raw.output.find("\nrx_drop_no_qp 0\n"), std::string::npos) << raw.output;
}

TEST(Cli, LogsShowThisRunAndKeepThePrevious) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result first = run({bin_dir() + "/simnic", "logs", "simnic0"}, nics.env(), 10s);
  EXPECT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("simnic0 ready on " + nics.addr(0)), std::string::npos) << first.output;
  ASSERT_EQ(run({bin_dir() + "/simnic", "down"}, nics.env(), 30s).exit_code, 0);
  ASSERT_EQ(run({bin_dir() + "/simnic", "up", "1", "--addr", nics.addr(0)}, nics.env(), 30s).exit_code, 0);
  Result previous = run({bin_dir() + "/simnic", "logs", "--previous"}, nics.env(), 10s);
  EXPECT_NE(previous.output.find("simnic0 ready on"), std::string::npos) << previous.output;
  EXPECT_NE(previous.output.find(".log.1"), std::string::npos) << "names the file: " << previous.output;
}

}  // namespace
}  // namespace simnic::it
