// rsockets (issue 25 point 6): an unmodified TCP program under LD_PRELOAD=librspreload.so, and
// Debian's rstream and riostream, over simnic's librdmacm rsockets between two NICs.
// librspreload silently falls back to kernel TCP when rsocket() or rconnect() fails, so every
// test also requires that both NICs counted the traffic.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <regex>
#include <thread>

#include "harness.h"
#include "middleware_util.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

const char* kPreload = "/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so";

bool have_preload() { return ::access(kPreload, R_OK) == 0; }

std::string pingpong() { return bin_dir() + "/simnic-tcp-pingpong"; }

std::vector<std::string> preloaded(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"env", std::string("LD_PRELOAD=") + kPreload});
  return argv;
}

// Both NICs sent and received at least `min` packets since `before` (the bytes went over RDMA),
// and simnic1 sent simnic0 at least `bulk` (data one way; the other way carries the ACKs).
void expect_rdma_traffic(const Nics& nics, const Packets before[2], uint64_t min, uint64_t bulk = 0) {
  const Packets now[2] = {packets(nics, "simnic0"), packets(nics, "simnic1")};
  for (int i = 0; i < 2; i++) {
    EXPECT_GE(now[i].tx - before[i].tx, min) << "simnic" << i << " sent too few packets: kernel TCP was used?";
    EXPECT_GE(now[i].rx - before[i].rx, min) << "simnic" << i << " received too few packets: kernel TCP was used?";
  }
  EXPECT_GE(now[1].tx - before[1].tx, bulk) << "simnic1 sent too few packets for the data";
  EXPECT_GE(now[0].rx - before[0].rx, bulk) << "simnic0 received too few packets for the data";
}

bool running(pid_t pid) {  // alive and not yet a zombie
  std::string stat;
  if (FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r")) {
    char buf[512] = {};
    stat = std::fgets(buf, sizeof buf, f) ? buf : "";
    std::fclose(f);
  }
  auto close_paren = stat.rfind(')');
  return close_paren != std::string::npos && close_paren + 2 < stat.size() && stat[close_paren + 2] != 'Z';
}

// rstream's and riostream's servers print nothing when they listen: a client that came too
// early (its connection refused) tries again while the server still waits.
Result run_client_until_accepted(const Nics& nics, const std::vector<std::string>& cli, const Process& server) {
  Result c;
  for (int attempt = 0; attempt < 20; attempt++) {
    c = nics.run(cli, 40s);
    if (c.exit_code == 0 || !running(server.pid())) break;
    std::this_thread::sleep_for(250ms);
  }
  return c;
}

bool wait_output(const Process& p, const std::string& text, std::chrono::milliseconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (p.output().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

class Rsockets : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_preload()) GTEST_SKIP() << "needs " << kPreload << " (Debian package librdmacm1)";
    ASSERT_TRUE(nics_.ok()) << nics_.up_result().output;
    before_[0] = packets(nics_, "simnic0");
    before_[1] = packets(nics_, "simnic1");
  }
  Nics nics_{2};
  Packets before_[2];
};

TEST_F(Rsockets, PlainTcpPingPongUnderLibrspreloadRunsOverRdma) {
  const int rounds = 200;
  auto server = nics_.start(preloaded({pingpong(), "server", nics_.addr(0), "7471", std::to_string(rounds), "1000"}));
  ASSERT_TRUE(wait_output(*server, "listening", 20s)) << server->output();
  Result c =
      nics_.run(preloaded({pingpong(), "client", nics_.addr(0), "7471", std::to_string(rounds), "1000", nics_.addr(1)}),
                40s);
  Result s = server->wait(20s);
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("client: 200 rounds of 1000 bytes OK"), std::string::npos) << c.output;
  EXPECT_EQ(s.exit_code, 0) << s.output;
  EXPECT_NE(s.output.find("200 rounds of 1000 bytes echoed, end of stream seen"), std::string::npos) << s.output;
  expect_rdma_traffic(nics_, before_, rounds);
}

TEST_F(Rsockets, EightMebibytesStreamedChecksummedAndClosedInOrder) {
  auto sink = nics_.start(preloaded({pingpong(), "sink", nics_.addr(0), "7472"}));
  ASSERT_TRUE(wait_output(*sink, "listening", 20s)) << sink->output();
  Result src = nics_.run(preloaded({pingpong(), "source", nics_.addr(0), "7472", "8388608", nics_.addr(1)}), 40s);
  Result snk = sink->wait(20s);
  ASSERT_EQ(src.exit_code, 0) << src.output;
  ASSERT_EQ(snk.exit_code, 0) << snk.output;
  std::smatch a, b;
  ASSERT_TRUE(std::regex_search(src.output, a, std::regex("source: 8388608 bytes checksum ([0-9a-f]+)"))) << src.output;
  ASSERT_TRUE(std::regex_search(snk.output, b, std::regex("sink: 8388608 bytes checksum ([0-9a-f]+) end of stream")))
      << snk.output;
  EXPECT_EQ(a[1], b[1]) << "the bytes differ";
  expect_rdma_traffic(nics_, before_, 100, 8388608 / 4096);  // a packet per MTU at least
}

TEST_F(Rsockets, AKilledPeerResetsTheConnectionWithoutAHang) {
  auto hold = nics_.start(preloaded({pingpong(), "hold", nics_.addr(0), "7473"}));
  ASSERT_TRUE(wait_output(*hold, "listening", 20s)) << hold->output();
  auto hang = nics_.start(preloaded({pingpong(), "hang", nics_.addr(0), "7473", nics_.addr(1)}));
  ASSERT_TRUE(wait_output(*hold, "hold: connected", 20s)) << hold->output() << hang->output();
  ASSERT_TRUE(wait_output(*hang, "hang: connected", 20s)) << hang->output();
  ASSERT_EQ(::kill(hang->pid(), SIGKILL), 0);  // `simnic run` and env exec: the pid is the program's
  hang->wait(10s);
  Result r = hold->wait(15s);
  EXPECT_FALSE(r.timed_out) << "recv still blocked after the peer died\n" << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("hold: recv returned -1 errno 104"), std::string::npos) << r.output;  // ECONNRESET
  expect_rdma_traffic(nics_, before_, 1);
}

// The rsocket API itself, in one process (tests/programs/rsocket_check.cc).
TEST_F(Rsockets, ApiChecksInOneProcess) {
  Result r = nics_.run({bin_dir() + "/simnic-rsocket-check", nics_.addr(0), nics_.addr(1), "7474"}, 50s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok iomap"), std::string::npos) << r.output;  // riomap, riowrite, riounmap
  EXPECT_NE(r.output.find("ok iomap without credits"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("all rsocket checks passed"), std::string::npos) << r.output;
  expect_rdma_traffic(nics_, before_, 100, (4 << 20) / 4096);  // 4 MiB from simnic1
}

// Debian's rstream (rdmacm-utils) calls the r* functions itself: -S 1000 -C 100 in its default
// (non-blocking, busy-polling), blocking, async (rpoll) and non-blocking modes, data verified.
class Rstream : public Rsockets, public ::testing::WithParamInterface<const char*> {};

TEST_P(Rstream, RunsBetweenTwoNics) {
  if (!have_program("rstream")) GTEST_SKIP() << "needs rstream (Debian package rdmacm-utils)";
  std::vector<std::string> mode;
  for (const char* m = GetParam(); *m; m++) mode.insert(mode.end(), {"-T", std::string(1, *m)});
  std::vector<std::string> srv = {"rstream", "-b", nics_.addr(0), "-p", "7475", "-S", "1000", "-C", "100", "-T", "v"};
  srv.insert(srv.end(), mode.begin(), mode.end());
  auto server = nics_.start(srv);
  std::vector<std::string> cli = {"rstream", "-s",   nics_.addr(0), "-b",  nics_.addr(1), "-p", "7475",
                                  "-S",      "1000", "-C",          "100", "-T",          "v"};
  cli.insert(cli.end(), mode.begin(), mode.end());
  Result c = run_client_until_accepted(nics_, cli, *server);
  Result s = server->wait(30s);
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_EQ(s.exit_code, 0) << s.output;
  for (const Result* r : {&c, &s})
    EXPECT_TRUE(std::regex_search(r->output, std::regex("custom +1000 +100 +1 "))) << r->output;
  expect_rdma_traffic(nics_, before_, 100);
}

INSTANTIATE_TEST_SUITE_P(Modes, Rstream, ::testing::Values("", "b", "a", "n"), [](const auto& info) {
  std::string m = info.param;
  return m.empty()  ? std::string("Default")
         : m == "b" ? std::string("Blocking")
         : m == "a" ? std::string("Async")
                    : std::string("Nonblocking");
});

// Debian's riostream (rdmacm-utils): each side riomaps its buffer (RDMA_IOMAPSIZE 1), then the
// two riowrite -C transfers of -S bytes into each other's mapping in turn, each side spinning on
// the last byte of its own buffer; -T v checks the bytes of the last transfer. The client does
// not bind (riostream has no source address), so SIMNIC_CM_DEVICE puts it on simnic1.
struct RiostreamCase {
  const char* name;
  const char* modes;  // -T letters besides v
  int size, count;
};

class Riostream : public Rsockets, public ::testing::WithParamInterface<RiostreamCase> {};

TEST_P(Riostream, RunsBetweenTwoNicsWithTheDataVerified) {
  if (!have_program("riostream")) GTEST_SKIP() << "needs riostream (Debian package rdmacm-utils)";
  const RiostreamCase& tc = GetParam();
  std::vector<std::string> args = {"-p", "7476", "-S", std::to_string(tc.size), "-C", std::to_string(tc.count),
                                   "-T", "v"};
  for (const char* m = tc.modes; *m; m++) args.insert(args.end(), {"-T", std::string(1, *m)});
  std::vector<std::string> srv = {"riostream", "-b", nics_.addr(0)};
  srv.insert(srv.end(), args.begin(), args.end());
  auto server = nics_.start(srv);
  std::vector<std::string> cli = {"env", "SIMNIC_CM_DEVICE=simnic1", "riostream", "-s", nics_.addr(0)};
  cli.insert(cli.end(), args.begin(), args.end());
  Result c = run_client_until_accepted(nics_, cli, *server);
  Result s = server->wait(30s);
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_EQ(s.exit_code, 0) << s.output;
  char size[16];
  std::snprintf(size, sizeof size, tc.size >= 1024 ? "%dk" : "%d", tc.size >= 1024 ? tc.size / 1024 : tc.size);
  const std::regex line(std::string("custom +") + size + " +" + std::to_string(tc.count) + " +1 ");
  for (const Result* r : {&c, &s}) {
    EXPECT_TRUE(std::regex_search(r->output, line)) << r->output;
    EXPECT_EQ(r->output.find("verification failed"), std::string::npos) << r->output;
  }
  // Every transfer is at least one RDMA WRITE each way, and the bytes take a packet per MTU.
  expect_rdma_traffic(nics_, before_, uint64_t(tc.count), uint64_t(tc.count) * uint64_t(tc.size) / 4096);
}

INSTANTIATE_TEST_SUITE_P(SizesAndModes, Riostream,
                         ::testing::Values(RiostreamCase{"Default1000x100", "", 1000, 100},
                                           RiostreamCase{"Blocking64kx40", "b", 65536, 40},
                                           RiostreamCase{"Nonblocking4kx100", "n", 4096, 100},
                                           RiostreamCase{"Async16kx50", "a", 16384, 50},
                                           RiostreamCase{"Blocking100x200", "b", 100, 200}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace simnic::it
