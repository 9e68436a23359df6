// NICs that run as one simnicd, on one event loop (`simnic up --one-process`; simnicd --next):
// what a user sees of that, and that the data still arrives.

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

bool process_gone(pid_t pid) {
  const std::string stat = "/proc/" + std::to_string(pid) + "/stat";
  if (::kill(pid, 0) != 0 || !std::filesystem::exists(stat)) return true;
  std::ifstream in(stat);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  return all.find(") Z ") != std::string::npos;  // a zombie waiting for its adopter is gone enough
}

bool gone_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!process_gone(pid) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  return process_gone(pid);
}

// Three NICs, one process: every byte of a soak between two of them checked (simnic-soak), the
// third idle; status names one pid for all; `simnic restart` of one restarts all in place (same
// pid and addresses) and they carry traffic again; `simnic down` of one NIC says the others stop
// too, and stops the process.
TEST(OneProcess, NicsOnLoopbackShareOneProcessCarryTrafficAndStopTogether) {
  Nics nics(3, {"--no-history", "--one-process"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::vector<pid_t> pids = nics.daemon_pids();
  ASSERT_EQ(pids.size(), 3u);
  EXPECT_EQ(pids[0], pids[1]);
  EXPECT_EQ(pids[0], pids[2]);
  for (const char* nic : {"simnic0", "simnic1", "simnic2"})
    EXPECT_EQ(nics.status(nic)["pid"], std::to_string(pids[0])) << nic;
  EXPECT_EQ(nics.status("simnic2")["addr"], nics.addr(2));

  auto soak = nics.run({bin_dir() + "/simnic-soak", "-a", "simnic0", "-b", "simnic1", "-t", "2", "-q", "4", "-s",
                        "16384", "-d", "5", "-T", "60"},
                       90s);
  EXPECT_EQ(soak.exit_code, 0) << soak.output;
  EXPECT_NE(soak.output.find(", errors 0"), std::string::npos) << soak.output;
  for (const char* nic : {"simnic0", "simnic1"}) {
    auto st = nics.status(nic);
    EXPECT_NE(st["completions"], "0") << nic;
    EXPECT_EQ(st["completion_errors"], "0") << nic;
    EXPECT_EQ(st["retransmits"], "0") << nic;
  }

  Result restart = run({bin_dir() + "/simnic", "restart", "simnic1"}, nics.env(), 30s);
  EXPECT_EQ(restart.exit_code, 0) << restart.output;
  EXPECT_NE(restart.output.find("simnic1 restarted in place (pid " + std::to_string(pids[0]) + "; " + nics.addr(1) +
                                ":4791 stayed bound throughout)"),
            std::string::npos)
      << restart.output;
  EXPECT_NE(restart.output.find("simnic0, simnic2 restarted with it"), std::string::npos) << restart.output;
  for (int i = 0; i < 3; ++i) {
    auto st = nics.status("simnic" + std::to_string(i));
    EXPECT_EQ(st["pid"], std::to_string(pids[0])) << i;
    EXPECT_EQ(st["addr"], nics.addr(i)) << i;
  }
  auto again = nics.run({bin_dir() + "/simnic-soak", "-a", "simnic2", "-b", "simnic1", "-t", "1", "-q", "2", "-s",
                         "4096", "-d", "2", "-T", "60"},
                        60s);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find(", errors 0"), std::string::npos) << again.output;

  Result down = run({bin_dir() + "/simnic", "down", "simnic1"}, nics.env(), 30s);
  EXPECT_EQ(down.exit_code, 0) << down.output;
  EXPECT_NE(down.output.find("simnic1 shares its process with simnic0, simnic2 (simnic up --one-process): they "
                             "stop too"),
            std::string::npos)
      << down.output;
  EXPECT_TRUE(gone_within(pids[0], 5s));
  EXPECT_TRUE(nics.daemon_pids().empty()) << "pid files left behind";
  Result status = run({bin_dir() + "/simnic", "status", "simnic0"}, nics.env(), 10s);
  EXPECT_NE(status.exit_code, 0) << status.output;

  // One log for the process, reached by each NIC's name; the next `up` keeps it as the previous.
  Result up = run({bin_dir() + "/simnic", "up", "2", "--addr", nics.addr(0), "--one-process"}, nics.env(), 30s);
  ASSERT_EQ(up.exit_code, 0) << up.output;
  Result logs = run({bin_dir() + "/simnic", "logs", "simnic1"}, nics.env(), 10s);
  EXPECT_NE(logs.output.find("simnic1 ready on " + nics.addr(1)), std::string::npos) << logs.output;
  Result previous = run({bin_dir() + "/simnic", "logs", "--previous", "simnic1"}, nics.env(), 10s);
  EXPECT_NE(previous.output.find("simnic2 stopped"), std::string::npos) << previous.output;
  EXPECT_EQ(logs.output.find("simnic2"), std::string::npos) << "this run has two NICs: " << logs.output;
}

// Without --one-process each NIC is a simnicd of its own, so one can die alone and its peer goes
// on serving.
TEST(OneProcess, WithoutItEachNicHasItsOwnProcess) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::vector<pid_t> pids = nics.daemon_pids();
  ASSERT_EQ(pids.size(), 2u);
  EXPECT_NE(pids[0], pids[1]);
  ::kill(pids[0], SIGKILL);
  EXPECT_TRUE(gone_within(pids[0], 5s));
  EXPECT_EQ(nics.status("simnic1")["pid"], std::to_string(pids[1]));
}

// simnicd checks each NIC's options on its own part of the command line, and says which NIC
// a bad one belongs to.
TEST(OneProcess, SimnicdRefusesABadOptionAfterNext) {
  Result r =
      run({bin_dir() + "/simnicd", "--name", "a0", "--addr", "127.0.0.1", "--next", "--name", "a1", "--mtu", "777"}, {},
          10s);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("777"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace simnic::it
