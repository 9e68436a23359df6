// The header layout (header_layout.h) drives build_packet, parse_packet and header_offset: for
// every valid opcode, each header it carries lands at header_offset, the headers add up to
// the opcode's header_len, and whatever build wrote parse reads back.
#include <gtest/gtest.h>

#include <vector>

#include "simnic/proto/header_layout.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/packet.h"

namespace simnic::proto {
namespace {

PacketHeaders every_field_set(uint8_t opcode) {
  PacketHeaders h{};
  h.bth.opcode = opcode;
  h.bth.dest_qp = 0x123456;
  h.bth.psn = 0xabcdef;
  h.reth = {0x1122334455667788ull, 0x99aabbcc, 4096};
  h.aeth = {0x61, 0x00fedc};
  h.atomic = {0x0102030405060708ull, 0x0a0b0c0d, 0x1111222233334444ull, 0x5555666677778888ull};
  h.atomic_ack = {0x0f0e0d0c0b0a0908ull};
  h.deth = {0x80010000, 0x00beef};
  h.imm_be = 0xdeadbeef;
  h.ieth_rkey = 0xcafef00d;
  h.xrc_srqn = 0x00c0de;
  return h;
}

TEST(HeaderLayout, EveryOpcodeBuildsAndParsesItsHeadersAtTheirOffsets) {
  const IpUdpInfo ip{0x7f000001, 0x7f000002, 4791, 4791};
  int valid = 0;
  for (int op = 0; op < 256; ++op) {
    const OpcodeInfo& info = opcode_info(uint8_t(op));
    if (!(info.mask & kIsValid)) continue;
    ++valid;
    uint32_t len = kBthBytes;
    for (const ExtHeader& x : kHeaderLayout) {
      if (!(info.mask & x.bit)) continue;
      EXPECT_EQ(header_offset(uint8_t(op), x.bit), len) << info.name;
      len += x.bytes;
    }
    EXPECT_EQ(info.header_len, len) << info.name;

    const PacketHeaders h = every_field_set(uint8_t(op));
    std::vector<uint8_t> payload((info.mask & kHasPayload) ? 7 : 0, 0x5a);
    std::vector<uint8_t> buf(packet_size(uint8_t(op), payload.size()));
    ASSERT_EQ(build_packet(h, payload, ip, buf), buf.size()) << info.name;
    ParsedPacket p;
    ASSERT_EQ(parse_packet(buf, ip, p), ParseError::kOk) << info.name;
    EXPECT_EQ(p.h.bth.psn, h.bth.psn);
    EXPECT_EQ(p.payload.size(), payload.size()) << info.name;
    if (info.mask & kHasReth) {
      EXPECT_EQ(p.h.reth.va, h.reth.va) << info.name;
    }
    if (info.mask & kHasAeth) {
      EXPECT_EQ(p.h.aeth.msn, h.aeth.msn) << info.name;
    }
    if (info.mask & kHasAtomicEth) {
      EXPECT_EQ(p.h.atomic.compare, h.atomic.compare) << info.name;
    }
    if (info.mask & kHasAtomicAckEth) {
      EXPECT_EQ(p.h.atomic_ack.orig, h.atomic_ack.orig) << info.name;
    }
    if (info.mask & kHasDeth) {
      EXPECT_EQ(p.h.deth.src_qp, h.deth.src_qp) << info.name;
    }
    if (info.mask & kHasImm) {
      EXPECT_EQ(p.h.imm_be, h.imm_be) << info.name;
    }
    if (info.mask & kHasIeth) {
      EXPECT_EQ(p.h.ieth_rkey, h.ieth_rkey) << info.name;
    }
    if (info.mask & kHasXrceth) {
      EXPECT_EQ(p.h.xrc_srqn, h.xrc_srqn) << info.name;
    }
  }
  EXPECT_EQ(valid, 2 * 24 + 12 + 2);  // RC and XRC 24 each (with RDMA ATOMIC WRITE), UC 12, UD 2
}

}  // namespace
}  // namespace simnic::proto
