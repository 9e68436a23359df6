// Memory a program's objects took in simnicd is given back when the program ends, however
// many times it happens: 1,000 QPs with 1,024-deep queues take ~380 MB of the NIC's memory
// (rings and the NIC's per-WQE state), which glibc kept for reuse after the second program.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

uint64_t rss_kb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}

// Waits until the NIC has closed every context and its RSS fell under `limit_kb`.
uint64_t settled_rss_kb(const Nics& nics, pid_t pid, uint64_t limit_kb) {
  uint64_t rss = 0;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  do {
    std::this_thread::sleep_for(50ms);
    rss = rss_kb(pid);
  } while (std::chrono::steady_clock::now() < deadline &&
           (nics.status("simnic0")["contexts"] != "0" || rss > limit_kb));
  return rss;
}

TEST(Resources, TheNicGivesMemoryBackWhenProgramsEnd) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const pid_t nic = nics.daemon_pids().at(0);
  const uint64_t before = rss_kb(nic);
  ASSERT_GT(before, 0u);
  for (int round = 0; round < 3; ++round) {
    Result r = nics.run({bin_dir() + "/simnic-many-qps", "1000", "1024"}, 120s);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ASSERT_NE(r.output.find("made 1000 QPs"), std::string::npos) << r.output;
    const uint64_t after = settled_rss_kb(nics, nic, before + 64 * 1024);
    EXPECT_LT(after, before + 64 * 1024) << "round " << round << ": " << before << " kB before, " << after
                                         << " kB after the program ended";
  }
}

// A program that asks for more than its share gets ENOMEM from ibv_create_qp, not the NIC's
// whole memory; the NIC is unaffected for the next program.
TEST(Resources, AGreedyProgramGetsEnomemAndTheNicCarriesOn) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({bin_dir() + "/simnic-many-qps", "5000", "16384"}, 120s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ibv_create_qp: Cannot allocate memory"), std::string::npos) << r.output;
  Result again = nics.run({bin_dir() + "/simnic-many-qps", "10", "64"}, 60s);
  EXPECT_NE(again.output.find("made 10 QPs"), std::string::npos) << again.output;
}

}  // namespace
}  // namespace simnic::it
