// One user cannot take a NIC's connections from everyone else (issue 29 point 7): simnicd
// raises its descriptor limit to the hard limit at start, and holds each user (uid) to 3/4 of
// the connections that limit allows (SessionShares), refusing the next one with EMFILE and the
// reason, which the shim prints. (Before, at `ulimit -n 1024`, 1,007 connections exhausted a
// NIC and every other client got EAGAIN without a word.) Object shares per user are
// protocol behaviour: tests/unit/core/limits_and_keys_test.cc, UserShares.*.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness.h"
#include "simnic/abi/paths.h"
#include "simnic/abi/seqpacket.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

// "Max open files  <soft>  <hard>  files" from /proc/<pid>/limits.
std::pair<std::string, std::string> open_files_limit(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/limits");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Max open files", 0) != 0) continue;
    std::istringstream words(line.substr(14));
    std::string soft, hard;
    words >> soft >> hard;
    return {soft, hard};
  }
  return {};
}

// A query-only connection (what ibv_get_device_list and the CLI open): 0 or the refusal.
int hello(int fd) {
  abi::HelloReply rep{};
  return abi::call_fixed(fd, abi::Op::Hello, abi::HelloReq{abi::kAbiVersion, 0}, &rep);
}

TEST(Fairness, SimnicdRaisesItsDescriptorLimitToTheHardLimit) {
  rlimit mine{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &mine), 0);
  if (mine.rlim_max == RLIM_INFINITY || mine.rlim_max < 512) GTEST_SKIP() << "needs a finite hard limit of 512 or more";
  const rlimit saved = mine;
  mine.rlim_cur = 256;  // simnicd inherits this soft limit from `simnic up`
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &mine), 0);
  Nics nics(1);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  auto [soft, hard] = open_files_limit(nics.daemon_pids().at(0));
  EXPECT_EQ(hard, std::to_string(mine.rlim_max));
  EXPECT_EQ(soft, hard) << "simnicd kept the soft limit it was started with";
}

TEST(Fairness, OneUserHoldsAtMostItsShareOfTheNicsConnectionsAndIsToldWhy) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const pid_t nic = nics.daemon_pids().at(0);
  // A small limit, as `ulimit -n 256` would give: 3/4 of (256 - 64) / 4 = 36 connections a user.
  ASSERT_EQ(run({"prlimit", "--pid", std::to_string(nic), "--nofile=256:256"}).exit_code, 0);
  const size_t share = 36;  // SessionShares::per_user(256), simnic/io/control_listener.h
  const std::string path = abi::control_socket_path(nics.dir(), "simnic0");
  std::vector<int> conns;
  for (size_t i = 0; i < share; ++i) {
    conns.push_back(abi::connect_control(path));
    ASSERT_GE(conns.back(), 0) << i;
    ASSERT_EQ(hello(conns.back()), 0) << "connection " << i << ": " << abi::last_refusal();
  }
  // The next one is refused with EMFILE and the rule, then closed by the NIC.
  int over = abi::connect_control(path);
  ASSERT_GE(over, 0);
  EXPECT_EQ(hello(over), EMFILE);
  const std::string why = abi::last_refusal();
  EXPECT_NE(why.find("already has 36 connections to simnic0"), std::string::npos) << why;
  EXPECT_NE(why.find("at most 36 per user"), std::string::npos) << why;
  ::close(over);
  // A program of this user hears the same on its stderr, from the shim.
  if (have_program("ibv_devices")) {
    Result r = run({"ibv_devices"}, {{"SIMNIC_DIR", nics.dir()}, {"LD_LIBRARY_PATH", shim_dir()}}, 20s);
    EXPECT_NE(r.output.find("at most 36 per user"), std::string::npos) << r.output;
  }
  // The NIC said so in its log, and serves again once connections close.
  ::close(conns.back());
  conns.pop_back();
  bool served = false;
  for (auto deadline = std::chrono::steady_clock::now() + 5s; !served && std::chrono::steady_clock::now() < deadline;) {
    int again = abi::connect_control(path);
    served = again >= 0 && hello(again) == 0;
    if (again >= 0) ::close(again);
    if (!served) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(served) << abi::last_refusal();
  for (int c : conns) ::close(c);
  EXPECT_EQ(nics.status("simnic0")["contexts"], "0");
  std::string log;
  std::ifstream in(nics.dir() + "/simnic0.log");
  log.assign(std::istreambuf_iterator<char>(in), {});
  EXPECT_NE(log.find("refused a control connection of pid"), std::string::npos) << log;
}

// Connections of this process to `path` until one is refused (or `most` are open), each bounded
// by a receive timeout so that a NIC out of descriptors cannot hang the test. Returns them.
std::vector<int> connect_until_refused(const std::string& path, size_t most, int* refusal) {
  std::vector<int> conns;
  *refusal = 0;
  while (conns.size() < most) {
    int fd = abi::connect_control(path);
    if (fd < 0) break;
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (int e = hello(fd)) {
      *refusal = e;
      ::close(fd);
      break;
    }
    conns.push_back(fd);
  }
  return conns;
}

// The case of several users on one NIC that simnic allows today: a NIC serves its owner and
// root (control_listener.cc; the shim of any other user refuses it). Root's connections to a
// NIC that uid 65534 (nobody) runs stop at root's share, and the owner's programs still get in.
TEST(Fairness, AnotherUsersConnectionsLeaveTheOwnerItsShare) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a NIC as uid 65534 (nobody) beside root's connections";
  if (!have_program("setpriv") || !have_program("prlimit")) GTEST_SKIP() << "needs setpriv and prlimit";
  const std::vector<std::string> as_nobody = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  auto with = [&](std::vector<std::string> cmd) {
    std::vector<std::string> v = as_nobody;
    v.insert(v.end(), cmd.begin(), cmd.end());
    return v;
  };
  if (run(with({"test", "-x", bin_dir() + "/simnicd"}), {}, 10s).exit_code != 0 ||
      run(with({"test", "-r", shim_dir() + "/libibverbs.so.1"}), {}, 10s).exit_code != 0)
    GTEST_SKIP() << "uid 65534 cannot run " << bin_dir() << " (a private build tree)";
  char tmpl[] = "/tmp/simnic-it-fair-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  const std::string addr = "127.29." + std::to_string(1 + ::getpid() % 250) + ".1";  // this test's own
  const std::vector<std::string> env = {"env", "SIMNIC_DIR=" + dir, "LD_LIBRARY_PATH=" + shim_dir()};
  auto nobody_runs = [&](std::vector<std::string> cmd) {
    std::vector<std::string> v = env;
    v.insert(v.end(), cmd.begin(), cmd.end());
    return run(with(v), {}, 30s);
  };
  // Started with a small descriptor limit, as `ulimit -n 256` would give: 36 connections a user.
  Result up = nobody_runs({"prlimit", "--nofile=256:256", bin_dir() + "/simnic", "up", "1", "--addr", addr});
  long nic = 0;
  std::ifstream(dir + "/simnic0.pid") >> nic;
  auto cleanup = [&] {
    nobody_runs({bin_dir() + "/simnic", "down"});
    if (nic > 0) ::kill(pid_t(nic), SIGKILL);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  };
  if (up.exit_code != 0 || nic <= 0) {
    cleanup();
    FAIL() << "simnic up as uid 65534: " << up.output;
  }
  int refusal = 0;
  std::vector<int> roots = connect_until_refused(abi::control_socket_path(dir, "simnic0"), 60, &refusal);
  const std::string why = abi::last_refusal();
  Result owner = nobody_runs({bin_dir() + "/simnic", "status", "simnic0"});
  Result devices = have_program("ibv_devices") ? nobody_runs({"ibv_devices"}) : Result{0, "simnic0 (not run)", false};
  for (int fd : roots) ::close(fd);
  cleanup();

  EXPECT_EQ(roots.size(), 36u) << "root took more than its share of the NIC's connections";
  EXPECT_EQ(refusal, EMFILE);
  EXPECT_NE(why.find("uid 0 already has 36 connections to simnic0"), std::string::npos) << why;
  EXPECT_EQ(owner.exit_code, 0) << owner.output;  // the NIC's own user is still served
  EXPECT_NE(devices.output.find("simnic0"), std::string::npos) << devices.output;
}

}  // namespace
}  // namespace simnic::it
