// fio's RDMA engine (Debian's fio, ioengine=rdma) on a simnic NIC: RDMA WRITE, RDMA READ and
// SEND/RECV, each a server and a client fio process running a section of data/rdma.fio. The
// tests check fio's own verdict (exit status, `err= 0`), the io size it reports, and that the
// NIC carried at least that many bytes (so no other transport could have stood in).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "harness.h"
#include "middleware_util.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

const std::string kJobFile = std::string(SIMNIC_TEST_SOURCE_DIR) + "/tests/middleware/data/rdma.fio";

// One of simnic0's counters (tx_bytes, rx_bytes).
uint64_t counter(const Nics& nics, const std::string& key) { return counter_in(nics.status("simnic0"), key); }

// Runs the `<verb>-server` and `<verb>-client` sections of the job file against simnic0 and
// returns their outputs; the server is started first and given time to listen.
struct FioRun {
  Result server, client;
};

FioRun run_verb(const Nics& nics, const std::string& verb) {
  std::map<std::string, std::string> env = nics.env();
  env["FIO_HOST"] = nics.addr(0);
  env["FIO_PORT"] = std::to_string(free_tcp_port());  // rdma_cm port, fresh for each verb
  auto fio = [&](const std::string& section) {
    return std::vector<std::string>{bin_dir() + "/simnic", "run", "--", "fio", "--section=" + section, kJobFile};
  };
  Process server(fio(verb + "-server"), env);
  // fio prints this once rdma_listen returned; a client connecting earlier would be rejected.
  for (int i = 0; i < 200 && server.output().find("waiting for connection") == std::string::npos; ++i)
    std::this_thread::sleep_for(50ms);
  FioRun r;
  r.client = run(fio(verb + "-client"), env, 30s);
  r.server = server.wait(15s);
  return r;
}

void expect_fio_ok(const Result& r, const char* side) {
  EXPECT_FALSE(r.timed_out) << side << ":\n" << r.output;
  EXPECT_EQ(r.exit_code, 0) << side << ":\n" << r.output;
  EXPECT_NE(r.output.find("err= 0"), std::string::npos) << side << ":\n" << r.output;
}

class Fio : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_program("fio")) GTEST_SKIP() << "needs fio (Debian package fio)";
  }

  // Runs one verb and checks both fio processes, the io size the client reports (and the
  // server, where fio counts it there), and that simnic0 carried the bytes both ways.
  void check_verb(const std::string& verb, const std::string& io_size, uint64_t bytes, bool server_counts_io) {
    Nics nics(1);
    ASSERT_TRUE(nics.ok()) << nics.up_result().output;
    const uint64_t tx0 = counter(nics, "tx_bytes"), rx0 = counter(nics, "rx_bytes");
    FioRun r = run_verb(nics, verb);
    expect_fio_ok(r.server, "server");
    expect_fio_ok(r.client, "client");
    EXPECT_NE(r.client.output.find("io=" + io_size), std::string::npos) << r.client.output;
    if (server_counts_io) {
      EXPECT_NE(r.server.output.find("io=" + io_size), std::string::npos) << r.server.output;
    }
    // Server and client share simnic0: every payload byte leaves and enters it once.
    EXPECT_GE(counter(nics, "tx_bytes") - tx0, bytes);
    EXPECT_GE(counter(nics, "rx_bytes") - rx0, bytes);
  }
};

// The server of a WRITE or READ job only advertises its buffers and waits for the client's
// "done" message, so fio reports no io on its side; the client reports the bytes moved.
TEST_F(Fio, RdmaWriteMovesTheJobSize) { check_verb("write", "4096KiB", 4u << 20, false); }

TEST_F(Fio, RdmaReadMovesTheJobSize) { check_verb("read", "4096KiB", 4u << 20, false); }

// SEND/RECV: both sides count the io (the server's receives complete with the data).
TEST_F(Fio, SendRecvMovesTheJobSizeOnBothSides) { check_verb("send", "1024KiB", 1u << 20, true); }

}  // namespace
}  // namespace simnic::it
