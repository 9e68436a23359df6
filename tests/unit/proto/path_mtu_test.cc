// The RoCE MTU of a port on an IPv4 link: the largest IB MTU whose packets are never fragmented.
#include <gtest/gtest.h>

#include "simnic/proto/ipv4_udp.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/packet.h"

namespace simnic::proto {
namespace {

TEST(PathMtu, EthernetLoopbackAndJumboLinks) {
  EXPECT_EQ(roce_mtu_for_link_mtu(1500), 1024u);   // Ethernet: as rxe and ConnectX report
  EXPECT_EQ(roce_mtu_for_link_mtu(65536), 4096u);  // loopback
  EXPECT_EQ(roce_mtu_for_link_mtu(9000), 4096u);   // jumbo frames
  EXPECT_EQ(roce_mtu_for_link_mtu(4200), 4096u);
  EXPECT_EQ(roce_mtu_for_link_mtu(4096), 2048u);  // a 4096-byte link cannot carry 4096 of payload
  EXPECT_EQ(roce_mtu_for_link_mtu(1280), 1024u);  // the IPv6 minimum, common on tunnels
  EXPECT_EQ(roce_mtu_for_link_mtu(576), 256u);    // the IPv4 minimum datagram: 512 + 68 does not fit
  EXPECT_EQ(roce_mtu_for_link_mtu(0), 0u);
}

TEST(PathMtu, BoundariesAreExact) {
  for (uint32_t mtu : {256u, 512u, 1024u, 2048u, 4096u}) {
    EXPECT_EQ(roce_mtu_for_link_mtu(mtu + kRoceV2MaxOverhead), mtu);
    EXPECT_EQ(roce_mtu_for_link_mtu(mtu + kRoceV2MaxOverhead - 1), mtu == 256 ? 0u : mtu / 2);
  }
}

// The overhead is an upper bound for every packet simnic builds: the largest datagram that
// carries a full MTU of payload, IPv4 and UDP headers included, fits in MTU + overhead.
TEST(PathMtu, EveryOpcodeWithAFullPayloadFitsTheOverhead) {
  for (int op = 0; op < 256; ++op) {
    if (!(opcode_info(uint8_t(op)).mask & kIsValid)) continue;
    const size_t payload = (opcode_info(uint8_t(op)).mask & kHasPayload) ? 4096 : 0;
    EXPECT_LE(kIpv4UdpBytes + packet_size(uint8_t(op), payload), 4096 + kRoceV2MaxOverhead)
        << opcode_info(uint8_t(op)).name;
  }
}

}  // namespace
}  // namespace simnic::proto
