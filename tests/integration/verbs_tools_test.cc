// Unmodified Debian binaries (ibverbs-utils) on simnic: ibv_devices, ibv_devinfo -v and
// ibv_rc_pingpong between two NICs, on one NIC, and with completion events.
#include <gtest/gtest.h>

#include <regex>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

TEST(VerbsTools, IbvDevicesListsBothNicsWithTheirGuids) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({"ibv_devices"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The node GUID carries the address: 02:53:4e, then the four address bytes, then 01.
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(simnic0\s+02534e[0-9a-f]{8}01)"))) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(simnic1\s+02534e[0-9a-f]{8}01)"))) << r.output;
}

TEST(VerbsTools, IbvDevinfoShowsActiveEthernetPortsAndRoceV2Gids) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({"ibv_devinfo", "-v"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int i = 0; i < 2; ++i) {
    const std::string name = "simnic" + std::to_string(i);
    auto at = r.output.find("hca_id:\t" + name);
    ASSERT_NE(at, std::string::npos) << r.output;
    std::string block = r.output.substr(at, r.output.find("hca_id:", at + 1) - at);
    EXPECT_NE(block.find("PORT_ACTIVE (4)"), std::string::npos) << block;
    EXPECT_NE(block.find("link_layer:\t\tEthernet"), std::string::npos) << block;
    EXPECT_NE(block.find("::ffff:" + nics.addr(i) + ", RoCE v2"), std::string::npos) << block;
    EXPECT_NE(block.find("max_qp:\t\t\t\t4096"), std::string::npos) << block;
  }
}

struct PingpongCase {
  const char* name;
  std::vector<std::string> args;
  bool same_nic;
  long bytes_each_way;  // size * iterations
  const char* program = "ibv_rc_pingpong";
};

void PrintTo(const PingpongCase& c, std::ostream* os) { *os << c.name; }

class RcPingpong : public ::testing::TestWithParam<PingpongCase> {};
class UcUdPingpong : public RcPingpong {};

void run_pingpong(const PingpongCase& c) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::string port = std::to_string(free_tcp_port());
  std::vector<std::string> server = {c.program, "-d", "simnic0", "-g", "0", "-p", port};
  server.insert(server.end(), c.args.begin(), c.args.end());
  std::vector<std::string> client = {c.program, "-d", c.same_nic ? "simnic0" : "simnic1", "-g", "0", "-p", port};
  client.insert(client.end(), c.args.begin(), c.args.end());
  client.push_back("127.0.0.1");

  auto srv = nics.start(server);
  ASSERT_TRUE(wait_for_listener(std::stoi(port), 10s)) << srv->output();
  Result cl = nics.run(client, 240s);
  Result sv = srv->wait(30s);
  ASSERT_EQ(cl.exit_code, 0) << "client:\n" << cl.output << "\nserver:\n" << sv.output;
  ASSERT_EQ(sv.exit_code, 0) << "server:\n" << sv.output;
  // "N bytes in S seconds": both directions, so twice size * iterations.
  const std::string line = std::to_string(2 * c.bytes_each_way) + " bytes in ";
  EXPECT_NE(cl.output.find(line), std::string::npos) << cl.output;
  EXPECT_NE(sv.output.find(line), std::string::npos) << sv.output;
  // The remote side is the other NIC's GID (or the same one for a same-NIC run).
  EXPECT_NE(cl.output.find("remote address: LID 0x0000"), std::string::npos) << cl.output;
  EXPECT_NE(cl.output.find("GID ::ffff:" + nics.addr(0)), std::string::npos) << cl.output;
  for (const char* nic : {"simnic0", "simnic1"}) {
    auto st = nics.status(nic);
    EXPECT_EQ(st["completion_errors"], "0") << nic;
    EXPECT_EQ(st["rx_drop_qkey"], "0") << nic;
  }
}

TEST_P(RcPingpong, BothSidesFinishAndReportTheBytes) { run_pingpong(GetParam()); }
TEST_P(UcUdPingpong, BothSidesFinishAndReportTheBytes) { run_pingpong(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    Sizes, RcPingpong,
    ::testing::Values(
        PingpongCase{"one_byte", {"-s", "1", "-n", "500"}, false, 500},
        PingpongCase{"page", {"-s", "4096", "-n", "500"}, false, 4096L * 500},
        PingpongCase{"one_mib", {"-s", "1048576", "-n", "500"}, false, 1048576L * 500},
        PingpongCase{"events", {"-s", "4096", "-n", "500", "-e"}, false, 4096L * 500},
        PingpongCase{"new_send_api_checked", {"-s", "4096", "-n", "300", "-N", "-c"}, false, 4096L * 300},
        PingpongCase{"completion_timestamps", {"-s", "4096", "-n", "300", "-t"}, false, 4096L * 300},
        PingpongCase{"srq_8_qps", {"-s", "4096", "-n", "300", "-q", "8"}, false, 4096L * 300, "ibv_srq_pingpong"},
        PingpongCase{
            "srq_events", {"-s", "2048", "-n", "300", "-q", "4", "-e"}, false, 2048L * 300, "ibv_srq_pingpong"},
        PingpongCase{"mtu_4096", {"-s", "16384", "-n", "200", "-m", "4096"}, false, 16384L * 200},
        PingpongCase{"same_nic", {"-s", "4096", "-n", "500"}, true, 4096L * 500},
        PingpongCase{"same_nic_events", {"-s", "65536", "-n", "100", "-e"}, true, 65536L * 100}),
    [](const auto& info) { return std::string(info.param.name); });

// The other two pingpongs of ibverbs-utils: UC (no ACKs) and UD (datagrams behind a GRH).
INSTANTIATE_TEST_SUITE_P(
    Transports, UcUdPingpong,
    ::testing::Values(
        PingpongCase{"uc", {"-s", "10000", "-n", "300"}, false, 10000L * 300, "ibv_uc_pingpong"},
        PingpongCase{"uc_events", {"-s", "4096", "-n", "300", "-e"}, false, 4096L * 300, "ibv_uc_pingpong"},
        PingpongCase{"ud", {"-s", "2048", "-n", "500"}, false, 2048L * 500, "ibv_ud_pingpong"},
        PingpongCase{"ud_same_nic", {"-s", "1024", "-n", "300", "-e"}, true, 1024L * 300, "ibv_ud_pingpong"}),
    [](const auto& info) { return std::string(info.param.name); });

// Without `simnic run` the same binary loads the system libibverbs, which sees the real
// devices of this machine; on one without RDMA hardware it finds none.
TEST(VerbsTools, WithoutTheWrapperTheSystemLibraryIsUsed) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = run({"ibv_devices"}, nics.env(), 20s);
  EXPECT_EQ(r.output.find("simnic0"), std::string::npos) << r.output;
  if (std::system("ls /sys/class/infiniband/* >/dev/null 2>&1") == 0)
    GTEST_SKIP() << "this machine has real RDMA devices";
  Result p = run({"ibv_rc_pingpong", "-d", "simnic0", "-g", "0"}, nics.env(), 20s);
  EXPECT_NE(p.exit_code, 0);
  // rdma-core says "No IB devices found", or, on a kernel without the RDMA subsystem,
  // "Failed to get IB devices list: Function not implemented".
  EXPECT_TRUE(p.output.find("No IB devices found") != std::string::npos ||
              p.output.find("Failed to get IB devices list") != std::string::npos ||
              p.output.find("IB device simnic0 not found") != std::string::npos)
      << p.output;
}

}  // namespace
}  // namespace simnic::it
