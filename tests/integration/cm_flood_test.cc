// Issue 29, point 5: a classmate floods a listening rdma_cm program with forged connection
// requests (CM REQ MADs from a plain UDP socket on another 127/8 address, as another user),
// while the program's real client connects. The real client must get in and the program must
// keep serving; malformed REQs must never reach the program.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness.h"
#include "simnic/abi/cm.h"
#include "simnic/proto/cm_mad.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/packet.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;
namespace cm = simnic::proto::cm;

uint32_t ip_of(const std::string& s) {
  in_addr a{};
  inet_pton(AF_INET, s.c_str(), &a);
  return ntohl(a.s_addr);
}

// The RoCEv2 datagram of a REQ from `src` to the rdma_cm port `port` of the NIC at `dst`: what
// rdma_connect would send, with the attacker's own address (or a malformed one: `qpn` 0).
std::vector<uint8_t> forged_req(uint32_t src, uint16_t src_port, uint32_t dst, uint16_t port, uint32_t comm_id,
                                uint32_t qpn, uint8_t resources = 1) {
  cm::Message m;
  m.attr_id = cm::kReq;
  m.tid = uint64_t(comm_id) << 32 | 1;
  m.local_comm_id = comm_id;
  m.service_id = cm::service_id(abi::kPsTcp, port);
  m.qpn = qpn;
  m.starting_psn = comm_id & 0xffffff;
  m.responder_resources = m.initiator_depth = resources;
  m.remote_cm_response_timeout = m.local_cm_response_timeout = 20;
  m.retry_count = m.rnr_retry_count = 7;
  m.max_cm_retries = 15;
  m.path_mtu = 3;  // 1024
  cm::encode_cma_hdr(cm::CmaHdr{4, uint16_t(40000 + comm_id % 1000), src, dst}, m.private_data);
  std::array<uint8_t, cm::kMadBytes> mad{};
  cm::encode(m, mad);
  proto::PacketHeaders h;
  h.bth.opcode = proto::kUdSendOnly;
  h.bth.dest_qp = cm::kGsiQpn;
  h.bth.psn = comm_id & 0xffffff;
  h.deth.qkey = cm::kGsiQkey;
  h.deth.src_qp = cm::kGsiQpn;
  std::vector<uint8_t> pkt(512);
  pkt.resize(proto::build_packet(h, mad, proto::IpUdpInfo{src, dst, src_port, 4791}, pkt));
  return pkt;
}

// Sends `datagrams` from src:src_port to dst:4791, 5,000 a second (the 10,000 in two
// seconds), until killed or for at most 20 s, in a forked child that is another user (nobody)
// when this test runs as root. Returns the child's pid.
pid_t flood(const std::string& src, uint16_t src_port, const std::string& dst,
            const std::vector<std::vector<uint8_t>>& datagrams) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  if (::geteuid() == 0 && (::setgroups(0, nullptr) || ::setgid(65534) || ::setuid(65534))) _exit(3);
  int s = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in from{}, to{};
  from.sin_family = to.sin_family = AF_INET;
  from.sin_port = htons(src_port);
  to.sin_port = htons(4791);
  inet_pton(AF_INET, src.c_str(), &from.sin_addr);
  inet_pton(AF_INET, dst.c_str(), &to.sin_addr);
  if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&from), sizeof from)) _exit(4);
  const auto end = std::chrono::steady_clock::now() + 20s;
  for (size_t i = 0; i < datagrams.size() && std::chrono::steady_clock::now() < end; ++i) {
    ::sendto(s, datagrams[i].data(), datagrams[i].size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
    if (i % 10 == 9) ::usleep(2000);
  }
  _exit(0);
}

// The flooder's exit status; it is killed (by pid) if still running after `limit`.
int wait_bounded(pid_t pid, std::chrono::seconds limit) {
  int status = 0;
  for (auto end = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < end;) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::this_thread::sleep_for(20ms);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The flooder sends from a free loopback address on the NICs' port: a loopback NIC drops what
// comes from any other port (rx_drop_wrong_source, spoofing_test.cc), so this is the one way a
// classmate's REQs still reach the CM.
constexpr uint16_t kNicPort = 4791;

// Forged REQs from one address and port, 10,000 in two seconds and on while the real client
// connects (and one malformed, QPN 0), used to fill the listener's 1,024 requests: the real
// client was rejected (REJECTED, status 28).
// Now the flooding source holds at most 32, the program hears of at most its backlog (4), and
// the next request it hears of is from the source holding the fewest: the real client's.
TEST(CmFlood, AForgedRequestFloodFromOneSourceDoesNotShutOutTheRealClient) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::string server_ip = nics.addr(0), client_ip = nics.addr(1);
  const std::string attacker = server_ip.substr(0, server_ip.rfind('.')) + ".200";
  const uint16_t port = uint16_t(21000 + ::getpid() % 1000);
  std::vector<std::vector<uint8_t>> reqs;
  reqs.push_back(forged_req(ip_of(attacker), kNicPort, ip_of(server_ip), port, 7, 0));  // malformed: QPN 0
  for (uint32_t i = 0; i < 100000; ++i)
    reqs.push_back(forged_req(ip_of(attacker), kNicPort, ip_of(server_ip), port, 1000 + i, 0x100 + i));

  auto server = nics.start(
      {bin_dir() + "/simnic-cm-check", "server", server_ip, std::to_string(port), "accept-from=" + client_ip});
  for (int i = 0; i < 300 && server->output().find("listening") == std::string::npos; ++i) ::usleep(50 * 1000);
  ASSERT_NE(server->output().find("listening"), std::string::npos) << server->output();

  const pid_t flooder = flood(attacker, kNicPort, server_ip, reqs);
  ASSERT_GT(flooder, 0);
  std::this_thread::sleep_for(300ms);  // the flood is under way
  Result client = nics.run({bin_dir() + "/simnic-cm-check", "client", server_ip, std::to_string(port), client_ip,
                            "expect-established"},
                           60s);
  Result srv = server->wait(30s);
  ::kill(flooder, SIGKILL);  // the flood went on all along
  const int flooded = wait_bounded(flooder, 30s);
  EXPECT_TRUE(flooded == 128 || flooded == 0) << "the flooder failed (exit 3: setuid, 4: bind): " << flooded;

  EXPECT_EQ(client.exit_code, 0) << client.output << "\nserver:\n" << srv.output;
  EXPECT_NE(client.output.find("RDMA_CM_EVENT_ESTABLISHED"), std::string::npos) << client.output;
  EXPECT_EQ(srv.exit_code, 0) << srv.output;
  EXPECT_NE(srv.output.find("request from " + client_ip + " after rejecting"), std::string::npos) << srv.output;
  // The NIC said why, once a second at most, not once per REQ.
  const std::string log = read_file(nics.dir() + "/simnic0.log");
  EXPECT_NE(log.find("dropped a REQ from " + attacker), std::string::npos) << log;
  EXPECT_NE(log.find("that source already has 32 requests waiting"), std::string::npos) << log;
  EXPECT_LT(log.size(), 64u * 1024) << "a log line per forged REQ";
}

// A forged REQ may say anything the fields hold: 255 responder resources and initiator depth.
// rdma_accept(id, NULL) takes the request's values; as librdmacm's, ours caps them at what the
// device supports, so RTR and RTS do not fail (before: EINVAL, max_dest_rd_atomic 255 > 128).
TEST(CmFlood, AcceptingAForgedRequestWithAbsurdResourcesWorks) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::string server_ip = nics.addr(0);
  const std::string attacker = server_ip.substr(0, server_ip.rfind('.')) + ".201";
  const uint16_t port = uint16_t(22000 + ::getpid() % 1000);
  auto server = nics.start({bin_dir() + "/simnic-cm-check", "server", server_ip, std::to_string(port), "accept-null"});
  for (int i = 0; i < 300 && server->output().find("listening") == std::string::npos; ++i) ::usleep(50 * 1000);
  ASSERT_NE(server->output().find("listening"), std::string::npos) << server->output();
  const pid_t sender = flood(attacker, kNicPort, server_ip,
                             {forged_req(ip_of(attacker), kNicPort, ip_of(server_ip), port, 77, 0x4242, 255)});
  ASSERT_GT(sender, 0);
  EXPECT_EQ(wait_bounded(sender, 30s), 0);
  Result srv = server->wait(30s);
  EXPECT_EQ(srv.exit_code, 0) << srv.output;
  EXPECT_NE(srv.output.find("rdma_accept: ok"), std::string::npos) << srv.output;
}

}  // namespace
}  // namespace simnic::it
