// The ICRC of what really leaves on the wire: a capture of `lo` (not simnic's own --pcap-dir,
// which shows what simnic thinks it sent) checked by scripts/check_icrc.py, which computes the
// RoCEv2 ICRC with Python's zlib and shares no code with simnic. The kernel chooses the IPv4
// Identification, which the ICRC covers; this fails if simnic ever guesses it wrong again.
#include <gtest/gtest.h>

#include <csignal>
#include <optional>
#include <thread>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

// Captures `lo` while simnic-verbs-check moves data between the two NICs, then checks the
// capture. Empty when the capture could not start.
std::optional<Result> capture_and_check(const Nics& nics, const std::string& pcap) {
  const std::string filter = "udp port 4791 and host " + nics.addr(0);
  Process capture({"tshark", "-i", "lo", "-F", "pcap", "-f", filter, "-w", pcap}, {{"HOME", "/tmp"}});
  bool capturing = false;
  for (int i = 0; i < 100 && !capturing; ++i) {
    std::this_thread::sleep_for(100ms);
    capturing = capture.output().find("Capturing on") != std::string::npos;
    if (capture.output().find("ermission") != std::string::npos) break;
  }
  if (!capturing) return std::nullopt;
  std::this_thread::sleep_for(1s);  // tshark says so as dumpcap starts, a little before packets flow into the file
  Result r = nics.run({bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic1", "-n", "1"}, 60s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::this_thread::sleep_for(500ms);
  ::kill(capture.pid(), SIGINT);  // tshark finishes the file on SIGINT
  Result cap = capture.wait(10s);
  Result check = run({"python3", SIMNIC_TEST_SOURCE_DIR "/scripts/check_icrc.py", pcap}, {}, 60s);
  check.output += "\n(tshark: " + cap.output + ")";
  return check;
}

TEST(WireIcrc, ALoopbackCaptureVerifiesWithAnIndependentChecker) {
  if (!have_program("tshark")) GTEST_SKIP() << "tshark is not installed (scripts/setup.sh installs it)";
  if (!have_program("python3")) GTEST_SKIP() << "python3 is not installed";
  const std::string pcap = "/tmp/simnic-it-lo-" + std::to_string(::getpid()) + ".pcap";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  std::optional<Result> check = capture_and_check(nics, pcap);
  if (!check) GTEST_SKIP() << "cannot capture on lo here (needs root or CAP_NET_RAW)";
  // A capture that caught nothing at all says nothing about the ICRC: try once more.
  // (The checker prints a line per bad packet first, so a bare summary means no packet at all.)
  if (check->output.rfind("0 passed, 0 failed", 0) == 0) check = capture_and_check(nics, pcap);
  ASSERT_TRUE(check);
  EXPECT_EQ(check->exit_code, 0) << check->output;
  EXPECT_NE(check->output.find(" passed, 0 failed"), std::string::npos) << check->output;
  // The summary line: "N passed, M failed (RoCEv2 packets in FILE)".
  const size_t summary = check->output.find(" passed, ");
  ASSERT_NE(summary, std::string::npos) << check->output;
  const size_t line = check->output.rfind('\n', summary);
  EXPECT_GT(std::stoul(check->output.substr(line == std::string::npos ? 0 : line + 1)), 100u) << check->output;
  std::remove(pcap.c_str());
}

}  // namespace
}  // namespace simnic::it
