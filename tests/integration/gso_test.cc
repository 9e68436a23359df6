// UDP GSO and GRO (SIMNIC_GSO=1 in simnicd's environment): a run of same-sized datagrams to one
// peer leaves in one send, the receiving port takes a whole send in one buffer and cuts it back
// into datagrams. Every byte must still arrive, and every segment the kernel cuts must carry
// the ICRC of the IPv4 Identification the kernel gives it (0, 1, 2, ... within a send).
#include <gtest/gtest.h>

#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

uint64_t number(std::map<std::string, std::string>& st, const char* key) {
  return st.count(key) ? std::stoull(st[key]) : 0;
}

// simnic-verbs-check with 200,000-byte messages (runs of 4 KiB packets, what GSO batches):
// every operation passes and every byte compares.
::testing::AssertionResult verbs_check_passes(const Nics& nics, const char* rounds) {
  Result r =
      nics.run({bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic1", "-s", "200000", "-n", rounds},
               120s);
  if (r.exit_code == 0 && r.output.find(" passed, 0 failed") != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "exit " << r.exit_code << ":\n" << r.output;
}

// `simnic up --gso`.
TEST(Gso, EveryRcOperationArrivesWithGsoAndGro) {
  Nics nics(2, {"--gso"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  ASSERT_TRUE(verbs_check_passes(nics, "3"));
  uint64_t gso_sends = 0, gro_buffers = 0;
  for (const char* nic : {"simnic0", "simnic1"}) {
    auto st = nics.status(nic);
    EXPECT_EQ(st["gso"], "1") << nic;
    EXPECT_EQ(st["rx_drop_icrc"], "0") << nic;
    EXPECT_EQ(st["rx_drop_malformed"], "0") << nic;
    gso_sends += number(st, "tx_gso_sends");
    gro_buffers += number(st, "rx_gro_buffers");
  }
  // 200,000-byte messages are runs of 4 KiB datagrams: GSO sends, received as GRO buffers.
  EXPECT_GT(gso_sends, 0u);
  EXPECT_GT(gro_buffers, 0u);
}

// A capture on lo: our own AF_PACKET socket, as tcpdump and Wireshark open one.
class LoCapture {
 public:
  LoCapture() {
    fd_ = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL));
    sockaddr_ll a{};
    a.sll_family = AF_PACKET;
    a.sll_protocol = htons(ETH_P_ALL);
    a.sll_ifindex = int(::if_nametoindex("lo"));
    if (fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ::close(fd_), fd_ = -1;
    int big = 32 << 20;
    if (fd_ >= 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
  }
  ~LoCapture() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  // The largest UDP datagram to `port` seen so far (IPv4 total length), and how many.
  void drain(uint16_t port, size_t* largest, size_t* count) {
    uint8_t frame[70000];
    ssize_t n;
    while ((n = ::recv(fd_, frame, sizeof frame, MSG_TRUNC)) > 0) {
      if (n < 14 + 20 + 8 || frame[12] != 0x08 || frame[13] != 0x00 || frame[14 + 9] != IPPROTO_UDP) continue;
      const size_t ihl = (frame[14] & 0x0f) * 4;
      if (((frame[14 + ihl + 2] << 8) | frame[14 + ihl + 3]) != port) continue;
      *largest = std::max(*largest, size_t((frame[16] << 8) | frame[17]));
      ++*count;
    }
  }

 private:
  int fd_ = -1;
};

// The default: GSO on loopback while nobody captures lo. A capture turns it off (the packets
// it sees are single RoCEv2 packets), and closing the capture turns it back on.
TEST(Gso, AutomaticGsoStepsAsideWhileLoIsCaptured) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  auto gso_sends = [&] {
    auto now = nics.status("simnic0");
    return number(now, "tx_gso_sends");
  };
  ASSERT_TRUE(verbs_check_passes(nics, "2"));
  auto st = nics.status("simnic0");
  EXPECT_EQ(st["gso_mode"], "auto");
  EXPECT_EQ(st["gso"], "1");
  const uint64_t before = gso_sends();
  EXPECT_GT(before, 0u) << "no GSO send without a capture";
  {
    LoCapture capture;
    if (!capture.ok()) GTEST_SKIP() << "cannot open an AF_PACKET socket (needs CAP_NET_RAW)";
    std::this_thread::sleep_for(50ms);  // longer than the NIC's 20 ms between looks
    ASSERT_TRUE(verbs_check_passes(nics, "2"));
    size_t largest = 0, count = 0;
    capture.drain(4791, &largest, &count);
    EXPECT_GT(count, 100u);
    EXPECT_LE(largest, 4096u + 20 + 8 + 64) << "a GSO send was captured";  // MTU payload + IP + UDP + headers
    st = nics.status("simnic0");
    EXPECT_EQ(st["gso"], "0");
    EXPECT_GE(number(st, "gso_capture_seen"), 1u);
    EXPECT_EQ(gso_sends(), before) << "GSO sends while lo was captured";
  }
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(verbs_check_passes(nics, "2"));
  EXPECT_EQ(nics.status("simnic0")["gso"], "1");
  EXPECT_GT(gso_sends(), before);
}

// `simnic up --no-gso`: never.
TEST(Gso, NoGsoMeansOneDatagramPerPacket) {
  Nics nics(2, {"--no-gso"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  ASSERT_TRUE(verbs_check_passes(nics, "2"));
  for (const char* nic : {"simnic0", "simnic1"}) {
    auto st = nics.status(nic);
    EXPECT_EQ(st["gso_mode"], "off") << nic;
    EXPECT_EQ(st["gso"], "0") << nic;
    EXPECT_EQ(number(st, "tx_gso_sends"), 0u) << nic;
  }
}

// SIMNIC_GSO=1 in the environment (here), in a network namespace of its own whose `lo` segments UDP in software
// (ethtool: no tx-udp-segmentation), a capture of `lo` shows the segments as the kernel made them, and
// scripts/check_icrc.py (Python's zlib, no simnic code) verifies each one.
class SegmentingHost {
 public:
  SegmentingHost() {
    ns_ = "simnicgso" + std::to_string(::getpid());
    char tmpl[] = "/tmp/simnic-gso-XXXXXX";
    dir_ = ::mkdtemp(tmpl) ? tmpl : "";
    if (::geteuid() != 0) why_not_ = "creating a network namespace needs root";
    else if (!have_program("ip")) why_not_ = "`ip` (iproute2) is not installed";
    else if (!have_program("ethtool")) why_not_ = "ethtool is not installed (scripts/setup.sh installs it)";
    else if (!have_program("tshark")) why_not_ = "tshark is not installed (scripts/setup.sh installs it)";
    if (!why_not_.empty()) return;
    for (const std::vector<std::string>& step :
         {std::vector<std::string>{"ip", "netns", "add", ns_}, in_ns({"ip", "link", "set", "lo", "up"}),
          in_ns({"ethtool", "-K", "lo", "tx-udp-segmentation", "off"})})
      if (Result r = it::run(step, {}, 10s); r.exit_code != 0) {
        why_not_ = "cannot set up the namespace: " + r.output;
        return;
      }
  }
  ~SegmentingHost() {
    it::run(in_ns({bin_dir() + "/simnic", "down"}), env(), 20s);
    it::run({"ip", "netns", "del", ns_}, {}, 10s);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& why_not() const { return why_not_; }
  std::vector<std::string> in_ns(const std::vector<std::string>& argv) const {
    std::vector<std::string> full = {"ip", "netns", "exec", ns_};
    full.insert(full.end(), argv.begin(), argv.end());
    return full;
  }
  std::map<std::string, std::string> env() const {
    return {{"SIMNIC_DIR", dir_}, {"HOME", "/tmp"}, {"SIMNIC_GSO", "1"}};
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string ns_, dir_, why_not_;
};

TEST(Gso, SegmentsOnTheWireCarryTheIcrcOfTheirIdentification) {
  SegmentingHost host;
  if (!host.why_not().empty()) GTEST_SKIP() << host.why_not();
  Result up = it::run(host.in_ns({bin_dir() + "/simnic", "up", "2"}), host.env(), 30s);
  ASSERT_EQ(up.exit_code, 0) << up.output;
  const std::string pcap = host.dir() + "/lo.pcap";
  Process capture(host.in_ns({"tshark", "-i", "lo", "-F", "pcap", "-f", "udp port 4791", "-w", pcap}), host.env());
  bool capturing = false;
  for (int i = 0; i < 100 && !capturing; ++i) {
    std::this_thread::sleep_for(100ms);
    capturing = capture.output().find("Capturing on") != std::string::npos;
  }
  if (!capturing) GTEST_SKIP() << "cannot capture on the namespace's lo: " << capture.output();
  std::this_thread::sleep_for(1s);  // dumpcap reports before packets reach the file
  Result r = it::run(host.in_ns({bin_dir() + "/simnic", "run", "--", bin_dir() + "/simnic-verbs-check", "-a", "simnic0",
                                 "-b", "simnic1", "-s", "100000", "-n", "1"}),
                     host.env(), 120s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::this_thread::sleep_for(500ms);
  ::kill(capture.pid(), SIGINT);
  capture.wait(10s);
  Result check = run({"python3", SIMNIC_TEST_SOURCE_DIR "/scripts/check_icrc.py", pcap}, {}, 60s);
  ASSERT_EQ(check.exit_code, 0) << check.output;
  // "N passed, 0 failed (RoCEv2 packets in FILE; K with a non-zero IP Identification)"
  const size_t summary = check.output.find(" passed, 0 failed");
  ASSERT_NE(summary, std::string::npos) << check.output;
  const size_t line = check.output.rfind('\n', summary);
  EXPECT_GT(std::stoul(check.output.substr(line == std::string::npos ? 0 : line + 1)), 100u) << check.output;
  const size_t numbered = check.output.find("; ", summary);
  ASSERT_NE(numbered, std::string::npos) << check.output;
  EXPECT_GT(std::stoul(check.output.substr(numbered + 2)), 0u) << "no GSO segment reached the wire\n" << check.output;
}

}  // namespace
}  // namespace simnic::it
