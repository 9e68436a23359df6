// XRC end to end: Debian's unmodified ibv_xsrq_pingpong (ibverbs-utils) between two NICs, on
// one NIC, with completion events, and with one server and two clients whose processes share
// one XRC domain through /tmp/xrc_domain (the server's sends to one client go through the other
// client's TGT QP); simnic-xrc-check's byte and completion checks; the XRCETH in a capture.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>

#include "harness.h"
#include "perftest_pair.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

// "   local: LID 0000, QPN RECV 1a2b3c SEND 4d5e6f, PSN 000001, SRQN 123456, GID ..."
struct AddrLine {
  std::string recv_qpn, send_qpn, srqn;
};

std::vector<AddrLine> addr_lines(const std::string& out, const std::string& who) {
  std::vector<AddrLine> v;
  std::regex re(who +
                R"(: LID [0-9a-f]+, QPN RECV ([0-9a-f]{6}) SEND ([0-9a-f]{6}), PSN [0-9a-f]{6}, SRQN ([0-9a-f]{6}))");
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it)
    v.push_back({(*it)[1], (*it)[2], (*it)[3]});
  return v;
}

struct XsrqRun {
  Result server;
  std::vector<Result> clients;
};

// One server on simnic0 and a client per entry of client_nics; -n iterations each.
// On RoCE the programs need a GID (-g 0); in InfiniBand mode they address peers by LID.
XsrqRun run_xsrq(const Nics& nics, const std::vector<std::string>& client_nics, const std::vector<std::string>& extra,
                 bool gid = true) {
  const std::string port = std::to_string(free_tcp_port());
  std::vector<std::string> server = {
      "ibv_xsrq_pingpong", "-d", "simnic0", "-p", port, "-c", std::to_string(client_nics.size())};
  std::vector<std::string> gid_args = gid ? std::vector<std::string>{"-g", "0"} : std::vector<std::string>{};
  server.insert(server.end(), gid_args.begin(), gid_args.end());
  server.insert(server.end(), extra.begin(), extra.end());
  auto srv = nics.start(server);
  XsrqRun r;
  if (!wait_for_listener(std::stoi(port), 10s)) {
    r.server = srv->wait(1s);
    return r;
  }
  std::vector<std::unique_ptr<Process>> cls;
  for (const std::string& nic : client_nics) {
    std::vector<std::string> client = {"ibv_xsrq_pingpong", "-d", nic, "-p", port};
    client.insert(client.end(), gid_args.begin(), gid_args.end());
    client.insert(client.end(), extra.begin(), extra.end());
    client.push_back("127.0.0.1");
    cls.push_back(nics.start(client));
  }
  for (auto& c : cls) r.clients.push_back(c->wait(120s));
  r.server = srv->wait(60s);
  return r;
}

void expect_success(const Nics& nics, const XsrqRun& r, size_t clients) {
  ASSERT_EQ(r.clients.size(), clients) << r.server.output;
  for (const Result& c : r.clients) {
    ASSERT_EQ(c.exit_code, 0) << "client:\n" << c.output << "\nserver:\n" << r.server.output;
    EXPECT_NE(c.output.find("success"), std::string::npos) << c.output;
  }
  ASSERT_EQ(r.server.exit_code, 0) << "server:\n" << r.server.output;
  EXPECT_NE(r.server.output.find("success"), std::string::npos) << r.server.output;
  // Each client learned the server's QPNs and SRQ number, and the server each client's.
  auto server_local = addr_lines(r.server.output, "local");
  auto server_remote = addr_lines(r.server.output, "remote");
  ASSERT_EQ(server_local.size(), clients) << r.server.output;
  ASSERT_EQ(server_remote.size(), clients) << r.server.output;
  std::set<std::string> client_srqns;
  for (const Result& c : r.clients) {
    auto local = addr_lines(c.output, "local"), remote = addr_lines(c.output, "remote");
    ASSERT_EQ(local.size(), 1u) << c.output;
    ASSERT_EQ(remote.size(), 1u) << c.output;
    EXPECT_EQ(remote[0].srqn, server_local[0].srqn) << "the server has one XRC SRQ";
    client_srqns.insert(local[0].srqn);
  }
  EXPECT_EQ(client_srqns.size(), clients) << "each client its own SRQ";
  // No request was refused for its XRC SRQ. (A PSN-sequence NAK may happen: the server starts
  // sending while a client's TGT QP is still in INIT, which drops the first packets; go-back-N
  // recovers, as on a real RNIC.)
  for (const char* nic : {"simnic0", "simnic1"}) {
    EXPECT_EQ(nics.status(nic)["completion_errors"], "0") << nic;
    Result log = run({"cat", nics.dir() + "/" + nic + ".log"});
    EXPECT_EQ(log.output.find("NAK invalid request"), std::string::npos) << log.output;
  }
}

TEST(XsrqPingpong, BetweenTwoNics) {
  if (!have_program("ibv_xsrq_pingpong")) GTEST_SKIP() << "ibv_xsrq_pingpong is not installed (ibverbs-utils)";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  XsrqRun r = run_xsrq(nics, {"simnic1"}, {"-n", "50", "-s", "4096"});
  expect_success(nics, r, 1);
  EXPECT_NE(r.clients[0].output.find("GID ::ffff:" + nics.addr(0)), std::string::npos) << r.clients[0].output;
  auto st = nics.status("simnic1");
  EXPECT_GE(std::stoll(st["rx_packets"]), 50 * 4) << "50 messages of 4 packets (MTU 1024) came in";
}

TEST(XsrqPingpong, OnOneNicWithCompletionEvents) {
  if (!have_program("ibv_xsrq_pingpong")) GTEST_SKIP() << "ibv_xsrq_pingpong is not installed (ibverbs-utils)";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  XsrqRun r = run_xsrq(nics, {"simnic0"}, {"-n", "20", "-s", "100", "-e"});
  expect_success(nics, r, 1);
}

TEST(XsrqPingpong, InInfinibandModeWithoutAGid) {
  if (!have_program("ibv_xsrq_pingpong")) GTEST_SKIP() << "ibv_xsrq_pingpong is not installed (ibverbs-utils)";
  Nics nics(2, {"--link-layer", "ib"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  XsrqRun r = run_xsrq(nics, {"simnic1"}, {"-n", "20", "-s", "3000"}, /*gid=*/false);
  expect_success(nics, r, 1);
  EXPECT_NE(r.clients[0].output.find("remote: LID 0001"), std::string::npos) << r.clients[0].output;
}

// The server sends to each client round robin over every INI QP it has: a message for client 1
// may arrive through client 2's TGT QP. It lands only because both clients' processes opened
// /tmp/xrc_domain on the same NIC, and so share one XRC domain.
TEST(XsrqPingpong, TwoClientsOnOneNicShareTheirXrcDomain) {
  if (!have_program("ibv_xsrq_pingpong")) GTEST_SKIP() << "ibv_xsrq_pingpong is not installed (ibverbs-utils)";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  XsrqRun r = run_xsrq(nics, {"simnic1", "simnic1"}, {"-n", "30", "-s", "2000"});
  expect_success(nics, r, 2);
}

// perftest's XRC connection type (-c XRC): its own XRC domain, SRQ and INI/TGT QP pairs.
class PerftestXrc : public ::testing::TestWithParam<const char*> {};

TEST_P(PerftestXrc, RunsUnmodifiedBetweenTwoNics) {
  const char* binary = GetParam();
  if (!have_program(binary)) GTEST_SKIP() << binary << " is not installed (scripts/setup.sh installs perftest)";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  std::string out;
  ASSERT_NO_FATAL_FAILURE(run_perftest_pair(nics, binary, {"-c", "XRC", "-n", "100"}, &out));
  EXPECT_NE(out.find("Connection type : XRC"), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(#bytes[^\n]*\n\s*\d+\s+100\s)"))) << out;
  for (const char* nic : {"simnic0", "simnic1"}) EXPECT_EQ(nics.status(nic)["completion_errors"], "0") << nic;
}

INSTANTIATE_TEST_SUITE_P(Binaries, PerftestXrc,
                         ::testing::Values("ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_atomic_bw", "ib_send_lat"));

TEST(XrcCheck, BytesAndCompletionFieldsBetweenTwoNicsAndOnOne) {
  for (const char* b : {"simnic1", "simnic0"}) {
    Nics nics(2);
    ASSERT_TRUE(nics.ok()) << nics.up_result().output;
    const std::string file = nics.dir() + "/xrc-domain";
    Result r = nics.run({bin_dir() + "/simnic-xrc-check", "-a", "simnic0", "-b", b, "-f", file}, 60s);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("7 passed, 0 failed"), std::string::npos) << r.output;
    // The refused SEND was refused for the rule, and the program was told.
    EXPECT_NE(r.output.find("IBV_WC_REM_INV_REQ_ERR"), std::string::npos) << r.output;
  }
}

// The XRCETH on the wire: tshark 4.0 names the XRC opcodes, and shows the XRCETH as the first
// four bytes after the BTH (it has no field for it): 00 and the server's SRQ number.
TEST(XrcCapture, RequestsCarryTheServersSrqNumberInTheirXrceth) {
  if (!have_program("ibv_xsrq_pingpong")) GTEST_SKIP() << "ibv_xsrq_pingpong is not installed (ibverbs-utils)";
  if (!have_program("tshark")) GTEST_SKIP() << "tshark is not installed (scripts/setup.sh installs it)";
  const std::string caps = "/tmp/simnic-it-xrc-pcap-" + std::to_string(::getpid());
  ASSERT_EQ(run({"mkdir", "-p", caps}).exit_code, 0);
  std::string server_srqn;
  {
    Nics nics(2, {"--pcap-dir", caps});
    ASSERT_TRUE(nics.ok()) << nics.up_result().output;
    XsrqRun r = run_xsrq(nics, {"simnic1"}, {"-n", "5", "-s", "100"});
    expect_success(nics, r, 1);
    auto local = addr_lines(r.server.output, "local");
    ASSERT_EQ(local.size(), 1u);
    server_srqn = local[0].srqn;
  }  // `simnic down` closes the captures
  const std::map<std::string, std::string> env = {{"HOME", caps}};
  // The client's NIC (simnic1) sent the requests for the server's SRQ.
  Result v = run({"tshark", "-r", caps + "/simnic1.pcap", "--disable-protocol", "rpcordma", "-V", "-Y",
                  "infiniband.bth.opcode == 164"},
                 env, 60s);
  ASSERT_EQ(v.exit_code, 0) << v.output;
  EXPECT_NE(v.output.find("Extended Reliable Connection (XRC) - SEND Only (164)"), std::string::npos) << v.output;
  EXPECT_NE(v.output.find("Unknown/Vendor Specific Data: 00" + server_srqn), std::string::npos)
      << "XRCETH 00" << server_srqn << "\n"
      << v.output.substr(0, 4000);
  // And the server's NIC answered with XRC ACKNOWLEDGE (177).
  Result acks = run({"tshark", "-r", caps + "/simnic0.pcap", "--disable-protocol", "rpcordma", "-Y",
                     "infiniband.bth.opcode == 177", "-T", "fields", "-e", "frame.number"},
                    env, 60s);
  ASSERT_EQ(acks.exit_code, 0) << acks.output;
  EXPECT_NE(acks.output.find_first_of("0123456789"), std::string::npos) << acks.output;
  Result icrc = run({"python3", SIMNIC_TEST_SOURCE_DIR "/scripts/check_icrc.py", caps + "/simnic0.pcap"}, {}, 60s);
  EXPECT_EQ(icrc.exit_code, 0) << icrc.output;
  run({"rm", "-rf", caps});
}

}  // namespace
}  // namespace simnic::it
