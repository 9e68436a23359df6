// The two link layers and the GID tables, with unmodified tools: in InfiniBand mode
// (`simnic up --link-layer ib`) ibv_rc_pingpong and ibv_ud_pingpong without -g, perftest
// without -x and qperf address peers by LID; `--gid-table mlx5` lists ConnectX's four GIDs, so
// "GID index 3" runs, and the entries simnic cannot carry are refused naming index 3.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

struct Pair {
  Result server, client;
};

// `program` as server on simnic0 and client on `client_nic` (both through `simnic run`).
Pair run_pair(const Nics& nics, const std::vector<std::string>& program, const std::vector<std::string>& port_flag,
              bool client_may_fail = false, const std::string& client_nic = "simnic1") {
  const std::string port = std::to_string(free_tcp_port());
  std::vector<std::string> server = program, client = program;
  server.insert(server.end(), {"-d", "simnic0", port_flag[0], port});
  client.insert(client.end(), {"-d", client_nic, port_flag[0], port, "127.0.0.1"});
  auto srv = nics.start(server);
  EXPECT_TRUE(wait_for_listener(std::stoi(port), 15s)) << srv->output();
  Pair p;
  p.client = nics.run(client, 120s);
  p.server = srv->wait(30s);
  if (!client_may_fail) {
    EXPECT_EQ(p.client.exit_code, 0) << "client:\n" << p.client.output << "\nserver:\n" << p.server.output;
  }
  return p;
}

// The block of `ibv_devinfo -v` output about device `name`.
std::string devinfo_block(const std::string& out, const std::string& name) {
  auto at = out.find("hca_id:\t" + name);
  if (at == std::string::npos) return "";
  return out.substr(at, out.find("hca_id:", at + 1) - at);
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// --- InfiniBand mode ---

TEST(InfiniBandMode, PortsAreActiveInfiniBandWithLidsFromOneAndTheSmOnLidOne) {
  Nics nics(2, {"--link-layer", "ib"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({"ibv_devinfo", "-v"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int i = 0; i < 2; ++i) {
    const std::string block = devinfo_block(r.output, "simnic" + std::to_string(i));
    EXPECT_NE(block.find("PORT_ACTIVE (4)"), std::string::npos) << block;
    EXPECT_NE(block.find("link_layer:\t\tInfiniBand"), std::string::npos) << block;
    EXPECT_NE(block.find("port_lid:\t\t" + std::to_string(i + 1) + "\n"), std::string::npos) << block;
    EXPECT_NE(block.find("sm_lid:\t\t\t1\n"), std::string::npos) << block;
    EXPECT_NE(block.find("port_lmc:\t\t0x00"), std::string::npos) << block;
    // One GID: fe80:: and the port GUID, printed raw as ibv_devinfo prints IB GIDs.
    EXPECT_TRUE(std::regex_search(
        block, std::regex(R"(GID\[  0\]:\t\tfe80:0000:0000:0000:0253:4e[0-9a-f]{2}:[0-9a-f]{4}:[0-9a-f]{2}01\n)")))
        << block;
  }
  // The registry the NICs route DLIDs by.
  const std::string lids = file_text(nics.dir() + "/lids");
  EXPECT_NE(lids.find("\n1 " + nics.addr(0) + " simnic0\n"), std::string::npos) << lids;
  EXPECT_NE(lids.find("\n2 " + nics.addr(1) + " simnic1\n"), std::string::npos) << lids;
  EXPECT_EQ(nics.status("simnic1")["lid"], "2");
}

struct ToolCase {
  const char* name;
  std::vector<std::string> program;  // without -d / port / host
  const char* port_flag;
  std::vector<std::string> expect;  // each found in both sides' output
};

void PrintTo(const ToolCase& c, std::ostream* os) { *os << c.name; }

class InfiniBandTools : public ::testing::TestWithParam<ToolCase> {};

// Unmodified programs, no -g / -x: the address vectors carry a DLID and no GRH.
TEST_P(InfiniBandTools, RunByLidAlone) {
  const ToolCase& c = GetParam();
  if (!have_program(c.program[0])) GTEST_SKIP() << c.program[0] << " is not installed (scripts/setup.sh installs it)";
  Nics nics(2, {"--link-layer", "ib"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Pair p = run_pair(nics, c.program, {c.port_flag});
  ASSERT_EQ(p.server.exit_code, 0) << p.server.output;
  for (const std::string& e : c.expect) {
    EXPECT_TRUE(std::regex_search(p.client.output, std::regex(e))) << e << "\n" << p.client.output;
    EXPECT_TRUE(std::regex_search(p.server.output, std::regex(e))) << e << "\n" << p.server.output;
  }
  for (const char* nic : {"simnic0", "simnic1"}) {
    auto st = nics.status(nic);
    EXPECT_EQ(st["completion_errors"], "0") << nic;
    EXPECT_EQ(st["rx_drop_icrc"], "0") << nic;
  }
}

INSTANTIATE_TEST_SUITE_P(
    NoGrh, InfiniBandTools,
    ::testing::Values(
        // "N bytes in": size * iterations each way, twice; no GID (the pingpongs print "::").
        ToolCase{"rc_pingpong",
                 {"ibv_rc_pingpong", "-s", "4096", "-n", "300"},
                 "-p",
                 {"remote address: +LID 0x000[12], [^\\n]*GID ::\\n", std::to_string(2 * 4096 * 300) + " bytes in "}},
        ToolCase{"ud_pingpong",
                 {"ibv_ud_pingpong", "-s", "1024", "-n", "300"},
                 "-p",
                 {"remote address: +LID 0x000[12], [^\\n]*GID ::\\n", std::to_string(2 * 1024 * 300) + " bytes in "}},
        ToolCase{"uc_pingpong",
                 {"ibv_uc_pingpong", "-s", "4096", "-n", "200"},
                 "-p",
                 {"remote address: +LID 0x000[12]", std::to_string(2 * 4096 * 200) + " bytes in "}},
        // perftest: "Link type : IB", the peer's LID, and the report row (#bytes, #iterations, figures).
        ToolCase{"ib_write_bw",
                 {"ib_write_bw", "-n", "500"},
                 "-p",
                 {"Link type +: IB", "remote address: LID 0x0[12] ", "\\n +65536 +500 +[0-9.]+ +[0-9.]+"}},
        ToolCase{"ib_send_lat",
                 {"ib_send_lat", "-n", "500"},
                 "-p",
                 {"Link type +: IB", "remote address: LID 0x0[12] ", "\\n +2 +500 +[0-9.]+ +[0-9.]+"}},
        ToolCase{"ib_send_lat_ud",
                 {"ib_send_lat", "-c", "UD", "-n", "300"},
                 "-p",
                 {"Link type +: IB", "remote address: LID 0x0[12] ", "\\n +2 +300 +[0-9.]+ +[0-9.]+"}}),
    [](const auto& info) { return std::string(info.param.name); });

// qperf 0.4.11 speaks InfiniBand only (LIDs, no GIDs): rc_bw and rc_lat between simnic1
// (-li) and simnic0 (-ri). Its server loops forever; the harness kills it by pid.
TEST(InfiniBandMode, QperfRcBwAndRcLatReportFigures) {
  if (!have_program("qperf")) GTEST_SKIP() << "qperf is not installed (scripts/setup.sh installs it)";
  Nics nics(2, {"--link-layer", "ib"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::string port = std::to_string(free_tcp_port());
  auto srv = nics.start({"qperf", "-lp", port});
  ASSERT_TRUE(wait_for_listener(std::stoi(port), 15s)) << srv->output();
  Result cl = nics.run({"qperf", "-lp", port, "-li", "simnic1:1", "-ri", "simnic0:1", "-t", "1", "127.0.0.1", "rc_bw",
                        "rc_lat"},
                       60s);
  ASSERT_EQ(cl.exit_code, 0) << cl.output << "\nserver:\n" << srv->output();
  EXPECT_TRUE(std::regex_search(cl.output, std::regex(R"(rc_bw:\n\s+bw\s+=\s+[0-9.]+ [KMG]B/sec)"))) << cl.output;
  EXPECT_TRUE(std::regex_search(cl.output, std::regex(R"(rc_lat:\n\s+latency\s+=\s+[0-9.]+ [mun]?s)"))) << cl.output;
  EXPECT_EQ(nics.status("simnic0")["completion_errors"], "0");
}

// Across machines the fabric's LIDs come from a file: here the two NICs take LIDs 5 and 9.
TEST(InfiniBandMode, ALidMapFileGivesTheLidsAndTheRegistry) {
  Nics nics(2, {"--link-layer", "ib"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  ASSERT_EQ(run({bin_dir() + "/simnic", "down"}, nics.env(), 30s).exit_code, 0);
  const std::string map = nics.dir() + "/fabric.map";
  std::ofstream(map) << "# the whole fabric\n9 " << nics.addr(1) << "\n5 " << nics.addr(0)
                     << "\n0x20 192.0.2.7 elsewhere\n";
  Result up = run({bin_dir() + "/simnic", "up", "2", "--addr", nics.addr(0), "--link-layer", "ib", "--lid-map", map},
                  nics.env(), 30s);
  ASSERT_EQ(up.exit_code, 0) << up.output;
  Result r = nics.run({"ibv_devinfo", "-v", "-d", "simnic1"});
  EXPECT_NE(r.output.find("port_lid:\t\t9\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sm_lid:\t\t\t5\n"), std::string::npos) << r.output;
  const std::string lids = file_text(nics.dir() + "/lids");
  EXPECT_NE(lids.find("\n5 " + nics.addr(0) + " simnic0\n"), std::string::npos) << lids;
  EXPECT_NE(lids.find("\n32 192.0.2.7 elsewhere\n"), std::string::npos) << lids;
  Pair p = run_pair(nics, {"ibv_rc_pingpong", "-n", "100"}, {"-p"});
  EXPECT_NE(p.client.output.find("remote address: LID 0x0005"), std::string::npos) << p.client.output;
  EXPECT_EQ(p.server.exit_code, 0) << p.server.output;
}

// A NIC started later gets the next LID; the running ones read the registry again when they
// meet a LID they do not know, so they reach it with no restart.
TEST(InfiniBandMode, ANicStartedLaterIsReachedByItsLid) {
  Nics nics(2, {"--link-layer", "ib"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Pair first = run_pair(nics, {"ibv_rc_pingpong", "-n", "50"}, {"-p"});  // simnic0 has read LIDs 1 and 2
  ASSERT_EQ(first.server.exit_code, 0) << first.server.output;
  Result up = run({bin_dir() + "/simnic", "up", "3", "--addr", nics.addr(0), "--link-layer", "ib"}, nics.env(), 30s);
  ASSERT_EQ(up.exit_code, 0) << up.output;
  EXPECT_NE(up.output.find("simnic0 is already running"), std::string::npos) << up.output;
  EXPECT_NE(file_text(nics.dir() + "/lids").find("\n3 " + nics.addr(2) + " simnic2\n"), std::string::npos);
  Pair p = run_pair(nics, {"ibv_rc_pingpong", "-n", "50"}, {"-p"}, false, "simnic2");
  EXPECT_EQ(p.server.exit_code, 0) << p.server.output;
  EXPECT_NE(p.server.output.find("remote address: LID 0x0003"), std::string::npos) << p.server.output;
  Result stop = run({bin_dir() + "/simnic", "down", "simnic2"}, nics.env(), 30s);  // ~Nics stops the first two
  EXPECT_EQ(stop.exit_code, 0) << stop.output;
}

TEST(InfiniBandMode, ANicTheLidMapDoesNotListIsNotStarted) {
  Nics nics(1, {"--link-layer", "ib"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::string map = nics.dir() + "/fabric.map";
  std::ofstream(map) << "1 " << nics.addr(0) << "\n";
  Result up = run({bin_dir() + "/simnic", "up", "2", "--addr", nics.addr(0), "--link-layer", "ib", "--lid-map", map},
                  nics.env(), 30s);
  EXPECT_NE(up.exit_code, 0);
  EXPECT_NE(up.output.find("simnic1's address " + nics.addr(1) + " has no LID in " + map), std::string::npos)
      << up.output;
}

// --- GID tables ---

TEST(GidTables, IbvDevinfoListsTheMlx5AndRxeTablesInTheirOrder) {
  for (const char* kind : {"mlx5", "rxe"}) {
    Nics nics(1, {"--gid-table", kind});
    ASSERT_TRUE(nics.ok()) << nics.up_result().output;
    Result r = nics.run({"ibv_devinfo", "-v"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // The MAC simnic gives the NIC is 02:53 and its address; fe80:: GIDs are its EUI-64.
    const std::string a = nics.addr(0);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(a, m, std::regex(R"(127\.(\d+)\.(\d+)\.(\d+))")));
    char eui[40], mapped_raw[60];
    std::snprintf(eui, sizeof eui, "fe80::53:7fff:fe%02x:%x", std::stoi(m[1]), std::stoi(m[2]) << 8 | std::stoi(m[3]));
    std::snprintf(mapped_raw, sizeof mapped_raw, "0000:0000:0000:0000:0000:ffff:7f%02x:%02x%02x", std::stoi(m[1]),
                  std::stoi(m[2]), std::stoi(m[3]));
    char eui_raw[60];
    std::snprintf(eui_raw, sizeof eui_raw, "fe80:0000:0000:0000:0053:7fff:fe%02x:%02x%02x", std::stoi(m[1]),
                  std::stoi(m[2]), std::stoi(m[3]));
    const std::string g = "\t\t\tGID[  ";
    std::string want;  // the whole listing, in order, and nothing after it
    if (std::string(kind) == "mlx5")
      want = g + "0]:\t\t" + eui_raw + ", RoCE v1\n" + g + "1]:\t\t" + eui + ", RoCE v2\n" + g + "2]:\t\t" +
             mapped_raw + ", RoCE v1\n" + g + "3]:\t\t::ffff:" + a + ", RoCE v2\n\n";
    else want = g + "0]:\t\t" + eui + ", RoCE v2\n" + g + "1]:\t\t::ffff:" + a + ", RoCE v2\n\n";
    EXPECT_NE(r.output.find(want), std::string::npos) << kind << ":\n" << r.output << "\nwanted:\n" << want;
    const std::string len = std::string(kind) == "mlx5" ? "256" : "1024";
    EXPECT_NE(r.output.find("\t\t\tgid_tbl_len:\t\t" + len + "\n"), std::string::npos) << r.output;
  }
}

// ibv_query_gid_table, ibv_query_gid_ex, ibv_query_gid and ibv_query_gid_type, as rdma-core 44
// answers them: valid entries only in the table, an empty slot as ENODATA / the zero GID /
// type 0, the end of the table as EINVAL / -1.
TEST(GidTables, EveryRdmaCoreGidQueryAgrees) {
  {
    Nics nics(1, {"--gid-table", "mlx5"});
    ASSERT_TRUE(nics.ok()) << nics.up_result().output;
    Result r = nics.run({bin_dir() + "/simnic-gid-query", "simnic0"}, 30s);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string a = nics.addr(0);
    for (const std::string& line :
         std::vector<std::string>{"gid_tbl_len 256\ntable 4\n", "table[2] index 2 port 1 ::ffff:" + a + " RoCE-v1\n",
                                  "table[3] index 3 port 1 ::ffff:" + a + " RoCE-v2\ntable too small -22\n",
                                  "gid 2 ex RoCE-v1 query 0 ::ffff:" + a + " type 0 0\n",
                                  "gid 3 ex RoCE-v2 query 0 ::ffff:" + a + " type 0 1\n",
                                  std::string("gid 4 ex ENODATA query 0 :: type 0 0\n"),
                                  std::string("past the table EINVAL\n")})
      EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
    EXPECT_TRUE(
        std::regex_search(r.output,
                          std::regex("gid 0 ex RoCE-v1 query 0 fe80::53:7fff:fe[0-9a-f]+:[0-9a-f]+ type 0 0\n")))
        << r.output;
    EXPECT_TRUE(
        std::regex_search(r.output,
                          std::regex("gid 1 ex RoCE-v2 query 0 fe80::53:7fff:fe[0-9a-f]+:[0-9a-f]+ type 0 1\n")))
        << r.output;
  }
  Nics nics(1, {"--link-layer", "ib"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({bin_dir() + "/simnic-gid-query", "simnic0"}, 30s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex("gid_tbl_len 1\ntable 1\ntable\\[0\\] index 0 port 1 fe80::253:4e[0-9a-f:]+01 IB\n")))
      << r.output;
  EXPECT_NE(r.output.find("gid 1 ex EINVAL query -1 - type -1 7\npast the table EINVAL\n"), std::string::npos)
      << r.output;
}

// Every RoCE GID names the interface its address is on, both ways rdma-core programs look:
// ibv_query_gid_ex's ndev_ifindex, and the device's sysfs-layout files under ibdev_path
// (gid_attrs/ndevs/N, gid_attrs/types/N, link_layer, node_type), as rxe's do. A NIC on 127/8
// is on lo. An InfiniBand GID has no interface (ndev_ifindex 0, no ndevs file).
TEST(GidTables, EveryRoceGidNamesItsNetworkInterface) {
  {
    Nics nics(1, {"--gid-table", "rxe"});
    ASSERT_TRUE(nics.ok()) << nics.up_result().output;
    Result r = nics.run({bin_dir() + "/simnic-gid-query", "simnic0"}, 30s);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const char* line : {"ndev 0 lo sysfs lo RoCE v2\n", "ndev 1 lo sysfs lo RoCE v2\n",
                             "sysfs link_layer Ethernet node_type 1: CA\n"})
      EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
    EXPECT_EQ(r.output.find("ndev 2 "), std::string::npos) << r.output;  // an empty slot has none
  }
  Nics nics(1, {"--link-layer", "ib"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({bin_dir() + "/simnic-gid-query", "simnic0"}, 30s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* line : {"ndev 0 - sysfs - IB/RoCE v1\n", "sysfs link_layer InfiniBand node_type 1: CA\n"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
}

// Programs that find devices the sysfs way (Open MPI's openib BTL: <ibv_get_sysfs_path()>/
// class/infiniband must be a directory) find every running NIC under the simnic directory's
// sysfs root, as under /sys/class/infiniband for rxe. SYSFS_PATH overrides the root, trailing
// slashes dropped, as in rdma-core.
TEST(GidTables, TheSysfsRootListsEveryRunningNic) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  for (const char* nic : {"simnic0", "simnic1"}) {
    Result r = nics.run({bin_dir() + "/simnic-gid-query", nic}, 30s);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string line = "sysfs root " + nics.dir() + "/sysfs class/infiniband/" + nic + "/node_type 1: CA\n";
    EXPECT_NE(r.output.find(line), std::string::npos) << line << r.output;
  }
  auto env = nics.env();
  env["SYSFS_PATH"] = "/nonexistent-sysfs//";
  Result r = it::run({bin_dir() + "/simnic", "run", "--", bin_dir() + "/simnic-gid-query", "simnic0"}, env, 30s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("sysfs root /nonexistent-sysfs class/infiniband/simnic0/node_type -\n"), std::string::npos)
      << r.output;
}

// Tutorials written for ConnectX say "use GID index 3": on the mlx5 table that is the IPv4
// RoCE v2 GID, and ibv_rc_pingpong -g 3 runs.
TEST(GidTables, RcPingpongWithGidIndex3RunsOnTheMlx5Table) {
  Nics nics(2, {"--gid-table", "mlx5"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Pair p = run_pair(nics, {"ibv_rc_pingpong", "-g", "3", "-s", "4096", "-n", "200"}, {"-p"});
  EXPECT_EQ(p.server.exit_code, 0) << p.server.output;
  EXPECT_NE(p.client.output.find(std::to_string(2 * 4096 * 200) + " bytes in "), std::string::npos) << p.client.output;
  EXPECT_NE(p.client.output.find("remote address: LID 0x0000, QPN"), std::string::npos) << p.client.output;
  EXPECT_NE(p.client.output.find("GID ::ffff:" + nics.addr(0)), std::string::npos) << p.client.output;
}

// Index 1 (fe80::, RoCE v2) and index 2 (IPv4, RoCE v1) cannot be carried: ibv_modify_qp
// fails with EINVAL, and the program is told (and the NIC logs) which index to use.
TEST(GidTables, UncarriableMlx5EntriesAreRefusedAtRtrNamingIndex3) {
  Nics nics(2, {"--gid-table", "mlx5"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  for (const char* index : {"1", "2"}) {
    Pair p = run_pair(nics, {"ibv_rc_pingpong", "-g", index, "-n", "10"}, {"-p"}, /*client_may_fail=*/true);
    EXPECT_NE(p.server.exit_code, 0) << p.server.output;
    EXPECT_NE(p.client.exit_code, 0) << p.client.output;
    const std::string both = p.server.output + p.client.output;
    EXPECT_NE(both.find("Failed to modify QP to RTR"), std::string::npos) << both;
    EXPECT_TRUE(
        std::regex_search(both, std::regex(std::string("simnic: ibv_modify_qp: EINVAL: QP 0x[0-9a-f]+ INIT->RTR: "
                                                       "sgid_index ") +
                                           index +
                                           " is [^\\n]*; use sgid_index 3 "
                                           "\\(::ffff:" +
                                           nics.addr(0) + ", RoCE v2\\)")))
        << both;
  }
  Result logs = run({bin_dir() + "/simnic", "logs", "simnic0"}, nics.env(), 20s);
  EXPECT_NE(logs.output.find("is a RoCE v1 GID"), std::string::npos) << logs.output;
  EXPECT_NE(logs.output.find("use sgid_index 3"), std::string::npos) << logs.output;
}

// --- replying to a datagram's sender: ibv_create_ah_from_wc ---

struct AhFromWcCase {
  const char* name;
  std::vector<std::string> up_args;
  const char* gid_index;
};

void PrintTo(const AhFromWcCase& c, std::ostream* os) { *os << c.name; }

class AhFromWc : public ::testing::TestWithParam<AhFromWcCase> {};

// Lab 6's solution (a UD service directory) answers every datagram through
// ibv_create_ah_from_wc: the AH must lead back to the sender whether the datagram came with a
// GRH (RoCE: the RoCE v2 GID of our address, index 1 on rxe, 3 on mlx5) or without (InfiniBand
// mode: the sender's LID from wc.slid).
TEST_P(AhFromWc, Lab6ServiceDirectoryRepliesToEachSender) {
  const AhFromWcCase& c = GetParam();
  if (!have_program("cc") || !have_program("pkg-config")) GTEST_SKIP() << "no cc or pkg-config on PATH";
  char dir[] = "/tmp/simnic-ahwc-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  // ud_lab.c is the solution's; ud_common.c/.h, unchanged from the starter, are in the lab's common/.
  const std::string exe = std::string(dir) + "/ud_lab", lab = SIMNIC_TEST_SOURCE_DIR "/labs/06-ud";
  Result cc =
      run({"sh", "-c",
           "cc -o " + exe + " -I " SIMNIC_TEST_SOURCE_DIR "/labs/common -I " + lab + "/common " + lab +
               "/solution/ud_lab.c " + lab + "/common/ud_common.c " + "$(pkg-config --cflags --libs libibverbs)"});
  ASSERT_EQ(cc.exit_code, 0) << cc.output;
  {
    Nics nics(3, c.up_args);
    ASSERT_TRUE(nics.ok()) << nics.up_result().output;
    const std::vector<std::string> common = {"-g", c.gid_index, "-f", std::string(dir) + "/registry.addr"};
    auto with = [&](std::vector<std::string> v, const std::vector<std::string>& tail) {
      v.insert(v.begin() + 4, common.begin(), common.end());
      v.insert(v.end(), tail.begin(), tail.end());
      return v;
    };
    auto reg = nics.start(with({exe, "registry", "-d", "simnic0", "-c", "1"}, {}));
    auto svc = nics.start(with({exe, "service", "-d", "simnic1", "-n", "1"}, {"echo"}));
    Result cl = nics.run(with({exe, "client", "-d", "simnic2"}, {"echo", "hello by lid"}), 30s);
    Result sv = svc->wait(20s), rg = reg->wait(20s);
    EXPECT_EQ(cl.exit_code, 0) << cl.output << "\nservice:\n" << sv.output << "\nregistry:\n" << rg.output;
    EXPECT_TRUE(std::regex_search(cl.output, std::regex("client: reply from QPN 0x[0-9a-f]+: HELLO BY LID")))
        << cl.output;
    EXPECT_EQ(sv.exit_code, 0) << sv.output;
    EXPECT_NE(sv.output.find("request \"hello by lid\""), std::string::npos) << sv.output;
    for (const char* nic : {"simnic0", "simnic1", "simnic2"})
      EXPECT_EQ(nics.status(nic)["completion_errors"], "0") << nic;
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(LinkLayers, AhFromWc,
                         ::testing::Values(AhFromWcCase{"infiniband", {"--link-layer", "ib"}, "0"},
                                           AhFromWcCase{"rxe_table", {"--gid-table", "rxe"}, "1"},
                                           AhFromWcCase{"mlx5_table", {"--gid-table", "mlx5"}, "3"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace simnic::it
