// capture_watch: a running packet socket on lo (or on every interface) is a capture, so the
// automatic GSO of UdpPort goes back to one datagram per packet.
#include "simnic/io/capture_watch.h"

#include <gtest/gtest.h>

namespace simnic::io {
namespace {

const char kHeader[] = "sk               RefCnt Type Proto  Iface R Rmem   User   Inode\n";

TEST(CaptureWatch, NoPacketSocketIsNoCapture) {
  EXPECT_FALSE(packet_sockets_watch(kHeader, 1));
  EXPECT_FALSE(packet_sockets_watch("", 1));
}

TEST(CaptureWatch, ASocketOnTheInterfaceOrOnAllOfThemIsACapture) {
  // tcpdump -i lo, then tcpdump -i any.
  EXPECT_TRUE(
      packet_sockets_watch(std::string(kHeader) + "ffff8f2a41c0d800 3      3    0003   1     1 0      0      52311\n",
                           1));
  EXPECT_TRUE(
      packet_sockets_watch(std::string(kHeader) + "ffff8f2a41c0d800 3      3    0003   0     1 0      0      52311\n",
                           1));
}

TEST(CaptureWatch, OtherInterfacesAndStoppedSocketsAreNot) {
  // A DHCP client's socket on eth0 (index 2), and a capture socket not running.
  const std::string text = std::string(kHeader) + "ffff8f2a41c0d800 3      2    0800   2     1 0      0      1111\n" +
                           "ffff8f2a41c0dc00 2      3    0003   1     0 0      0      2222\n";
  EXPECT_FALSE(packet_sockets_watch(text, 1));
  EXPECT_TRUE(packet_sockets_watch(text, 2));
}

TEST(CaptureWatch, MalformedLinesAreSkipped) {
  EXPECT_FALSE(packet_sockets_watch(std::string(kHeader) + "garbage\n\n1 2\n", 1));
}

}  // namespace
}  // namespace simnic::io
