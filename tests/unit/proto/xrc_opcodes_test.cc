// XRC opcodes (IBA Annex A14, Table 38: transport bits 101) and the XRCETH: every XRC request
// carries the 4-byte XRCETH right after the BTH (before a RETH, AtomicETH or ImmDt), XRC
// responses carry none; build and parse agree with bytes laid out by hand.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "simnic/proto/opcode_table.h"
#include "simnic/proto/packet.h"
#include "simnic/proto/wire.h"

namespace simnic::proto {
namespace {

TEST(XrcOpcodes, MirrorRcAtA0WithAnXrcethOnEveryRequest) {
  for (int rc = 0; rc <= 0x17; ++rc) {
    const OpcodeInfo& r = opcode_info(uint8_t(rc));
    const OpcodeInfo& x = opcode_info(uint8_t(0xa0 | rc));
    ASSERT_EQ(bool(r.mask & kIsValid), bool(x.mask & kIsValid)) << rc;
    if (!(r.mask & kIsValid)) continue;
    EXPECT_TRUE(x.mask & kIsXrc);
    EXPECT_FALSE(x.mask & kIsRc);
    const bool request = r.mask & kIsRequest;
    EXPECT_EQ(bool(x.mask & kHasXrceth), request) << std::string(x.name);
    EXPECT_EQ(x.header_len, r.header_len + (request ? kXrcethBytes : 0)) << std::string(x.name);
  }
  EXPECT_STREQ(opcode_info(0xa4).name, "XRC_SEND_ONLY");
  EXPECT_STREQ(opcode_info(0xb1).name, "XRC_ACKNOWLEDGE");
  EXPECT_FALSE(opcode_info(0xb5).mask & kIsValid);  // as RC's 0x15: reserved
  EXPECT_FALSE(opcode_info(0xb8).mask & kIsValid);
  // XRCETH before RETH: a WRITE ONLY's RETH starts at 16.
  EXPECT_EQ(header_offset(0xaa, kHasXrceth), 12u);
  EXPECT_EQ(header_offset(0xaa, kHasReth), 16u);
  EXPECT_EQ(header_offset(0xb3, kHasAtomicEth), 16u);
}

TEST(XrcOpcodes, XrcethBytesOnTheWireAndBack) {
  PacketHeaders h{};
  h.bth.opcode = 0xab;  // XRC RDMA WRITE ONLY WITH IMMEDIATE: BTH XRCETH RETH ImmDt payload
  h.bth.dest_qp = 0x123456;
  h.bth.psn = 7;
  h.xrc_srqn = 0xfe654321;  // only 24 bits go out
  h.reth = {0x1122334455667788ull, 0xaabbccdd, 3};
  h.imm_be = 0x04030201;
  const std::vector<uint8_t> payload = {9, 8, 7};
  IpUdpInfo ip{0x7f000001, 0x7f000002, 4791, 4791};
  std::vector<uint8_t> out(packet_size(h.bth.opcode, payload.size()));
  ASSERT_EQ(build_packet(h, payload, ip, out), out.size());
  ASSERT_EQ(out.size(), 12u + 4 + 16 + 4 + 4 + 4);
  const uint8_t xrceth[4] = {0x00, 0x65, 0x43, 0x21};
  EXPECT_EQ(std::memcmp(&out[12], xrceth, 4), 0);
  EXPECT_EQ(load_be64(&out[16]), 0x1122334455667788ull);  // the RETH follows the XRCETH
  ParsedPacket p;
  ASSERT_EQ(parse_packet(out, ip, p), ParseError::kOk);
  EXPECT_EQ(p.h.xrc_srqn, 0x654321u);
  EXPECT_EQ(p.h.reth.rkey, 0xaabbccddu);
  EXPECT_EQ(p.h.imm_be, 0x04030201u);
  ASSERT_EQ(p.payload.size(), 3u);
  EXPECT_EQ(p.payload[0], 9);
}

}  // namespace
}  // namespace simnic::proto
