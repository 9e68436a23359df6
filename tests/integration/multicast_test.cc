// UD multicast through the shim (ibv_attach_mcast/ibv_detach_mcast), between real processes on
// three NICs: one sender on simnic0, receivers on simnic1, simnic2 and simnic0 itself. Every
// receiver gets every datagram, byte-checked; after ibv_detach_mcast a QP gets no more; the
// capture shows each datagram once, to the IPv4 group, with DestQP 0xFFFFFF.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <sstream>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

constexpr int kRound1 = 40, kRound2 = 10;

// A group of our own (239.x.y.7 from the pid), so tests running in parallel never share one:
// IP multicast on loopback reaches every process on the host that joined the group.
std::string private_group() {
  const int pid = int(::getpid());
  return "239." + std::to_string(100 + pid % 100) + "." + std::to_string((pid / 100) % 256) + ".7";
}

// simnicd joins a group as any unprivileged process can: a UDP socket bound to <group>:4791
// and IP_ADD_MEMBERSHIP on the loopback interface. "" if this host allows it, else why not.
std::string loopback_multicast_refused(const std::string& group) {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("socket: ") + std::strerror(errno);
  int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(4791);
  ::inet_pton(AF_INET, group.c_str(), &a.sin_addr);
  ip_mreqn m{};
  m.imr_multiaddr = a.sin_addr;
  m.imr_address.s_addr = htonl(INADDR_LOOPBACK);
  std::string why;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) why = std::string("bind: ") + std::strerror(errno);
  else if (::setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof m) != 0)
    why = std::string("IP_ADD_MEMBERSHIP on lo: ") + std::strerror(errno);
  ::close(fd);
  return why;
}

struct GroupRun {
  std::string sender_output;
  int sender_exit = -1;
  std::vector<Result> receivers;
};

GroupRun run_group(const Nics& nics, const std::string& group, const std::string& sync) {
  const std::string prog = bin_dir() + "/simnic-mcast";
  const std::string n1 = std::to_string(kRound1), n2 = std::to_string(kRound2);
  std::vector<std::unique_ptr<Process>> rx;
  for (const char* nic : {"simnic1", "simnic2", "simnic0"})
    rx.push_back(nics.start({prog, "recv", nic, group, n1, n2, sync, std::string("on-") + nic}));
  Result s = nics.run({prog, "send", "simnic0", group, n1, n2, sync, "3"}, 60s);
  GroupRun out{s.output, s.exit_code, {}};
  for (auto& p : rx) out.receivers.push_back(p->wait(30s));
  return out;
}

uint64_t counter(const Nics& nics, const std::string& nic, const std::string& name) {
  auto st = nics.status(nic);
  auto it = st.find(name);
  return it == st.end() ? ~0ull : std::stoull(it->second);
}

TEST(Multicast, ReceiversOnThreeNicsGetEveryDatagramUntilTheyDetach) {
  const std::string group = private_group();
  if (std::string why = loopback_multicast_refused(group); !why.empty())
    GTEST_SKIP() << "this host refuses IP multicast on loopback (" << why << "), which simnic's multicast needs";
  const std::string caps = "/tmp/simnic-it-mcast-" + std::to_string(::getpid());
  const std::string sync = caps + "/sync";
  ASSERT_EQ(run({"mkdir", "-p", sync}).exit_code, 0);
  {
    Nics nics(3, {"--pcap-dir", caps});
    ASSERT_TRUE(nics.ok()) << nics.up_result().output;
    GroupRun r = run_group(nics, group, sync);
    ASSERT_EQ(r.sender_exit, 0) << r.sender_output;
    EXPECT_NE(r.sender_output.find("its own QP, not attached, received 0 datagrams"), std::string::npos)
        << r.sender_output;
    for (const Result& rx : r.receivers) {
      EXPECT_EQ(rx.exit_code, 0) << rx.output;
      EXPECT_NE(rx.output.find("each received all 40 datagrams of round 1, every byte as sent"), std::string::npos)
          << rx.output;
      EXPECT_NE(rx.output.find("main, detached, received 0 of them"), std::string::npos) << rx.output;
      EXPECT_NE(rx.output.find("detach again: EINVAL"), std::string::npos) << rx.output;
      EXPECT_NE(rx.output.find("destroy while attached: EBUSY"), std::string::npos) << rx.output;
    }
    // Each NIC handed every datagram of round 1 to two QPs and round 2's to one.
    for (const char* nic : {"simnic0", "simnic1", "simnic2"})
      EXPECT_EQ(counter(nics, nic, "mcast_deliveries"), uint64_t(2 * kRound1 + kRound2)) << nic;
    EXPECT_EQ(counter(nics, "simnic0", "mcast_tx_packets"), uint64_t(kRound1 + kRound2));
    EXPECT_EQ(counter(nics, "simnic1", "rx_drop_mcast"), 0u);
  }  // `simnic down` closes the captures
  if (!have_program("tshark")) GTEST_SKIP() << "tshark is not installed: the capture was not decoded";
  // simnic1's capture: each datagram once, from simnic0 to the group, DestQP 0xFFFFFF.
  Result t = run({"tshark", "-r", caps + "/simnic1.pcap", "--disable-protocol", "rpcordma", "-Y", "infiniband.bth",
                  "-T", "fields", "-e", "ip.dst", "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.opcode"},
                 {{"HOME", caps}}, 60s);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  int datagrams = 0;
  std::istringstream in(t.output);
  for (std::string line; std::getline(in, line);) {
    if (line.find('\t') == std::string::npos) continue;  // tshark's notes
    EXPECT_EQ(line, group + "\t0xffffff\t100") << "UD SEND ONLY to the group, DestQP 0xFFFFFF";
    ++datagrams;
  }
  EXPECT_EQ(datagrams, kRound1 + kRound2);
  run({"rm", "-rf", caps});
}

}  // namespace
}  // namespace simnic::it
