// Header codecs against bytes computed by hand from the IBA layouts.
#include <gtest/gtest.h>

#include <cstring>

#include "simnic/proto/headers.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/psn.h"
#include "simnic/proto/wire.h"

namespace simnic::proto {
namespace {

TEST(Wire, BigEndianLoadsAndStores) {
  uint8_t b[8];
  store_be64(b, 0x0102030405060708ull);
  EXPECT_EQ(b[0], 1);
  EXPECT_EQ(b[7], 8);
  EXPECT_EQ(load_be64(b), 0x0102030405060708ull);
  store_be24(b, 0xabcdef);
  EXPECT_EQ(b[0], 0xab);
  EXPECT_EQ(b[2], 0xef);
  EXPECT_EQ(load_be24(b), 0xabcdefu);
}

TEST(Bth, ExactBytes) {
  Bth h;
  h.opcode = kRcSendFirst;
  h.solicited = true;
  h.pad_count = 3;
  h.pkey = 0xffff;
  h.dest_qp = 0x000011;
  h.ack_req = true;
  h.psn = 0xfffffe;
  uint8_t b[12];
  encode_bth(h, b);
  const uint8_t want[12] = {0x00, 0xb0, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0xff, 0xff, 0xfe};
  EXPECT_EQ(std::memcmp(b, want, 12), 0);
  Bth d = decode_bth(b);
  EXPECT_TRUE(d.solicited);
  EXPECT_EQ(d.pad_count, 3);
  EXPECT_EQ(d.dest_qp, 0x11u);
  EXPECT_TRUE(d.ack_req);
  EXPECT_EQ(d.psn, 0xfffffeu);
}

TEST(Reth, ExactBytes) {
  uint8_t b[16];
  encode_reth({0x00007f0012345678ull, 0x00abcdef, 65536}, b);
  const uint8_t want[16] = {0, 0, 0x7f, 0, 0x12, 0x34, 0x56, 0x78, 0, 0xab, 0xcd, 0xef, 0, 1, 0, 0};
  EXPECT_EQ(std::memcmp(b, want, 16), 0);
  Reth r = decode_reth(b);
  EXPECT_EQ(r.va, 0x00007f0012345678ull);
  EXPECT_EQ(r.dma_len, 65536u);
}

TEST(Aeth, SyndromesAndBytes) {
  EXPECT_EQ(aeth_ack(0x1f), 0x1f);
  EXPECT_EQ(aeth_rnr_nak(14), 0x2e);
  EXPECT_EQ(aeth_nak(kNakRemoteAccessError), 0x62);
  EXPECT_EQ(aeth_class(0x62), kAethNak);
  EXPECT_EQ(aeth_value(0x62), kNakRemoteAccessError);
  EXPECT_EQ(aeth_class(0x2e), kAethRnrNak);
  uint8_t b[4];
  encode_aeth({0x60, 0x000102}, b);
  const uint8_t want[4] = {0x60, 0x00, 0x01, 0x02};
  EXPECT_EQ(std::memcmp(b, want, 4), 0);
}

TEST(AtomicEth, ExactBytes) {
  uint8_t b[28];
  encode_atomic_eth({0x1000, 0x42, 0x0a, 0x0b}, b);
  EXPECT_EQ(load_be64(b), 0x1000u);
  EXPECT_EQ(load_be32(b + 8), 0x42u);
  EXPECT_EQ(load_be64(b + 12), 0x0au);
  EXPECT_EQ(load_be64(b + 20), 0x0bu);
  AtomicEth a = decode_atomic_eth(b);
  EXPECT_EQ(a.compare, 0x0bu);
}

TEST(Deth, ExactBytes) {
  uint8_t b[8];
  encode_deth({0x80010000, 0x000abc}, b);
  const uint8_t want[8] = {0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x0a, 0xbc};
  EXPECT_EQ(std::memcmp(b, want, 8), 0);
}

TEST(OpcodeTable, LengthsAndFlags) {
  EXPECT_EQ(opcode_info(kRcSendOnly).header_len, 12);
  EXPECT_EQ(opcode_info(kRcWriteOnlyImm).header_len, 12 + 16 + 4);
  EXPECT_EQ(opcode_info(kRcReadResponseMiddle).header_len, 12);
  EXPECT_EQ(opcode_info(kRcReadResponseFirst).header_len, 16);
  EXPECT_EQ(opcode_info(kRcAtomicAcknowledge).header_len, 12 + 4 + 8);
  EXPECT_EQ(opcode_info(kRcCompareSwap).header_len, 12 + 28);
  EXPECT_EQ(opcode_info(kUdSendOnlyImm).header_len, 12 + 8 + 4);
  EXPECT_EQ(opcode_info(kRcSendLastInv).header_len, 16);
  EXPECT_STREQ(opcode_info(kRcSendFirst).name, "RC_SEND_FIRST");
  EXPECT_STREQ(opcode_info(kUcWriteOnly).name, "UC_RDMA_WRITE_ONLY");
  EXPECT_TRUE(opcode_info(kRcAcknowledge).mask & kIsResponse);
  EXPECT_TRUE(opcode_info(kRcReadRequest).mask & kIsRequest);
  EXPECT_FALSE(opcode_info(0x15).mask & kIsValid);
  EXPECT_FALSE(opcode_info(0xff).mask & kIsValid);
  EXPECT_EQ(header_offset(kRcWriteOnlyImm, kHasImm), 28u);
  // Every valid opcode: first/middle/last are consistent and request XOR response.
  for (int op = 0; op < 256; ++op) {
    uint32_t m = opcode_info(uint8_t(op)).mask;
    if (!(m & kIsValid)) continue;
    EXPECT_NE(bool(m & kIsRequest), bool(m & kIsResponse)) << op;
    EXPECT_FALSE((m & kIsMiddle) && (m & (kIsFirst | kIsLast))) << op;
  }
}

TEST(Psn, WrapsAt24Bits) {
  EXPECT_EQ(psn_add(0xffffff, 1), 0u);
  EXPECT_EQ(psn_add(0xfffffe, 5), 3u);
  EXPECT_EQ(psn_diff(2, 0xfffffe), 4);
  EXPECT_EQ(psn_diff(0xfffffe, 2), -4);
  EXPECT_TRUE(psn_before(0xffffff, 0));
  EXPECT_FALSE(psn_before(0, 0xffffff));
  EXPECT_EQ(psn_diff(0x800000, 0), -0x800000);
  EXPECT_EQ(psn_diff(0x7fffff, 0), 0x7fffff);
}

}  // namespace
}  // namespace simnic::proto
