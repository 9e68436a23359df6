// libfabric's verbs provider (Debian's libfabric-bin 1.17: fi_info, fi_pingpong) on two simnic
// NICs, under `simnic run --netns`: the provider keeps a device for FI_EP_MSG (and so for
// verbs;ofi_rxm FI_EP_RDM) only if an UP, non-loopback interface holds an address that
// rdma_bind_addr maps to it; --netns gives each NIC such an interface in a user + network
// namespace of the program's own. Both fi_pingpong processes run in ONE namespace (one
// `simnic run --netns -- sh -c 'server & client'`): the client reaches the server's control
// port at the server NIC's interface address, which exists only in that namespace. The server
// binds "localhost" and takes simnic0 (the first device holding an address); the client goes
// out through simnic1 (SIMNIC_CM_DEVICE, "the host it runs on"). -c checks every byte; both
// NICs must count the packets, so a fallback to another provider fails the test.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

constexpr uid_t kNobody = 65534;

std::string simnic() { return bin_dir() + "/simnic"; }

std::string missing_libfabric() {
  if (!have_program("fi_info") || !have_program("fi_pingpong"))
    return "fi_info/fi_pingpong are not installed (Debian package libfabric-bin)";
  return "";
}

// "" when `simnic run --netns` can make its namespace here, else why not (the test skips).
std::string netns_refused(const std::map<std::string, std::string>& env, const std::vector<std::string>& as = {}) {
  std::vector<std::string> argv = as;
  for (const std::string& a : {simnic(), std::string("run"), std::string("--netns"), std::string("--"),
                               std::string("true")})
    argv.push_back(a);
  Result r = run(argv, env, 20s);
  if (r.output.find("cannot create a user and network namespace") != std::string::npos)
    return "unprivileged user namespaces are not available here: " + r.output;
  return "";
}

uint64_t count(const std::map<std::string, std::string>& kv, const char* key) {
  auto it = kv.find(key);
  return it == kv.end() ? 0 : std::strtoull(it->second.c_str(), nullptr, 10);
}

// (provider, domain, type) of every fi_info entry in fi_info's output.
std::set<std::string> entries(const std::string& out) {
  std::set<std::string> got;
  std::istringstream in(out);
  std::string provider, domain;
  const std::regex field(R"(^\s*(provider|domain|type):\s*(\S+))");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, field)) continue;
    if (m[1] == "provider") provider = m[2];
    else if (m[1] == "domain") domain = m[2];
    else got.insert(provider + " " + domain + " " + std::string(m[2]));
  }
  return got;
}

// The fi_pingpong server in the background, the client once the server's control port
// (47592, 0xB9E8) listens in the namespace, then both exit codes.
std::string pingpong_script(const std::string& args, const std::string& server_addr) {
  return "out=$(mktemp); SIMNIC_CM_DEVICE=simnic0 fi_pingpong " + args + " >$out 2>&1 & srv=$!; "
         "i=0; while ! grep -q ':B9E8 00000000:0000 0A' /proc/net/tcp && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; "
         "SIMNIC_CM_DEVICE=simnic1 fi_pingpong " + args + " " + server_addr + "; c=$?; "
         "wait $srv; s=$?; echo '--- server:'; cat $out; rm -f $out; echo \"exit client $c server $s\"";
}

struct Counters {
  uint64_t tx[2], rx[2];
};

template <class StatusOf>
Counters counters(StatusOf status_of) {
  Counters c{};
  for (int i = 0; i < 2; ++i) {
    auto kv = status_of("simnic" + std::to_string(i));
    c.tx[i] = count(kv, "tx_packets");
    c.rx[i] = count(kv, "rx_packets");
  }
  return c;
}

void expect_pingpong_passed(const Result& r, const Counters& before, const Counters& after, uint64_t iterations) {
  EXPECT_FALSE(r.timed_out) << r.output;
  EXPECT_NE(r.output.find("exit client 0 server 0"), std::string::npos) << r.output;
  // The table, "bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec": 200 of 64 KiB (16
  // packets each at MTU 4096) sent and acknowledged, from the client and from the server.
  EXPECT_NE(r.output.find("bytes"), std::string::npos) << r.output;
  const std::regex row(R"(\n64k\s+200\s+=200\s)");
  EXPECT_EQ(std::distance(std::sregex_iterator(r.output.begin(), r.output.end(), row), std::sregex_iterator()), 2)
      << r.output;
  for (int i = 0; i < 2; ++i) {
    EXPECT_GE(after.tx[i] - before.tx[i], iterations) << "simnic" << i << " did not carry the ping-pong\n" << r.output;
    EXPECT_GE(after.rx[i] - before.rx[i], iterations) << "simnic" << i << "\n" << r.output;
  }
}

class Fabric : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = missing_libfabric(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(nics.ok()) << nics.up_result().output;
    if (std::string why = netns_refused(nics.env()); !why.empty()) GTEST_SKIP() << why;
  }
  Result in_netns(const std::string& script, std::chrono::milliseconds timeout = 90s) {
    return run({simnic(), "run", "--netns", "--", "sh", "-c", script}, nics.env(), timeout);
  }
  Nics nics{2};
};

TEST_F(Fabric, FiInfoListsMsgAndRdmEndpointsForBothNics) {
  Result r = in_netns("fi_info -p verbs; echo '--- rxm'; fi_info -p 'verbs;ofi_rxm'", 60s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto split = r.output.find("--- rxm");
  ASSERT_NE(split, std::string::npos) << r.output;
  const std::set<std::string> verbs = entries(r.output.substr(0, split)), rxm = entries(r.output.substr(split));
  for (const char* nic : {"simnic0", "simnic1"}) {
    EXPECT_TRUE(verbs.count(std::string("verbs ") + nic + " FI_EP_MSG")) << nic << "\n" << r.output;
    EXPECT_TRUE(rxm.count(std::string("verbs;ofi_rxm ") + nic + " FI_EP_RDM")) << nic << "\n" << r.output;
  }
}

TEST_F(Fabric, MsgPingpongBetweenTwoNicsChecksEveryByte) {
  const Counters before = counters([&](const std::string& n) { return nics.status(n); });
  Result r = in_netns(pingpong_script("-p verbs -e msg -I 200 -S 65536 -c", nics.addr(0)));
  expect_pingpong_passed(r, before, counters([&](const std::string& n) { return nics.status(n); }), 200);
}

// ofi_rxm asks 1024 x FI_UNIVERSE_SIZE (256) CQ entries: no FI_UNIVERSE_SIZE needed, since
// max_cqe is mlx5's 2^22 - 1.
TEST_F(Fabric, RdmPingpongOverRxmWithoutFiUniverseSize) {
  const Counters before = counters([&](const std::string& n) { return nics.status(n); });
  Result r = in_netns("unset FI_UNIVERSE_SIZE; " +
                      pingpong_script("-p 'verbs;ofi_rxm' -e rdm -I 200 -S 65536 -c", nics.addr(0)));
  expect_pingpong_passed(r, before, counters([&](const std::string& n) { return nics.status(n); }), 200);
}

// --- As an unprivileged user (nobody), NICs and programs alike: no root anywhere. ---

std::vector<std::string> as_nobody() {
  return {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
}

std::string nobody_cannot_run() {
  if (::geteuid() != 0) return "needs root to run processes as uid 65534";
  if (!have_program("setpriv")) return "needs setpriv (util-linux)";
  std::vector<std::string> probe = as_nobody();
  for (const std::string& a : {std::string("test"), std::string("-x"), simnic()}) probe.push_back(a);
  if (run(probe, {}, 10s).exit_code != 0) return "uid 65534 cannot run " + simnic() + " (a private build tree)";
  return "";
}

// Two NICs started by uid 65534 in a directory of its own; stopped (and killed by pid) at the end.
class NobodysNics {
 public:
  NobodysNics() {
    char tmpl[] = "/tmp/simnic-mw-fabric-XXXXXX";
    if (!::mkdtemp(tmpl)) return;
    dir_ = tmpl;
    if (::chown(dir_.c_str(), kNobody, kNobody) != 0) return;
    static std::random_device rd;
    base_ = "127." + std::to_string(16 + rd() % 200) + "." + std::to_string(1 + rd() % 250) + ".";
    up_ = run(cmd({simnic(), "up", "2", "--addr", addr(0)}), env(), 30s);
  }
  ~NobodysNics() {
    std::vector<pid_t> pids;
    for (int i = 0; i < 2; ++i) {
      std::ifstream in(dir_ + "/simnic" + std::to_string(i) + ".pid");
      long pid = 0;
      if (in >> pid && pid > 0) pids.push_back(pid_t(pid));
    }
    if (!dir_.empty()) run(cmd({simnic(), "down"}), env(), 30s);
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  std::vector<std::string> cmd(const std::vector<std::string>& argv) const {
    std::vector<std::string> v = as_nobody();
    v.insert(v.end(), argv.begin(), argv.end());
    return v;
  }
  std::map<std::string, std::string> env() const { return {{"SIMNIC_DIR", dir_}}; }
  std::string addr(int i) const { return base_ + std::to_string(1 + i); }
  const Result& up() const { return up_; }
  std::map<std::string, std::string> status(const std::string& nic) const {
    Result r = run(cmd({simnic(), "status", nic, "--raw"}), env(), 10s);
    std::map<std::string, std::string> kv;
    std::istringstream in(r.output);
    for (std::string line; std::getline(in, line);)
      if (auto sp = line.find(' '); sp != std::string::npos) kv[line.substr(0, sp)] = line.substr(sp + 1);
    return kv;
  }

 private:
  std::string dir_, base_;
  Result up_;
};

TEST(FabricUnprivileged, MsgPingpongAsNobody) {
  if (std::string why = missing_libfabric(); !why.empty()) GTEST_SKIP() << why;
  if (std::string why = nobody_cannot_run(); !why.empty()) GTEST_SKIP() << why;
  NobodysNics nics;
  ASSERT_EQ(nics.up().exit_code, 0) << nics.up().output;
  if (std::string why = netns_refused(nics.env(), as_nobody()); !why.empty()) GTEST_SKIP() << why;
  auto status_of = [&](const std::string& n) { return nics.status(n); };
  const Counters before = counters(status_of);
  Result r = run(nics.cmd({simnic(), "run", "--netns", "--", "sh", "-c",
                           "echo uid $(id -u); " + pingpong_script("-p verbs -e msg -I 200 -S 65536 -c", nics.addr(0))}),
                 nics.env(), 90s);
  EXPECT_NE(r.output.find("uid 65534\n"), std::string::npos) << r.output;  // itself, not root of the namespace
  expect_pingpong_passed(r, before, counters(status_of), 200);
}

// In the namespace, root's files show as the overflow uid (65534): a user other than nobody
// must still pass the checks of its SIMNIC_DIR's parent (/tmp, root's) there.
TEST(FabricUnprivileged, AnotherUsersDirectoryUnderTmpPassesTheChecksInTheNamespace) {
  if (std::string why = nobody_cannot_run(); !why.empty()) GTEST_SKIP() << why;
  const uid_t user = 4242;
  char tmpl[] = "/tmp/simnic-mw-owner-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ASSERT_EQ(::chown(dir.c_str(), user, user), 0);
  const std::vector<std::string> as_user = {"setpriv", "--reuid=4242", "--regid=4242", "--clear-groups"};
  std::vector<std::string> argv = as_user;
  for (const std::string& a : {simnic(), std::string("run"), std::string("--netns"), std::string("--"), simnic(),
                               std::string("status")})
    argv.push_back(a);
  Result r = run(argv, {{"SIMNIC_DIR", dir}}, 20s);
  std::filesystem::remove_all(dir);
  if (r.output.find("cannot create a user and network namespace") != std::string::npos)
    GTEST_SKIP() << "unprivileged user namespaces are not available here: " << r.output;
  EXPECT_EQ(r.output.find("is owned by uid 65534"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no NIC is running in " + dir), std::string::npos) << r.output;
}

}  // namespace
}  // namespace simnic::it
