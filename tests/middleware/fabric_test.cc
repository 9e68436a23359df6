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
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include "harness.h"
#include "middleware_util.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

std::string simnic() { return bin_dir() + "/simnic"; }

std::string missing_libfabric() {
  if (!have_program("fi_info") || !have_program("fi_pingpong"))
    return "fi_info/fi_pingpong are not installed (Debian package libfabric-bin)";
  return "";
}

// "" when `simnic run --netns` can make its namespace here, else why not (the test skips).
std::string netns_refused(const std::map<std::string, std::string>& env, const std::vector<std::string>& as = {}) {
  std::vector<std::string> argv = as;
  for (const std::string& a :
       {simnic(), std::string("run"), std::string("--netns"), std::string("--"), std::string("true")})
    argv.push_back(a);
  Result r = run(argv, env, 20s);
  if (r.output.find("cannot create a user and network namespace") != std::string::npos)
    return "unprivileged user namespaces are not available here: " + r.output;
  return "";
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
  return "out=$(mktemp); SIMNIC_CM_DEVICE=simnic0 fi_pingpong " + args +
         " >$out 2>&1 & srv=$!; "
         "i=0; while ! grep -q ':B9E8 00000000:0000 0A' /proc/net/tcp && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); "
         "done; "
         "SIMNIC_CM_DEVICE=simnic1 fi_pingpong " +
         args + " " + server_addr +
         "; c=$?; "
         "wait $srv; s=$?; echo '--- server:'; cat $out; rm -f $out; echo \"exit client $c server $s\"";
}

void expect_pingpong_passed(const Result& r, const std::vector<Packets>& before, const std::vector<Packets>& after,
                            uint64_t iterations) {
  EXPECT_FALSE(r.timed_out) << r.output;
  EXPECT_NE(r.output.find("exit client 0 server 0"), std::string::npos) << r.output;
  // The table, "bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec": 200 of 64 KiB (16
  // packets each at MTU 4096) sent and acknowledged, from the client and from the server.
  EXPECT_NE(r.output.find("bytes"), std::string::npos) << r.output;
  const std::regex row(R"(\n64k\s+200\s+=200\s)");
  EXPECT_EQ(std::distance(std::sregex_iterator(r.output.begin(), r.output.end(), row), std::sregex_iterator()), 2)
      << r.output;
  for (int i = 0; i < 2; ++i) {
    EXPECT_GE(after[i].tx - before[i].tx, iterations) << "simnic" << i << " did not carry the ping-pong\n" << r.output;
    EXPECT_GE(after[i].rx - before[i].rx, iterations) << "simnic" << i << "\n" << r.output;
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
  const auto before = packets_of_nics(nics, 2);
  Result r = in_netns(pingpong_script("-p verbs -e msg -I 200 -S 65536 -c", nics.addr(0)));
  expect_pingpong_passed(r, before, packets_of_nics(nics, 2), 200);
}

// ofi_rxm asks 1024 x FI_UNIVERSE_SIZE (256) CQ entries: no FI_UNIVERSE_SIZE needed, since
// max_cqe is mlx5's 2^22 - 1.
TEST_F(Fabric, RdmPingpongOverRxmWithoutFiUniverseSize) {
  const auto before = packets_of_nics(nics, 2);
  Result r = in_netns("unset FI_UNIVERSE_SIZE; " +
                      pingpong_script("-p 'verbs;ofi_rxm' -e rdm -I 200 -S 65536 -c", nics.addr(0)));
  expect_pingpong_passed(r, before, packets_of_nics(nics, 2), 200);
}

// --- As an unprivileged user (nobody), NICs and programs alike: no root anywhere. ---

TEST(FabricUnprivileged, MsgPingpongAsNobody) {
  if (std::string why = missing_libfabric(); !why.empty()) GTEST_SKIP() << why;
  if (std::string why = nobody_cannot_run(); !why.empty()) GTEST_SKIP() << why;
  NobodyNics nics(2, "fabric");
  ASSERT_EQ(nics.up.exit_code, 0) << nics.up.output;
  const Runner& who = nics.who;
  if (std::string why = netns_refused(who.env(), as_nobody()); !why.empty()) GTEST_SKIP() << why;
  const auto before = packets_of_nics(who, 2);
  Result r = run(who.simnic_run({"--netns"}, {"sh", "-c",
                                              "echo uid $(id -u); " +
                                                  pingpong_script("-p verbs -e msg -I 200 -S 65536 -c", nics.addr(0))}),
                 who.env(), 90s);
  EXPECT_NE(r.output.find("uid 65534\n"), std::string::npos) << r.output;  // itself, not root of the namespace
  expect_pingpong_passed(r, before, packets_of_nics(who, 2), 200);
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
  for (const std::string& a :
       {simnic(), std::string("run"), std::string("--netns"), std::string("--"), simnic(), std::string("status")})
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
