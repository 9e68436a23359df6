// `simnic` as users meet it: clear messages when nothing runs or a port is taken, cleanup
// after an application dies, and `down` stopping every daemon it started.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

std::map<std::string, std::string> private_dir_env(const std::string& tag) {
  std::string dir = "/tmp/simnic-it-empty-" + tag + "-" + std::to_string(::getpid());
  return {{"SIMNIC_DIR", dir}};
}

TEST(Cli, StatusAndRunSayWhenNoNicIsRunning) {
  auto env = private_dir_env("none");
  Result st = run({bin_dir() + "/simnic", "status"}, env, 10s);
  EXPECT_EQ(st.exit_code, 1);
  EXPECT_NE(st.output.find("no NIC is running"), std::string::npos) << st.output;
  Result r = run({bin_dir() + "/simnic", "run", "--", "ibv_devices"}, env, 10s);
  EXPECT_NE(r.output.find("no NIC is running"), std::string::npos) << r.output;
  Result d = run({bin_dir() + "/simnic", "down"}, env, 10s);
  EXPECT_EQ(d.exit_code, 0) << d.output;
  std::filesystem::remove_all(env["SIMNIC_DIR"]);
}

// <dir>/sysfs is the NICs' sysfs root (ibv_get_sysfs_path), so no NIC may take that name.
TEST(Cli, UpRefusesTheNameOfTheSysfsRoot) {
  auto env = private_dir_env("sysfsname");
  Result up = run({bin_dir() + "/simnic", "up", "1", "--name", "sysfs", "--addr", "127.0.0.1"}, env, 10s);
  EXPECT_EQ(up.exit_code, 2) << up.output;
  EXPECT_NE(up.output.find("not \"sysfs\""), std::string::npos) << up.output;
  std::filesystem::remove_all(env["SIMNIC_DIR"]);
}

TEST(Cli, UpExplainsATakenPort) {
  // Hold UDP 4791 on the address the NIC would use.
  const std::string addr = "127.3." + std::to_string(1 + ::getpid() % 250) + ".9";
  int s = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(4791);
  inet_pton(AF_INET, addr.c_str(), &a.sin_addr);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  auto env = private_dir_env("port");
  Result up = run({bin_dir() + "/simnic", "up", "1", "--addr", addr}, env, 20s);
  ::close(s);
  run({bin_dir() + "/simnic", "down"}, env, 10s);
  EXPECT_EQ(up.exit_code, 1) << up.output;
  EXPECT_NE(up.output.find("did not start"), std::string::npos) << up.output;
  EXPECT_NE(up.output.find("4791"), std::string::npos) << up.output;
  EXPECT_NE(up.output.find("in use"), std::string::npos) << up.output;
  EXPECT_NE(up.output.find(addr + ":4791 is held by a process of yours that is not a NIC (pid " +
                           std::to_string(::getpid()) + ")"),
            std::string::npos)
      << up.output;
  std::filesystem::remove_all(env["SIMNIC_DIR"]);
}

// Issue 29 point 3: while A restarts a NIC, B (here `nobody`) binds its address and port.
// A's `simnic up` must say who holds it and that the NIC's traffic would reach them.
TEST(Cli, UpNamesAnotherUserWhoHoldsItsAddress) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root to run the squatter as user nobody";
  const std::string addr = "127.94." + std::to_string(1 + ::getpid() % 250) + ".2";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t squatter = ::fork();
  ASSERT_GE(squatter, 0);
  if (squatter == 0) {  // user B: bind the address, say so, hold it until killed
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    int s = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(4791);
    inet_pton(AF_INET, addr.c_str(), &a.sin_addr);
    if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ::_exit(3);
    if (::write(ready[1], "x", 1) != 1) ::_exit(4);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  const bool bound = ::read(ready[0], &c, 1) == 1;
  ::close(ready[0]);
  auto env = private_dir_env("squat");
  Result up;
  if (bound) up = run({bin_dir() + "/simnic", "up", "1", "--name", "simnic1", "--addr", addr}, env, 20s);
  ::kill(squatter, SIGKILL);
  ::waitpid(squatter, nullptr, 0);
  run({bin_dir() + "/simnic", "down"}, env, 10s);
  std::filesystem::remove_all(env["SIMNIC_DIR"]);
  ASSERT_TRUE(bound) << "user nobody could not bind " << addr << ":4791";
  EXPECT_EQ(up.exit_code, 1) << up.output;
  EXPECT_NE(up.output.find(addr + ":4791 is held by user "), std::string::npos) << up.output;
  EXPECT_NE(up.output.find("(uid 65534), not by a simnic NIC of yours: your NIC's traffic"), std::string::npos)
      << up.output;
}

TEST(Cli, UpTwiceKeepsTheRunningNics) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  auto before = nics.daemon_pids();
  Result again = run({bin_dir() + "/simnic", "up", "2", "--addr", nics.addr(0)}, nics.env(), 20s);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("simnic0 is already running"), std::string::npos) << again.output;
  EXPECT_EQ(nics.daemon_pids(), before);
}

TEST(Cli, DownStopsEveryDaemonByPid) {
  std::vector<pid_t> pids;
  {
    Nics nics(3);
    ASSERT_TRUE(nics.ok()) << nics.up_result().output;
    pids = nics.daemon_pids();
    ASSERT_EQ(pids.size(), 3u);
    Result st = run({bin_dir() + "/simnic", "status"}, nics.env(), 10s);
    EXPECT_NE(st.output.find(nics.addr(2)), std::string::npos) << st.output;
    Result d = run({bin_dir() + "/simnic", "down"}, nics.env(), 30s);
    EXPECT_EQ(d.exit_code, 0) << d.output;
    EXPECT_NE(d.output.find("simnic2 stopped"), std::string::npos) << d.output;
  }
  std::this_thread::sleep_for(100ms);
  for (pid_t p : pids) {
    std::string stat = "/proc/" + std::to_string(p) + "/stat";
    bool alive = ::kill(p, 0) == 0 && std::filesystem::exists(stat);
    if (alive) {  // a zombie waiting for its adopter is dead enough
      std::ifstream in(stat);
      std::string all((std::istreambuf_iterator<char>(in)), {});
      alive = all.find(") Z ") == std::string::npos;
    }
    EXPECT_FALSE(alive) << "pid " << p;
  }
}

// Issue 29 point 3, the fix: `simnic restart` keeps the NIC's UDP socket bound while simnicd
// executes itself anew, so user B (nobody), trying to bind the address all the while, never
// gets it; the NIC comes back with the same pid and address and carries traffic again.
TEST(Cli, RestartKeepsTheAddressSoNoOtherUserCanTakeIt) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root to run the squatter as user nobody";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::string addr = nics.addr(1);
  const pid_t nic_pid = nics.daemon_pids().at(1);
  int got[2];
  ASSERT_EQ(::pipe(got), 0);
  pid_t squatter = ::fork();
  ASSERT_GE(squatter, 0);
  if (squatter == 0) {  // user B: try to bind the address until killed; say so if it worked
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(4791);
    inet_pton(AF_INET, addr.c_str(), &a.sin_addr);
    for (;;) {
      int s = ::socket(AF_INET, SOCK_DGRAM, 0);
      if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::write(got[1], "B", 1) == 1) ::pause();
      ::close(s);
    }
  }
  ::close(got[1]);
  Result restarts[3];
  for (auto& r : restarts) r = run({bin_dir() + "/simnic", "restart", "simnic1"}, nics.env(), 20s);
  ::kill(squatter, SIGKILL);
  ::waitpid(squatter, nullptr, 0);
  char c = 0;
  const bool squatted = ::read(got[0], &c, 1) == 1;
  ::close(got[0]);
  for (const auto& r : restarts) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("simnic1 restarted in place (pid " + std::to_string(nic_pid) + "; " + addr +
                            ":4791 stayed bound throughout)"),
              std::string::npos)
        << r.output;
  }
  EXPECT_FALSE(squatted) << "user nobody bound " << addr << ":4791 during a restart";
  auto st = nics.status("simnic1");
  EXPECT_EQ(st["addr"], addr);
  EXPECT_EQ(st["pid"], std::to_string(nic_pid));
  if (!have_program("ibv_rc_pingpong")) return;
  const int port = free_tcp_port();  // traffic both ways through the restarted NIC's socket
  auto srv = nics.start({"ibv_rc_pingpong", "-d", "simnic1", "-g", "0", "-n", "100", "-p", std::to_string(port)});
  ASSERT_TRUE(wait_for_listener(port, 10s)) << srv->output();
  Result cl =
      nics.run({"ibv_rc_pingpong", "-d", "simnic0", "-g", "0", "-n", "100", "-p", std::to_string(port), addr}, 30s);
  EXPECT_EQ(cl.exit_code, 0) << cl.output;
  EXPECT_EQ(srv->wait(20s).exit_code, 0) << srv->output();
}

// A program killed mid-run leaves nothing behind: simnicd frees its QP, CQ, MR and PD when
// its control connection closes, and goes on serving others.
TEST(Cli, ADyingApplicationIsCleanedUpAndTheNicKeepsServing) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const int port = free_tcp_port();
  auto srv = nics.start({"ibv_rc_pingpong", "-d", "simnic0", "-g", "0", "-p", std::to_string(port)});
  ASSERT_TRUE(wait_for_listener(port, 10s)) << srv->output();
  auto st = nics.status("simnic0");
  EXPECT_EQ(st["contexts"], "1");
  EXPECT_EQ(st["qps"], "1");
  EXPECT_EQ(st["mrs"], "1");
  ::kill(srv->pid(), SIGKILL);
  srv->wait(10s);
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline && nics.status("simnic0")["contexts"] != "0")
    std::this_thread::sleep_for(20ms);
  st = nics.status("simnic0");
  EXPECT_EQ(st["contexts"], "0");
  EXPECT_EQ(st["qps"], "0");
  EXPECT_EQ(st["cqs"], "0");
  EXPECT_EQ(st["mrs"], "0");
  EXPECT_EQ(st["pds"], "0");
  Result r = nics.run({bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic1", "-n", "1"}, 60s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace simnic::it
