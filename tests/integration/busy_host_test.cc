// Issue 26 point 1: a busy host is not a lossy fabric. 1,000 RC QP pairs write 64 KiB messages
// (ib_write_bw -q 1000, as ManyQps does) while the machine is loaded as `simnic bench --load
// all` loads it: one nice-0 busy loop per CPU, and a second NIC pair streaming ib_write_bw over
// 16 QPs and ib_send_bw, both busy-polling. The ACK timeout is the shortest simnic allows (perftest
// -u 8: 1 ms asked, 8 ms used), so the peer's queue outlasts it again and again. No loss is
// injected: no completion may fail and no packet may be sent twice (completer_timers.cc, "A
// queue is not a loss"; docs/reliability.md).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "harness.h"
#include "perftest_pair.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

// The load, for as long as the object lives; every process is killed by pid when it goes.
class BusyHost {
 public:
  explicit BusyHost(const Nics& load, int seconds = 80) {
    const long cpus = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
    for (long i = 0; i < cpus; ++i)
      procs_.push_back(std::make_unique<Process>(std::vector<std::string>{"sh", "-c", "while :; do :; done"}));
    const std::string d = std::to_string(seconds);
    stream(load, "ib_write_bw", {"-s", "65536", "-q", "16", "-D", d, "-F"});
    stream(load, "ib_send_bw", {"-s", "4096", "-D", d, "-F"});
  }
  bool ok() const { return ok_; }

 private:
  void stream(const Nics& load, const std::string& binary, const std::vector<std::string>& args) {
    const int port = free_tcp_port();
    auto side = [&](const char* nic) {
      std::vector<std::string> v = {binary, "-d", nic, "-x", "0", "-p", std::to_string(port)};
      v.insert(v.end(), args.begin(), args.end());
      return v;
    };
    procs_.push_back(load.start(side("simnic0")));
    ok_ = wait_for_listener(port, 15s) && ok_;
    std::vector<std::string> client = side("simnic1");
    client.push_back("127.0.0.1");
    procs_.push_back(load.start(client));
  }
  std::vector<std::unique_ptr<Process>> procs_;
  bool ok_ = true;
};

// When a test ends, the NICs' own words on every ACK timeout they counted (the journal's "no ACK
// from ... (why)" lines, at most five per NIC): a failure here says which rule of
// completer_timers.cc judged a wait a loss.
class TimeoutReasonsOnExit {
 public:
  explicit TimeoutReasonsOnExit(const Nics& nics) : nics_(nics) {}
  ~TimeoutReasonsOnExit() {
    for (const char* nic : {"simnic0", "simnic1"}) {
      std::ifstream log(nics_.dir() + "/" + nic + ".log");
      int shown = 0;
      for (std::string line; shown < 5 && std::getline(log, line);)
        if (line.find("no ACK from") != std::string::npos) std::printf("%s: %s\n", nic, line.c_str()), ++shown;
    }
  }

 private:
  const Nics& nics_;
};

TEST(BusyHost, AThousandQpPairsWriteUnderLoadWithoutAnErrorOrARetransmission) {
  if (!have_program("ib_write_bw")) GTEST_SKIP() << "perftest is not installed (scripts/setup.sh installs it)";
  Nics nics(2, {"--no-history"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Nics load_nics(2, {"--no-history"});
  ASSERT_TRUE(load_nics.ok()) << load_nics.up_result().output;
  BusyHost load(load_nics);
  ASSERT_TRUE(load.ok()) << "the load's perftest servers did not listen";
  const TimeoutReasonsOnExit reasons(nics);
  std::this_thread::sleep_for(1s);  // the load streams before the run starts
  std::string out;
  ASSERT_NO_FATAL_FAILURE(run_perftest_pair(nics, "ib_write_bw",
                                            {"-s", "65536", "-t", "4", "-q", "1000", "-n", "5", "-u", "8", "-F"}, &out,
                                            PerftestLimits{30s, 180s, 30s}));
  EXPECT_NE(out.find("#bytes"), std::string::npos) << out;
  for (const char* nic : {"simnic0", "simnic1"}) {
    auto st = nics.status(nic);
    EXPECT_EQ(st["completion_errors"], "0") << nic;
    EXPECT_EQ(st["retransmits"], "0") << nic;
    EXPECT_EQ(st["timeouts"], "0") << nic;
    EXPECT_EQ(st["rx_drop_socket_overflow"], "0") << nic;
    EXPECT_EQ(st["cc_in_flight"], "0") << nic;
    std::printf("%s: completion_errors %s retransmits %s timeouts %s timeouts_deferred %s cc_waits %s\n", nic,
                st["completion_errors"].c_str(), st["retransmits"].c_str(), st["timeouts"].c_str(),
                st["timeouts_deferred"].c_str(), st["cc_waits"].c_str());
  }
  // The load really ran: the other pair moved packets meanwhile.
  EXPECT_NE(load_nics.status("simnic1")["tx_packets"], "0");
}

// The soak (tests/programs/soak.cc: SEND, WRITE, READ and atomics over 48 RC QP pairs from
// three processes, every byte and atomic result checked, ACK timeout 16.8 ms) under the same
// load, with no fault injected: no error, no retransmission, no timeout. Two minutes, as the
// issue asks; SIMNIC_BUSY_SOAK_SECONDS shortens it (at least 10).
TEST(BusyHost, TheSoakRunsUnderLoadWithoutAnErrorOrARetransmission) {
  if (!have_program("ib_write_bw")) GTEST_SKIP() << "perftest is not installed (scripts/setup.sh installs it)";
  const std::string soak = bin_dir() + "/simnic-soak";
  if (::access(soak.c_str(), X_OK) != 0) GTEST_SKIP() << "simnic-soak is not built";
  const char* env = std::getenv("SIMNIC_BUSY_SOAK_SECONDS");
  const int seconds = std::max(10, env ? std::atoi(env) : 120);
  Nics nics(2, {"--no-history"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Nics load_nics(2, {"--no-history"});
  ASSERT_TRUE(load_nics.ok()) << load_nics.up_result().output;
  BusyHost load(load_nics, seconds + 20);
  ASSERT_TRUE(load.ok()) << "the load's perftest servers did not listen";
  const TimeoutReasonsOnExit reasons(nics);
  std::this_thread::sleep_for(1s);
  std::vector<std::unique_ptr<Process>> clients;
  for (const char* own : {"", "", "-c"}) {
    std::vector<std::string> argv = {
        soak, "-a", "simnic0", "-b", "simnic1", "-t", "2", "-q", "8", "-s", "16384", "-d", std::to_string(seconds),
        "-T", "120"};
    if (*own) argv.push_back(own);
    clients.push_back(nics.start(argv));
  }
  for (auto& c : clients) {
    Result r = c->wait(std::chrono::seconds(seconds + 180));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(", errors 0"), std::string::npos) << r.output;
  }
  for (const char* nic : {"simnic0", "simnic1"}) {
    auto st = nics.status(nic);
    EXPECT_EQ(st["completion_errors"], "0") << nic;
    EXPECT_EQ(st["retransmits"], "0") << nic;
    EXPECT_EQ(st["timeouts"], "0") << nic;
    std::printf(
        "%s: completions %s completion_errors %s retransmits %s timeouts %s timeouts_deferred %s receive_waits %s "
        "rnr_naks_sent %s rx_drop_socket_overflow %s rx_socket_buffer %s\n",
        nic, st["completions"].c_str(), st["completion_errors"].c_str(), st["retransmits"].c_str(),
        st["timeouts"].c_str(), st["timeouts_deferred"].c_str(), st["receive_waits"].c_str(),
        st["rnr_naks_sent"].c_str(), st["rx_drop_socket_overflow"].c_str(), st["rx_socket_buffer"].c_str());
    for (const auto& [key, value] : st)  // why a packet was not answered, if one was not
      if ((key.rfind("rx_drop", 0) == 0 || key == "duplicates" || key.rfind("naks", 0) == 0 ||
           key.rfind("cc_", 0) == 0 || key.rfind("tx_", 0) == 0 || key == "acks_sent" || key == "acks_received") &&
          value != "0")
        std::printf("%s: %s %s\n", nic, key.c_str(), value.c_str());
  }
  EXPECT_NE(load_nics.status("simnic1")["tx_packets"], "0");
}

}  // namespace
}  // namespace simnic::it
