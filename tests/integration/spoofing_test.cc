// Issue 29, points 2 and 4, against real NICs: a classmate's socket bound to a peer NIC's
// address but another UDP port sends well-formed RoCEv2 packets (valid ICRC): simnicd drops
// them before they reach a QP and counts them (rx_drop_wrong_source), while genuine traffic
// between the NICs runs as before; and a sweep of 100,000 packets for QPNs that do not exist
// leaves the NIC's log small while every packet is counted.
// The sender needs no privilege (any local user may bind any 127/8 address and send to port
// 4791), so it runs as the test's user; when the test runs as root it drops to `nobody` in a
// forked child, as a classmate would be.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "harness.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/packet.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

uint32_t ip_of(const std::string& dotted) {
  in_addr a{};
  inet_pton(AF_INET, dotted.c_str(), &a);
  return ntohl(a.s_addr);
}

// `count` RoCEv2 packets from src_ip:src_port (0: any port) to dst_ip:4791; packet i is for QPN
// first_qpn + i. Forked; as `nobody` when we are root. True if the child sent them all.
bool send_forged(uint32_t src_ip, uint16_t src_port, uint32_t dst_ip, uint8_t opcode, uint32_t first_qpn,
                 uint32_t count) {
  pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    if (::geteuid() == 0) {
      const passwd* nobody = ::getpwnam("nobody");
      if (!nobody || ::setgid(nobody->pw_gid) != 0 || ::setuid(nobody->pw_uid) != 0) ::_exit(2);
    }
    int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in me{};
    me.sin_family = AF_INET;
    me.sin_port = htons(src_port);
    me.sin_addr.s_addr = htonl(src_ip);
    if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&me), sizeof me) != 0) ::_exit(3);
    socklen_t len = sizeof me;
    ::getsockname(s, reinterpret_cast<sockaddr*>(&me), &len);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(4791);
    to.sin_addr.s_addr = htonl(dst_ip);
    proto::PacketHeaders h{};
    h.bth.opcode = opcode;
    h.bth.pkey = 0xffff;
    h.deth.qkey = 0x11111111;
    h.reth.dma_len = 8;
    std::vector<uint8_t> payload(8, 0xee), out(512);
    for (uint32_t i = 0; i < count; ++i) {
      h.bth.dest_qp = (first_qpn + i) & 0xffffff;
      size_t n = proto::build_packet(h, payload, proto::IpUdpInfo{src_ip, dst_ip, ntohs(me.sin_port), 4791}, out);
      if (n == 0) ::_exit(4);
      // Paced a little so the NIC's receive buffer never overflows: every packet must be counted.
      while (::sendto(s, out.data(), n, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) < 0) ::usleep(100);
      if (i % 64 == 63) ::usleep(200);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

uint64_t stat_of(const Nics& nics, const char* nic, const char* name) {
  return std::stoull("0" + nics.status(nic)[name]);
}

// Waits until counter `name` of `nic` reaches `want` (bounded); returns its last value.
uint64_t wait_counter(const Nics& nics, const char* nic, const char* name, uint64_t want,
                      std::chrono::milliseconds timeout = 10s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  uint64_t v = stat_of(nics, nic, name);
  while (v < want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
    v = stat_of(nics, nic, name);
  }
  return v;
}

// An address of the test's own range that no NIC holds: addr(0) with the last byte 200.
uint32_t spare_address(const Nics& nics) { return (ip_of(nics.addr(0)) & ~0xffu) | 200; }

TEST(Spoofing, PacketsFromAPeerNicsAddressButAnotherPortAreDroppedAndCounted) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const uint32_t nic0 = ip_of(nics.addr(0)), nic1 = ip_of(nics.addr(1));
  // From simnic1's address, any free port: the classmate's socket.
  ASSERT_TRUE(send_forged(nic1, 0, nic0, proto::kRcWriteOnly, 0x123400, 20));
  EXPECT_EQ(wait_counter(nics, "simnic0", "rx_drop_wrong_source", 20), 20u);
  EXPECT_EQ(stat_of(nics, "simnic0", "rx_drop_no_qp"), 0u) << "dropped before any QP lookup";
  EXPECT_EQ(stat_of(nics, "simnic0", "rx_drop_icrc"), 0u) << "the forged packets were well-formed";
  // The same packets from port 4791 of a free address pass the port check (and find no QP).
  ASSERT_TRUE(send_forged(spare_address(nics), 4791, nic0, proto::kRcWriteOnly, 0x123400, 5));
  EXPECT_EQ(wait_counter(nics, "simnic0", "rx_drop_no_qp", 5), 5u);
  EXPECT_EQ(stat_of(nics, "simnic0", "rx_drop_wrong_source"), 20u);

  // Genuine traffic between the NICs is unaffected.
  if (!have_program("ibv_rc_pingpong")) GTEST_SKIP() << "ibv_rc_pingpong not installed: genuine traffic not run";
  const std::string port = std::to_string(free_tcp_port());
  auto srv = nics.start({"ibv_rc_pingpong", "-d", "simnic0", "-g", "0", "-p", port, "-n", "200", "-s", "4096"});
  ASSERT_TRUE(wait_for_listener(std::stoi(port), 10s)) << srv->output();
  Result cl =
      nics.run({"ibv_rc_pingpong", "-d", "simnic1", "-g", "0", "-p", port, "-n", "200", "-s", "4096", "127.0.0.1"},
               30s);
  Result sv = srv->wait(30s);
  EXPECT_EQ(cl.exit_code, 0) << cl.output;
  EXPECT_EQ(sv.exit_code, 0) << sv.output;
  EXPECT_NE(cl.output.find("200 iters"), std::string::npos) << cl.output;
  EXPECT_EQ(stat_of(nics, "simnic0", "rx_drop_wrong_source"), 20u);
  EXPECT_EQ(stat_of(nics, "simnic1", "rx_drop_wrong_source"), 0u);
}

// The flood: UD SENDs to 100,000 distinct QPNs. Every one is counted (as no QP, or as
// throttled once the UD sweep guard closes), and the NIC's log stays under 64 KiB.
TEST(Spoofing, SweepOfDistinctQpnsLeavesTheLogSmall) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::string log = nics.dir() + "/simnic0.log";
  struct stat before {};
  ASSERT_EQ(::stat(log.c_str(), &before), 0) << log;
  constexpr uint32_t kCount = 100'000;
  ASSERT_TRUE(send_forged(spare_address(nics), 4791, ip_of(nics.addr(0)), proto::kUdSendOnly, 0x200000, kCount));
  auto deadline = std::chrono::steady_clock::now() + 30s;
  uint64_t counted = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    auto st = nics.status("simnic0");
    counted = std::stoull("0" + st["rx_drop_no_qp"]) + std::stoull("0" + st["rx_drop_ud_throttled"]);
    if (counted >= kCount) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(counted, kCount);
  EXPECT_EQ(stat_of(nics, "simnic0", "rx_drop_socket_overflow"), 0u);
  struct stat after {};
  ASSERT_EQ(::stat(log.c_str(), &after), 0);
  EXPECT_LT(after.st_size - before.st_size, 64 * 1024) << "bytes of log written by the flood";
}

}  // namespace
}  // namespace simnic::it
