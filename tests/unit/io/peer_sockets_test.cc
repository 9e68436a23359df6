// The peer NICs' sockets as /proc/net/udp lists them (issue 26: an ACK timer asks whether a
// packet to a peer on this host could have been lost).
#include "simnic/io/peer_sockets.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace simnic::io {
namespace {

const char* kHeader =
    "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer "
    "drops\n";
// 127.254.99.1:4791, 8448 bytes queued, inode 2838871, 3 drops; 127.254.99.2:4791, empty.
const char* kTwoNics =
    " 8728: 0163FE7F:12B7 00000000:0000 07 00000000:00002100 00:00000000 00000000     0        0 2838871 2 "
    "000000006af2b6c7 3\n"
    " 8728: 0263FE7F:12B7 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 2838862 2 "
    "000000007ad00fd8 0\n";

TEST(PeerSockets, ALineGivesTheAddressQueueInodeAndDrops) {
  UdpSocketLine s;
  ASSERT_TRUE(parse_proc_net_udp_line(
      " 8728: 0163FE7F:12B7 00000000:0000 07 00000000:00002100 00:00000000 00000000     0        0 2838871 2 "
      "000000006af2b6c7 3",
      &s));
  EXPECT_EQ(s.ip, 0x7FFE6301u);  // 127.254.99.1
  EXPECT_EQ(s.port, 4791);
  EXPECT_EQ(s.queued, 0x2100u);
  EXPECT_EQ(s.inode, 2838871u);
  EXPECT_EQ(s.drops, 3u);
  EXPECT_FALSE(parse_proc_net_udp_line(kHeader, &s));
  EXPECT_FALSE(parse_proc_net_udp_line("", &s));
  EXPECT_FALSE(parse_proc_net_udp_line(" 1: garbage", &s));
}

class PeerSocketsFile : public ::testing::Test {
 protected:
  void write(const std::string& body) { std::ofstream(path_) << kHeader << body; }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_ = "/tmp/simnic-peer-sockets-" + std::to_string(::getpid());
};

TEST_F(PeerSocketsFile, AFoundSocketIsLocalAndOpenAndAVanishedOneIsGone) {
  write(kTwoNics);
  PeerSockets p(path_);
  auto e = p.find(0x7FFE6301, 4791);
  EXPECT_TRUE(e.local && e.open);
  EXPECT_EQ(e.queued, 0x2100u);
  EXPECT_EQ(e.drops, 3u);
  EXPECT_EQ(e.socket, 2838871u);
  EXPECT_TRUE(p.find(0x7FFE6302, 4791).open);
  EXPECT_EQ(p.reads(), 1u);  // one read for every question until forget()
  // The first NIC dies: its socket goes from the table.
  write(
      " 8728: 0263FE7F:12B7 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 2838862 2 "
      "000000007ad00fd8 0\n");
  EXPECT_TRUE(p.find(0x7FFE6301, 4791).open);  // not read again yet
  p.forget();
  e = p.find(0x7FFE6301, 4791);
  EXPECT_TRUE(e.local);
  EXPECT_FALSE(e.open);
  EXPECT_EQ(p.reads(), 2u);
}

TEST_F(PeerSocketsFile, AnAddressOnAnotherHostIsNotLocal) {
  write(kTwoNics);
  PeerSockets p(path_);
  auto e = p.find(0x0A000002, 4791);  // 10.0.0.2: never seen here
  EXPECT_FALSE(e.local);
  EXPECT_FALSE(e.open);
}

TEST(PeerSockets, WithoutTheTableEveryPeerIsNotLocal) {
  PeerSockets p("/nonexistent/simnic/udp");
  EXPECT_FALSE(p.find(0x7F000001, 4791).local);
}

}  // namespace
}  // namespace simnic::io
