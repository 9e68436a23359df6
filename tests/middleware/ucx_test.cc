// UCX 1.13 as Debian ships it (ucx-utils) on simnic NICs (issue 25 point 1): `ucx_info -d` lists
// rc_verbs and ud_verbs on every NIC, which it does only with the /dev/infiniband nodes of
// libsimnic_devnode.so (without them it lists none); ucx_perftest runs UCP tag, put and get tests
// between a server on simnic0 and a client on simnic1 over rc_verbs and ud_verbs, and both NICs
// count the traffic (so a silent fallback to another transport fails); and, run as root, the same
// as uid 65534 with its own NICs, proving no step needs privilege.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

constexpr uid_t kNobody = 65534;

// Who runs the NICs and the programs: `prefix` (empty, or setpriv to uid 65534) before each
// command, with SIMNIC_DIR in the environment.
struct Runner {
  std::vector<std::string> prefix;
  std::string dir;

  std::vector<std::string> command(const std::vector<std::string>& argv) const {
    std::vector<std::string> full = prefix;
    full.insert(full.end(), argv.begin(), argv.end());
    return full;
  }
  // `simnic run [opts] -- argv`.
  std::vector<std::string> simnic_run(const std::vector<std::string>& opts, const std::vector<std::string>& argv) const {
    std::vector<std::string> full = {bin_dir() + "/simnic", "run"};
    full.insert(full.end(), opts.begin(), opts.end());
    full.push_back("--");
    full.insert(full.end(), argv.begin(), argv.end());
    return command(full);
  }
  std::map<std::string, std::string> env(std::map<std::string, std::string> extra = {}) const {
    extra["SIMNIC_DIR"] = dir;
    extra["LD_PRELOAD"] = "";  // nothing inherited: the preload is simnic run's
    extra["SIMNIC_DEVNODES"] = "1";
    return extra;
  }
  uint64_t counter(const std::string& nic, const std::string& name) const {
    Result r = run(command({bin_dir() + "/simnic", "status", nic, "--raw"}), env(), 10s);
    std::istringstream in(r.output);
    for (std::string key, value; in >> key >> value;)
      if (key == name) return std::stoull(value);
    ADD_FAILURE() << "no " << name << " in simnic status " << nic << ":\n" << r.output;
    return 0;
  }
};

bool have_ucx() { return have_program("ucx_info") && have_program("ucx_perftest"); }
constexpr const char* kNoUcx = "needs ucx_info and ucx_perftest (Debian package ucx-utils)";

// The (transport, device) pairs `ucx_info -d` lists: "#      Transport: rc_verbs" is followed
// by the "#         Device: simnic0:1" it runs on.
std::set<std::pair<std::string, std::string>> ucx_resources(const std::string& output) {
  std::set<std::pair<std::string, std::string>> out;
  std::istringstream in(output);
  std::string line, transport;
  auto value = [](const std::string& l) { return l.substr(l.find(':') + 2); };
  while (std::getline(in, line)) {
    if (line.find("#      Transport: ") == 0) transport = value(line);
    else if (line.find("#         Device: ") == 0 && !transport.empty()) out.insert({transport, value(line)});
  }
  return out;
}

void expect_verbs_on_every_nic(const Runner& who, int nics) {
  Result r = run(who.simnic_run({}, {"ucx_info", "-d"}), who.env(), 60s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto have = ucx_resources(r.output);
  for (int i = 0; i < nics; ++i)
    for (const char* tl : {"rc_verbs", "ud_verbs"})
      EXPECT_TRUE(have.count({tl, "simnic" + std::to_string(i) + ":1"})) << tl << " on simnic" << i << "\n" << r.output;
}

// One ucx_perftest pair.
struct PerfCase {
  const char* tls;   // UCX_TLS
  const char* test;  // -t
  std::vector<std::string> args;
};

std::ostream& operator<<(std::ostream& os, const PerfCase& c) { return os << c.tls << " " << c.test; }

// Server on simnic0, client on simnic1, the client given the server's address and a free TCP
// port as pt.sh did; both bounded. Asserts both exit 0, the client's "Final:" line and that
// both NICs sent and received packets.
void run_perftest_pair(const Runner& who, const PerfCase& c) {
  const std::string port = std::to_string(free_tcp_port());
  uint64_t before[2][2];
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 2; ++k) before[n][k] = who.counter("simnic" + std::to_string(n), k ? "rx_packets" : "tx_packets");
  std::vector<std::string> base = {"ucx_perftest", "-p", port};
  Process server(who.simnic_run({}, base), who.env({{"UCX_NET_DEVICES", "simnic0:1"}, {"UCX_TLS", c.tls}}));
  ASSERT_TRUE(wait_for_listener(std::stoi(port), 20s)) << server.output();
  std::vector<std::string> client = {"ucx_perftest", "127.0.0.1", "-p", port, "-t", c.test, "-w", "10"};
  client.insert(client.end(), c.args.begin(), c.args.end());
  Result cr = run(who.simnic_run({}, client), who.env({{"UCX_NET_DEVICES", "simnic1:1"}, {"UCX_TLS", c.tls}}), 45s);
  Result sr = server.wait(15s);
  EXPECT_EQ(cr.exit_code, 0) << cr.output << "\nserver:\n" << sr.output;
  EXPECT_EQ(sr.exit_code, 0) << sr.output;
  EXPECT_NE(cr.output.find("Final:"), std::string::npos) << cr.output;
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 2; ++k) {
      const std::string nic = "simnic" + std::to_string(n), name = k ? "rx_packets" : "tx_packets";
      EXPECT_GT(who.counter(nic, name), before[n][k]) << nic << " " << name << " did not grow";
    }
}

// --- as this user, on the harness's NICs ---

class Ucx : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_ucx()) GTEST_SKIP() << kNoUcx;
    nics = std::make_unique<Nics>(2);
    ASSERT_TRUE(nics->ok()) << nics->up_result().output;
    me.dir = nics->dir();
  }
  std::unique_ptr<Nics> nics;
  Runner me;
};

TEST_F(Ucx, InfoListsRcVerbsAndUdVerbsOnEveryNic) { expect_verbs_on_every_nic(me, 2); }

// The proof that the device nodes are what UCX needs: without them, no simnic device at all.
TEST_F(Ucx, InfoListsNoSimnicDeviceWithoutDevnodes) {
  Result r = run(me.simnic_run({"--no-devnodes"}, {"ucx_info", "-d"}), me.env(), 60s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& [tl, dev] : ucx_resources(r.output)) EXPECT_EQ(dev.find("simnic"), std::string::npos) << tl << " " << dev;
  EXPECT_EQ(r.output.find("rc_verbs"), std::string::npos) << r.output;
}

class UcxPerftest : public Ucx, public ::testing::WithParamInterface<PerfCase> {};

TEST_P(UcxPerftest, ServerOnSimnic0ClientOnSimnic1) { run_perftest_pair(me, GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    RcAndUd, UcxPerftest,
    ::testing::Values(PerfCase{"rc_v", "tag_lat", {"-n", "100"}},
                      PerfCase{"rc_v", "tag_bw", {"-n", "100", "-s", "65536"}},
                      PerfCase{"rc_v", "ucp_put_bw", {"-n", "50", "-s", "1048576"}},
                      PerfCase{"rc_v", "ucp_get", {"-n", "50", "-s", "1048576"}},
                      PerfCase{"ud_v", "tag_lat", {"-n", "100"}},
                      PerfCase{"ud_v", "tag_bw", {"-n", "100", "-s", "65536"}}),
    [](const ::testing::TestParamInfo<PerfCase>& i) { return std::string(i.param.tls) + "_" + i.param.test; });

// --- as uid 65534, with NICs of its own ---

// Two NICs started by uid 65534 in a SIMNIC_DIR it owns, on a loopback block of their own
// (simnic refuses an address another user's NIC holds). Stopped and killed by pid at the end.
class NobodyNics {
 public:
  NobodyNics() {
    who.prefix = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
    static std::random_device rd;
    for (int attempt = 0; attempt < 8; ++attempt) {
      char tmpl[] = "/tmp/simnic-mw-ucx-nobody-XXXXXX";
      if (!::mkdtemp(tmpl) || ::chown(tmpl, kNobody, kNobody) != 0) return;
      who.dir = tmpl;
      const std::string addr = "127." + std::to_string(16 + rd() % 200) + "." + std::to_string(1 + rd() % 250) + ".1";
      up = run(who.command({bin_dir() + "/simnic", "up", "2", "--addr", addr}), who.env(), 30s);
      if (up.exit_code == 0 || up.output.find("Address already in use") == std::string::npos) return;
      stop();
    }
  }
  ~NobodyNics() { stop(); }
  bool ok() const { return up.exit_code == 0; }
  Runner who;
  Result up;

 private:
  void stop() {
    if (who.dir.empty()) return;
    std::vector<pid_t> pids;
    for (int i = 0; i < 2; ++i) {
      std::ifstream in(who.dir + "/simnic" + std::to_string(i) + ".pid");
      long pid = 0;
      if (in >> pid && pid > 0) pids.push_back(pid_t(pid));
    }
    run(who.command({bin_dir() + "/simnic", "down"}), who.env(), 30s);
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    std::error_code ec;
    std::filesystem::remove_all(who.dir, ec);
    who.dir.clear();
  }
};

TEST(UcxAsNobody, InfoListsTheNicsAndRcPerftestRuns) {
  if (!have_ucx()) GTEST_SKIP() << kNoUcx;
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run the programs as uid 65534 (setpriv)";
  if (!have_program("setpriv")) GTEST_SKIP() << "needs setpriv (Debian package util-linux)";
  if (run({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "test", "-r",
           shim_dir() + "/libsimnic_devnode.so"}, {}, 10s).exit_code != 0)
    GTEST_SKIP() << "uid 65534 cannot read " << shim_dir() << " (a private build tree)";
  NobodyNics nics;
  ASSERT_TRUE(nics.ok()) << nics.up.output;
  Result id = run(nics.who.simnic_run({}, {"id", "-u"}), nics.who.env(), 10s);
  ASSERT_EQ(id.output, "65534\n") << "the programs run as uid 65534";
  expect_verbs_on_every_nic(nics.who, 2);
  run_perftest_pair(nics.who, PerfCase{"rc_v", "tag_lat", {"-n", "100"}});
}

}  // namespace
}  // namespace simnic::it
