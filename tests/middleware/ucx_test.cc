// UCX 1.13 as Debian ships it (ucx-utils) on simnic NICs (issue 25 point 1): `ucx_info -d` lists
// rc_verbs and ud_verbs on every NIC, which it does only with the /dev/infiniband nodes of
// libsimnic_devnode.so (without them it lists none); ucx_perftest runs UCP tag, put and get tests
// between a server on simnic0 and a client on simnic1 over rc_verbs and ud_verbs, and both NICs
// count the traffic (so a silent fallback to another transport fails); and, run as root, the same
// as uid 65534 with its own NICs, proving no step needs privilege.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "harness.h"
#include "middleware_util.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

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
  const std::vector<Packets> before = packets_of_nics(who, 2);
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
  for (int n = 0; n < 2; ++n) {
    const Packets now = packets(who, nic_name(n));
    EXPECT_GT(now.tx, before[n].tx) << nic_name(n) << " tx_packets did not grow";
    EXPECT_GT(now.rx, before[n].rx) << nic_name(n) << " rx_packets did not grow";
  }
}

// --- as this user, on the harness's NICs ---

class Ucx : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_ucx()) GTEST_SKIP() << kNoUcx;
    nics = std::make_unique<Nics>(2);
    ASSERT_TRUE(nics->ok()) << nics->up_result().output;
    me = runner_for(*nics);
  }
  std::unique_ptr<Nics> nics;
  Runner me;
};

TEST_F(Ucx, InfoListsRcVerbsAndUdVerbsOnEveryNic) { expect_verbs_on_every_nic(me, 2); }

// The proof that the device nodes are what UCX needs: without them, no simnic device at all.
TEST_F(Ucx, InfoListsNoSimnicDeviceWithoutDevnodes) {
  Result r = run(me.simnic_run({"--no-devnodes"}, {"ucx_info", "-d"}), me.env(), 60s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& [tl, dev] : ucx_resources(r.output))
    EXPECT_EQ(dev.find("simnic"), std::string::npos) << tl << " " << dev;
  EXPECT_EQ(r.output.find("rc_verbs"), std::string::npos) << r.output;
}

class UcxPerftest : public Ucx, public ::testing::WithParamInterface<PerfCase> {};

TEST_P(UcxPerftest, ServerOnSimnic0ClientOnSimnic1) { run_perftest_pair(me, GetParam()); }

INSTANTIATE_TEST_SUITE_P(RcAndUd, UcxPerftest,
                         ::testing::Values(PerfCase{"rc_v", "tag_lat", {"-n", "100"}},
                                           PerfCase{"rc_v", "tag_bw", {"-n", "100", "-s", "65536"}},
                                           PerfCase{"rc_v", "ucp_put_bw", {"-n", "50", "-s", "1048576"}},
                                           PerfCase{"rc_v", "ucp_get", {"-n", "50", "-s", "1048576"}},
                                           PerfCase{"ud_v", "tag_lat", {"-n", "100"}},
                                           PerfCase{"ud_v", "tag_bw", {"-n", "100", "-s", "65536"}}),
                         [](const ::testing::TestParamInfo<PerfCase>& i) {
                           return std::string(i.param.tls) + "_" + i.param.test;
                         });

// --- as uid 65534, with NICs of its own ---

TEST(UcxAsNobody, InfoListsTheNicsAndRcPerftestRuns) {
  if (!have_ucx()) GTEST_SKIP() << kNoUcx;
  if (std::string why = nobody_cannot_run(); !why.empty()) GTEST_SKIP() << why;
  NobodyNics nics(2, "ucx");
  ASSERT_TRUE(nics.ok()) << nics.up.output;
  Result id = run(nics.who.simnic_run({}, {"id", "-u"}), nics.who.env(), 10s);
  ASSERT_EQ(id.output, "65534\n") << "the programs run as uid 65534";
  expect_verbs_on_every_nic(nics.who, 2);
  run_perftest_pair(nics.who, PerfCase{"rc_v", "tag_lat", {"-n", "100"}});
}

}  // namespace
}  // namespace simnic::it
