// librdmacm.so.1 (rdmacm/) and simnicd's connection manager: Debian's unmodified rdma_cm
// programs through `simnic run`, between two NICs and on one NIC, the failure paths through
// simnic-cm-check, and the CM exchange on the wire as tshark decodes it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <csignal>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

bool have(std::initializer_list<const char*> programs) {
  for (const char* p : programs)
    if (!have_program(p)) return false;
  return true;
}

// A server started first, then a client run to completion; both must exit 0.
struct Pair {
  Result server, client;
};

Pair run_pair(const Nics& nics, const std::vector<std::string>& server, const std::vector<std::string>& client,
              std::chrono::milliseconds client_timeout = 120s, const std::string& server_ready = "") {
  // Until the server listens: its NIC logs each rdma_listen (the server's own output is a file,
  // fully buffered), or the line `server_ready` the server prints.
  auto listens_logged = [&] {
    std::ifstream log(nics.dir() + "/simnic0.log");
    std::stringstream text;
    text << log.rdbuf();
    size_t n = 0;
    for (size_t at = text.str().find(" listening on port "); at != std::string::npos;
         at = text.str().find(" listening on port ", at + 1))
      ++n;
    return n;
  };
  const size_t before = listens_logged();
  auto srv = nics.start(server);
  auto ready = [&] {
    if (!server_ready.empty()) return srv->output().find(server_ready) != std::string::npos;
    return listens_logged() > before;
  };
  for (int i = 0; i < 300 && !ready(); ++i) ::usleep(50 * 1000);
  Pair p;
  p.client = nics.run(client, client_timeout);
  p.server = srv->wait(30s);
  return p;
}

std::string cm_check() { return bin_dir() + "/simnic-cm-check"; }

TEST(RdmaCm, ExportsTheVersionedSymbolsOfDebiansLibrdmacm) {
  const std::string system = "/usr/lib/x86_64-linux-gnu/librdmacm.so.1";
  if (::access(system.c_str(), R_OK) != 0) GTEST_SKIP() << system << " is not installed (librdmacm1)";
  auto symbols = [](const std::string& lib) {
    Result r = run({"objdump", "-T", lib}, {}, 30s);
    std::set<std::string> out;
    std::regex line(R"(\s(RDMACM_[0-9.]+)\s+(\S+)$)");
    std::istringstream in(r.output);
    for (std::string l; std::getline(in, l);) {
      std::smatch m;
      if (l.find("*UND*") == std::string::npos && std::regex_search(l, m, line))
        out.insert(m[1].str() + " " + m[2].str());
    }
    return out;
  };
  const auto want = symbols(system), have_syms = symbols(shim_dir() + "/librdmacm.so.1");
  EXPECT_GT(want.size(), 60u);
  EXPECT_EQ(want, have_syms);
}

void expect_rping(const Pair& p, int count) {
  ASSERT_EQ(p.client.exit_code, 0) << "client:\n" << p.client.output << "\nserver:\n" << p.server.output;
  ASSERT_EQ(p.server.exit_code, 0) << p.server.output;
  // -v prints every ping's payload, which rping also checks against what it sent.
  const std::string last = "ping data: rdma-ping-" + std::to_string(count - 1) + ":";
  EXPECT_NE(p.client.output.find(last), std::string::npos) << p.client.output;
  EXPECT_NE(p.server.output.find("server " + last), std::string::npos) << p.server.output;
}

TEST(RdmaCm, RpingBetweenTwoNics) {
  if (!have({"rping"})) GTEST_SKIP() << "rping is not installed (rdmacm-utils)";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Pair p = run_pair(nics, {"rping", "-s", "-a", nics.addr(0), "-p", "7174", "-v", "-C", "100"},
                    {"rping", "-c", "-a", nics.addr(0), "-I", nics.addr(1), "-p", "7174", "-v", "-C", "100"});
  expect_rping(p, 100);
  for (const char* nic : {"simnic0", "simnic1"}) {
    auto st = nics.status(nic);
    EXPECT_EQ(st["rx_drop_icrc"], "0") << nic;
    EXPECT_EQ(st["rx_drop_malformed"], "0") << nic;
  }
}

TEST(RdmaCm, RpingOnOneNic) {
  if (!have({"rping"})) GTEST_SKIP() << "rping is not installed (rdmacm-utils)";
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Pair p = run_pair(nics, {"rping", "-s", "-a", nics.addr(0), "-p", "7175", "-v", "-C", "20"},
                    {"rping", "-c", "-a", nics.addr(0), "-p", "7175", "-v", "-C", "20"});
  expect_rping(p, 20);
}

// 2% of every NIC's packets, CM MADs included, are dropped: the CM retransmits its MADs on the
// response timeout and RC retransmits the data.
TEST(RdmaCm, RpingUnderTwoPercentLoss) {
  if (!have({"rping"})) GTEST_SKIP() << "rping is not installed (rdmacm-utils)";
  Nics nics(2, {"--loss", "0.02", "--seed", "11"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Pair p = run_pair(nics,
                    {"env", "SIMNIC_CM_RESPONSE_TIMEOUT=16", "rping", "-s", "-a", nics.addr(0), "-p", "7176", "-v",
                     "-C", "100"},
                    {"env", "SIMNIC_CM_RESPONSE_TIMEOUT=16", "rping", "-c", "-a", nics.addr(0), "-I", nics.addr(1),
                     "-p", "7176", "-v", "-C", "100"},
                    240s);
  expect_rping(p, 100);
}

TEST(RdmaCm, RdmaServerAndClientAndTheirXVariants) {
  if (!have({"rdma_server", "rdma_client", "rdma_xserver", "rdma_xclient"}))
    GTEST_SKIP() << "rdmacm-utils is not installed";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Pair p = run_pair(nics, {"rdma_server", "-s", nics.addr(0), "-p", "7471"},
                    {"env", "SIMNIC_CM_DEVICE=simnic1", "rdma_client", "-s", nics.addr(0), "-p", "7471"});
  EXPECT_EQ(p.client.exit_code, 0) << p.client.output << p.server.output;
  EXPECT_NE(p.client.output.find("rdma_client: end 0"), std::string::npos) << p.client.output;
  EXPECT_NE(p.server.output.find("rdma_server: end 0"), std::string::npos) << p.server.output;
  Pair x = run_pair(nics, {"rdma_xserver", "-p", "7472"},
                    {"env", "SIMNIC_CM_DEVICE=simnic1", "rdma_xclient", "-s", nics.addr(0), "-p", "7472"});
  EXPECT_NE(x.client.output.find("rdma_xclient: end 0"), std::string::npos) << x.client.output << x.server.output;
  EXPECT_NE(x.server.output.find("rdma_xserver: end 0"), std::string::npos) << x.server.output;
}

TEST(RdmaCm, UdaddyResolvesTheServiceWithSidr) {
  if (!have({"udaddy"})) GTEST_SKIP() << "udaddy is not installed (rdmacm-utils)";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Pair p = run_pair(nics, {"udaddy", "-b", nics.addr(0)}, {"udaddy", "-s", nics.addr(0), "-b", nics.addr(1)});
  ASSERT_EQ(p.client.exit_code, 0) << p.client.output << p.server.output;
  ASSERT_EQ(p.server.exit_code, 0) << p.server.output;
  EXPECT_NE(p.client.output.find("test complete"), std::string::npos);
  EXPECT_NE(p.server.output.find("data transfers complete"), std::string::npos);
}

TEST(RdmaCm, UcmatoseWithSeveralConnections) {
  if (!have({"ucmatose"})) GTEST_SKIP() << "ucmatose is not installed (rdmacm-utils)";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Pair p = run_pair(nics, {"ucmatose", "-b", nics.addr(0), "-c", "8", "-C", "20"},
                    {"ucmatose", "-s", nics.addr(0), "-b", nics.addr(1), "-c", "8", "-C", "20"});
  ASSERT_EQ(p.client.exit_code, 0) << p.client.output << p.server.output;
  ASSERT_EQ(p.server.exit_code, 0) << p.server.output;
  EXPECT_NE(p.server.output.find("disconnected"), std::string::npos);
}

// mckey: rdma_join_multicast on two receivers (two NICs), one sender on a third; every
// receiver gets every datagram (mckey counts them and fails on a missing one). The group is
// derived from the test's private addresses: multicast groups are host-wide, so concurrent
// tests must not share one.
TEST(RdmaCm, MckeyDeliversToEveryJoinedReceiver) {
  if (!have({"mckey"})) GTEST_SKIP() << "mckey is not installed (rdmacm-utils)";
  Nics nics(3);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::string base = nics.addr(0);  // 127.A.B.C
  const std::string group = "239" + base.substr(base.find('.'), base.rfind('.') - base.find('.')) + ".7";
  auto r1 = nics.start({"mckey", "-m", group, "-b", nics.addr(1), "-C", "20"});
  auto r2 = nics.start({"mckey", "-m", group, "-b", nics.addr(2), "-C", "20"});
  // mckey's stdout is a file here (fully buffered): the NICs' logs say when each has joined.
  for (const char* nic : {"simnic1", "simnic2"}) {
    auto joined = [&] {
      std::ifstream log(nics.dir() + "/" + nic + ".log");
      std::stringstream text;
      text << log.rdbuf();
      return text.str().find("attached to multicast group") != std::string::npos;
    };
    for (int i = 0; i < 200 && !joined(); ++i) ::usleep(50 * 1000);
    ASSERT_TRUE(joined()) << nic << " never joined: " << r1->output() << r2->output();
  }
  Result s = nics.run({"mckey", "-m", group, "-b", nics.addr(0), "-s", "-C", "20"}, 60s);
  ASSERT_EQ(s.exit_code, 0) << s.output;
  for (auto* r : {r1.get(), r2.get()}) {
    Result rr = r->wait(30s);
    EXPECT_EQ(rr.exit_code, 0) << rr.output;
    EXPECT_NE(rr.output.find("data transfers complete"), std::string::npos) << rr.output;
  }
  EXPECT_EQ(nics.status("simnic1").at("mcast_deliveries"), "20");
  EXPECT_EQ(nics.status("simnic2").at("mcast_deliveries"), "20");
}

// rdma_join_multicast with a unicast IPv4 address: the kernel's cma_iboe_join_multicast
// refuses only 0.0.0.0, and names the group ff0e::ffff:a.b.c.d (cma_iboe_set_mgid). mckey
// joins it on a receiver and a sender, and every datagram arrives. 0.0.0.0 is still refused.
TEST(RdmaCm, MckeyJoinsAGroupNamedByAUnicastAddress) {
  if (!have({"mckey"})) GTEST_SKIP() << "mckey is not installed (rdmacm-utils)";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::string base = nics.addr(0);  // 127.A.B.C: the group is 127.A.B.77, no NIC's address
  const std::string group = base.substr(0, base.rfind('.')) + ".77";
  auto r = nics.start({"mckey", "-m", group, "-b", nics.addr(1), "-C", "10"});
  auto joined = [&] {
    std::ifstream log(nics.dir() + "/simnic1.log");
    std::stringstream text;
    text << log.rdbuf();
    return text.str().find("attached to multicast group ff0e::ffff:") != std::string::npos;
  };
  for (int i = 0; i < 200 && !joined(); ++i) ::usleep(50 * 1000);
  ASSERT_TRUE(joined()) << r->output();
  Result s = nics.run({"mckey", "-m", group, "-b", nics.addr(0), "-s", "-C", "10"}, 60s);
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_NE(s.output.find("joined dgid: ff0e::ffff:"), std::string::npos) << s.output;
  Result rr = r->wait(30s);
  EXPECT_EQ(rr.exit_code, 0) << rr.output;
  EXPECT_NE(rr.output.find("data transfers complete"), std::string::npos) << rr.output;
  EXPECT_EQ(nics.status("simnic1").at("mcast_deliveries"), "10");
  Result zero = nics.run({"mckey", "-m", "0.0.0.0", "-b", nics.addr(0), "-C", "1"}, 30s);
  EXPECT_NE(zero.exit_code, 0) << zero.output;
}

// Debian's cmtime (rdma-core 44) serves forever: the server is stopped once the client is done.
TEST(RdmaCm, CmtimeConnectsAndDisconnectsManyTimes) {
  if (!have({"cmtime"})) GTEST_SKIP() << "cmtime is not installed (rdmacm-utils)";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  auto srv = nics.start({"cmtime", "-b", nics.addr(0), "-c", "50"});
  ::usleep(1000 * 1000);
  Result c = nics.run({"cmtime", "-s", nics.addr(0), "-b", nics.addr(1), "-c", "50"}, 120s);
  ASSERT_EQ(c.exit_code, 0) << c.output << "\nserver:\n" << srv->output();
  EXPECT_TRUE(std::regex_search(c.output, std::regex(R"(connect\s+:\s+[0-9.]+)"))) << c.output;
  EXPECT_TRUE(std::regex_search(c.output, std::regex(R"(disconnect\s+:\s+[0-9.]+)"))) << c.output;
}

class PerftestCm : public ::testing::TestWithParam<const char*> {};

TEST_P(PerftestCm, RunsWithRdmaCm) {
  const char* bin = GetParam();
  if (!have({bin})) GTEST_SKIP() << bin << " is not installed (perftest)";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  // perftest -R connects twice: first its control connection, then, after a handshake over it,
  // the test QPs, for which the server creates and binds a new listening id. A client that
  // finishes the handshake before the server listens again is REJECTED (no listener, as the
  // kernel's CM answers too) and perftest gives up (Debian's perftest then crashes on its error
  // path). On a busy machine that race is real (a fresh-clone CI run lost it three times in a
  // row); a REJECTED run is retried on a new port, at most five times. Any other failure fails
  // the test.
  Pair p;
  for (int attempt = 0; attempt < 6; ++attempt) {
    const int port = free_tcp_port();
    p = run_pair(nics, {bin, "-R", "-d", "simnic0", "-x", "0", "-n", "200", "-p", std::to_string(port)},
                 {"env", "SIMNIC_CM_DEVICE=simnic1", bin, "-R", "-d", "simnic1", "-x", "0", "-n", "200", "-p",
                  std::to_string(port), nics.addr(0)});
    if (p.client.exit_code == 0 || p.client.output.find("RDMA_CM_EVENT_REJECTED") == std::string::npos) break;
  }
  ASSERT_EQ(p.client.exit_code, 0) << p.client.output << p.server.output;
  ASSERT_EQ(p.server.exit_code, 0) << p.server.output;
  EXPECT_NE(p.client.output.find("#bytes"), std::string::npos) << p.client.output;
}

INSTANTIATE_TEST_SUITE_P(Debian, PerftestCm, ::testing::Values("ib_write_bw", "ib_send_lat", "ib_read_bw"));

TEST(RdmaCm, QperfWithCm) {
  if (!have({"qperf"})) GTEST_SKIP() << "qperf is not installed";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const int port = free_tcp_port();
  auto srv = nics.start({"qperf", "-lp", std::to_string(port)});
  ASSERT_TRUE(wait_for_listener(port, 15s)) << srv->output();
  Result c = nics.run({"env", "SIMNIC_CM_DEVICE=simnic1", "qperf", "-lp", std::to_string(port), "-cm1", nics.addr(0),
                       "-t", "1", "rc_bw", "rc_lat"},
                      120s);
  ::kill(srv->pid(), SIGTERM);
  ASSERT_EQ(c.exit_code, 0) << c.output << srv->output();
  EXPECT_TRUE(std::regex_search(c.output, std::regex(R"(bw\s+=\s+[0-9.]+ [KMG]B/sec)"))) << c.output;
  EXPECT_TRUE(std::regex_search(c.output, std::regex(R"(latency\s+=\s+[0-9.]+ (us|ms))"))) << c.output;
}

// simnic-cm-check: a server mode and a client mode that must end as the kernel's rdma_cm ends.
struct CmCase {
  const char* name;
  const char* server_mode;
  const char* client_mode;
  const char* client_must_print;
  const char* server_must_print;
};

void PrintTo(const CmCase& c, std::ostream* os) { *os << c.name; }

class CmOutcome : public ::testing::TestWithParam<CmCase> {};

TEST_P(CmOutcome, EndsAsTheKernelWould) {
  const CmCase& c = GetParam();
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::string port = std::to_string(20000 + ::getpid() % 1000);
  Pair p = run_pair(nics, {cm_check(), "server", nics.addr(0), port, c.server_mode},
                    {cm_check(), "client", nics.addr(0), port, nics.addr(1), c.client_mode}, 60s, "listening");
  EXPECT_EQ(p.client.exit_code, 0) << p.client.output << "\nserver:\n" << p.server.output;
  EXPECT_EQ(p.server.exit_code, 0) << p.server.output;
  EXPECT_NE(p.client.output.find(c.client_must_print), std::string::npos) << p.client.output;
  EXPECT_NE(p.server.output.find(c.server_must_print), std::string::npos) << p.server.output;
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, CmOutcome,
    ::testing::Values(
        // rdma_reject: REJ with reason 28 (consumer defined) and the server's private data.
        CmCase{"RejectWithPrivateData", "reject", "expect-rejected",
               "RDMA_CM_EVENT_REJECTED status 28 private 'go away'", "private 'hello'"},
        CmCase{"ServerDisconnects", "disconnect", "wait", "RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DISCONNECTED"},
        CmCase{"ClientDisconnects", "wait", "disconnect", "RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DISCONNECTED"},
        // The client exits without disconnecting: its NIC sends DREQ for it.
        CmCase{"ClientDies", "wait", "die", "private 'welcome'", "RDMA_CM_EVENT_DISCONNECTED"}),
    [](const auto& info) { return std::string(info.param.name); });

// rdma_getaddrinfo(NULL, NULL, hints) answers with the hints' addresses, as rdma-core's
// addrinfo.c does (libfabric's verbs provider resolves the peer it holds as a sockaddr so).
TEST(RdmaCm, GetaddrinfoWithOnlyHintsAnswersTheirAddresses) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({cm_check(), "addrinfo", nics.addr(0), "7471", "127.0.0.1"}, 30s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("dst " + nics.addr(0) + ":7471 src 127.0.0.1:0 family 2 qp_type 2 port_space 262"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("no addresses in the hints: 0, dst none src none"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no hints: -1 errno Invalid argument"), std::string::npos) << r.output;
}

// A loopback address no NIC has (127.0.0.1) binds as the kernel binds it: like the wildcard
// (cma_any_addr counts loopback), on no device, keeping the address; the listen then covers
// every NIC, so a client reaches it at a NIC's address (libfabric's fi_pingpong server binds
// "localhost" so and takes the devices' addresses from the interfaces).
TEST(RdmaCm, ALoopbackAddressNoNicHasBindsLikeTheWildcard) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::string port = std::to_string(21000 + ::getpid() % 1000);
  Pair p = run_pair(nics, {cm_check(), "server", "127.0.0.1", port, "accept"},
                    {cm_check(), "client", nics.addr(1), port, nics.addr(0), "expect-established"}, 60s, "listening");
  EXPECT_EQ(p.server.exit_code, 0) << p.server.output;
  EXPECT_NE(p.server.output.find("bound to no device, local 127.0.0.1:" + port), std::string::npos) << p.server.output;
  EXPECT_EQ(p.client.exit_code, 0) << p.client.output << "\nserver:\n" << p.server.output;
  EXPECT_NE(p.client.output.find("RDMA_CM_EVENT_ESTABLISHED"), std::string::npos) << p.client.output;
}

// Nobody listens on the port: the peer's CM answers REJ "invalid service ID" (8), at once.
TEST(RdmaCm, ConnectingToAClosedPortIsRejected) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({cm_check(), "client", nics.addr(0), "9", nics.addr(1), "expect-rejected"}, 30s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("RDMA_CM_EVENT_REJECTED status 8"), std::string::npos) << r.output;
}

// No NIC at the address: the REQ goes unanswered, is sent again max_cm_retries times, then the
// id reports UNREACHABLE with -ETIMEDOUT. Short timeouts keep the test brief.
TEST(RdmaCm, APeerThatNeverAnswersTimesOut) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::string nobody = nics.addr(0).substr(0, nics.addr(0).rfind('.')) + ".200";
  Result r = nics.run({"env", "SIMNIC_CM_RESPONSE_TIMEOUT=14", "SIMNIC_CM_RETRIES=2", cm_check(), "client", nobody,
                       "7000", nics.addr(1), "expect-unreachable"},
                      60s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("RDMA_CM_EVENT_UNREACHABLE status -110"), std::string::npos) << r.output;
}

// A connection's capture decodes in tshark as InfiniBand CM: REQ, REP, RTU, DREQ, DREP.
TEST(RdmaCm, TsharkDecodesTheCmExchange) {
  if (!have({"tshark"})) GTEST_SKIP() << "tshark is not installed";
  const std::string caps = "/tmp/simnic-it-cm-pcap-" + std::to_string(::getpid());
  {
    Nics nics(2, {"--pcap-dir", caps});
    ASSERT_TRUE(nics.ok()) << nics.up_result().output;
    Pair p = run_pair(nics, {cm_check(), "server", nics.addr(0), "7300", "wait"},
                      {cm_check(), "client", nics.addr(0), "7300", nics.addr(1), "disconnect"}, 60s, "listening");
    ASSERT_EQ(p.client.exit_code, 0) << p.client.output << p.server.output;
  }  // the NICs stop: their pcaps are complete
  Result r = run({"tshark", "-r", caps + "/simnic1.pcap", "--disable-protocol", "rpcordma"}, {{"HOME", caps}}, 60s);
  run({"rm", "-rf", caps}, {}, 10s);
  for (const char* msg :
       {"CM: ConnectRequest", "CM: ConnectReply", "CM: ReadyToUse", "CM: DisconnectRequest", "CM: DisconnectReply"})
    EXPECT_NE(r.output.find(msg), std::string::npos) << msg << "\n" << r.output;
}

}  // namespace
}  // namespace simnic::it

namespace simnic::it {
namespace {

// rsockets run (issue 25; the full set is in tests/middleware/rsockets_test.cc): rstream and
// rcopy with both ends on one NIC, which counts the traffic; rcopy's copy is compared.
TEST(RdmaCm, RsocketsRunOnOneNic) {
  if (!have({"rstream", "rcopy"})) GTEST_SKIP() << "rdmacm-utils is not installed";
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const uint64_t tx_before = std::stoull(nics.status("simnic0")["tx_packets"]);
  auto server = nics.start({"rstream", "-b", nics.addr(0), "-p", "7481", "-S", "1000", "-C", "20", "-T", "b"});
  Result c;
  for (int attempt = 0; attempt < 20; attempt++) {  // until the server listens
    c = nics.run({"rstream", "-s", nics.addr(0), "-p", "7481", "-S", "1000", "-C", "20", "-T", "b"}, 30s);
    if (c.exit_code == 0) break;
    std::this_thread::sleep_for(250ms);
  }
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_EQ(server->wait(30s).exit_code, 0);
  const std::string dir = nics.dir();
  {
    std::ofstream f(dir + "/rcopy-src", std::ios::binary);
    for (int i = 0; i < 200000; i++) f.put(char(i * 31 + i / 251));
  }
  auto rserver = nics.start({"rcopy", "-p", "7482"});
  Result rc;
  for (int attempt = 0; attempt < 20; attempt++) {
    rc = nics.run({"rcopy", dir + "/rcopy-src", nics.addr(0) + ":" + dir + "/rcopy-dst", "-p", "7482"}, 30s);
    if (rc.exit_code == 0) break;
    std::this_thread::sleep_for(250ms);
  }
  EXPECT_EQ(rc.exit_code, 0) << rc.output;
  std::ifstream a(dir + "/rcopy-src", std::ios::binary), b(dir + "/rcopy-dst", std::ios::binary);
  std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {});
  EXPECT_EQ(sa.size(), 200000u);
  EXPECT_TRUE(sa == sb) << "rcopy's copy differs (" << sb.size() << " bytes)";
  EXPECT_GT(std::stoull(nics.status("simnic0")["tx_packets"]) - tx_before, 40u);
}

}  // namespace
}  // namespace simnic::it

namespace simnic::it {
namespace {

// The same programs with both ends on one NIC: a client without a source address reaches the
// server's address through the NIC that owns it (the loopback of a real host).
TEST(RdmaCm, ProgramsOnOneNic) {
  if (!have({"udaddy", "ucmatose", "rdma_server", "rdma_client", "ib_write_bw", "qperf"}))
    GTEST_SKIP() << "rdmacm-utils, perftest or qperf is not installed";
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::string a = nics.addr(0);
  const std::string pt = std::to_string(free_tcp_port());
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> pairs = {
      {{"udaddy", "-b", a}, {"udaddy", "-s", a}},
      {{"ucmatose", "-b", a, "-c", "4"}, {"ucmatose", "-s", a, "-c", "4"}},
      {{"rdma_server", "-s", a, "-p", "7480"}, {"rdma_client", "-s", a, "-p", "7480"}},
      {{"ib_write_bw", "-R", "-d", "simnic0", "-x", "0", "-n", "100", "-p", pt},
       {"ib_write_bw", "-R", "-d", "simnic0", "-x", "0", "-n", "100", "-p", pt, a}},
  };
  for (const auto& [server, client] : pairs) {
    Pair p = run_pair(nics, server, client);
    EXPECT_EQ(p.client.exit_code, 0) << client[0] << ":\n" << p.client.output << "\nserver:\n" << p.server.output;
    EXPECT_EQ(p.server.exit_code, 0) << server[0] << ":\n" << p.server.output;
  }
  const int qp = free_tcp_port();
  auto srv = nics.start({"qperf", "-lp", std::to_string(qp)});
  ASSERT_TRUE(wait_for_listener(qp, 15s)) << srv->output();
  Result c = nics.run({"qperf", "-lp", std::to_string(qp), "-cm1", a, "-t", "1", "rc_bw", "rc_lat"}, 120s);
  ::kill(srv->pid(), SIGTERM);
  EXPECT_EQ(c.exit_code, 0) << c.output << srv->output();
  EXPECT_TRUE(std::regex_search(c.output, std::regex(R"(latency\s+=\s+[0-9.]+ (us|ms))"))) << c.output;
}

}  // namespace
}  // namespace simnic::it
