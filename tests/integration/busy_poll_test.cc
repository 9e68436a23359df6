// simnicd --busy-poll-us (simnic up --busy-poll-us): after an event the NIC's loop keeps
// looking for the next one before it sleeps. The value is reported by `simnic status`, and
// perftest's ping-pong and bandwidth runs complete with the busy poll on and off. How fast is
// for `simnic bench`, never asserted here.
#include <gtest/gtest.h>

#include "harness.h"
#include "perftest_pair.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

uint64_t number(std::map<std::string, std::string>& st, const char* key) {
  return st.count(key) ? std::stoull(st[key]) : 0;
}

void perftest_pair(const Nics& nics, const char* binary, const std::vector<std::string>& args) {
  std::string out;
  ASSERT_NO_FATAL_FAILURE(run_perftest_pair(nics, binary, args, &out));
  EXPECT_NE(out.find("#bytes"), std::string::npos) << out;
}

void runs_with_busy_poll(const std::string& us) {
  if (!have_program("ib_send_lat") || !have_program("ib_write_bw"))
    GTEST_SKIP() << "perftest is not installed (scripts/setup.sh installs it)";
  Nics nics(2, {"--busy-poll-us", us});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  perftest_pair(nics, "ib_send_lat", {"-s", "2", "-n", "300"});
  perftest_pair(nics, "ib_write_bw", {"-s", "65536", "-n", "200"});
  for (const char* nic : {"simnic0", "simnic1"}) {
    auto st = nics.status(nic);
    EXPECT_EQ(st["busy_poll_us"], us) << nic;
    EXPECT_EQ(st["completion_errors"], "0") << nic;
    // Every event handled with a busy poll ends its window one way or the other; without one
    // the loop never enters a window.
    const uint64_t windows = number(st, "busy_poll_sleeps") + number(st, "busy_poll_gave_way");
    if (us == "0") EXPECT_EQ(windows + number(st, "busy_poll_found"), 0u) << nic;
    else EXPECT_GT(windows, 0u) << nic;
  }
  Result view = run({bin_dir() + "/simnic", "status", "simnic0"}, nics.env(), 30s);
  ASSERT_EQ(view.exit_code, 0) << view.output;
  const std::string said = us == "0" ? "--busy-poll-us 0" : "polls for up to " + us + " us";
  EXPECT_NE(view.output.find(said), std::string::npos) << view.output;
}

TEST(BusyPoll, PerftestRunsWithTheBusyPollOn) { runs_with_busy_poll("50"); }
TEST(BusyPoll, PerftestRunsWithTheBusyPollOff) { runs_with_busy_poll("0"); }

TEST(BusyPoll, BadValuesAreRefused) {
  for (const char* bad : {"-1", "abc", "1000001", "5x"}) {
    Result r =
        run({bin_dir() + "/simnicd", "--busy-poll-us", bad, "--addr", "127.0.0.1", "--dir", "/nonexistent"}, {}, 30s);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("bad --busy-poll-us"), std::string::npos) << bad << ": " << r.output;
  }
}

}  // namespace
}  // namespace simnic::it
