// ICRC against packets whose ICRC came from real hardware or a reference implementation
// (the vectors in scapy's test/contrib/roce.uts), then round trips of our own packets.
#include <gtest/gtest.h>

#include <zlib.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <algorithm>
#include <vector>

#include "simnic/proto/icrc.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/packet.h"

namespace simnic::proto {
namespace {

std::vector<uint8_t> hex(const char* s) {
  std::vector<uint8_t> out;
  auto nib = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  for (; *s; ++s) {
    if (*s == ' ' || *s == '\n') continue;
    out.push_back(uint8_t(nib(s[0]) << 4 | nib(s[1])));
    ++s;
  }
  return out;
}

// The ICRC as it sits on the wire: least-significant byte first.
uint32_t wire_icrc(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

// A CNP captured on a ConnectX-4 Lx, Ethernet header stripped: IPv4 (TOS 0xc2, TTL 64,
// Identification 0x718c, DF), UDP to 4791, BTH CNP, 16 bytes, ICRC.
std::vector<uint8_t> connectx_cnp() {
  return hex(
      "45c2 003c 718c 4000 4011 9161 0a00 1101 0a00 1201"
      "0000 12b7 0028 0000"
      "8100 ffff 4000 0118 0000 0000"
      "0000 0000 0000 0000 0000 0000 0000 0000"
      "82fd 002a");
}

TEST(Icrc, CnpCapturedOnConnectX4Lx) {
  auto frame = connectx_cnp();
  ASSERT_EQ(frame.size(), 60u);
  std::span<const uint8_t> roce(frame.data() + 28, frame.size() - 28 - 4);
  EXPECT_EQ(compute_icrc(frame.data(), roce), wire_icrc(frame.data() + frame.size() - 4));
  EXPECT_EQ(compute_icrc(frame.data(), roce), 0x2a00fd82u);
}

// The ICRC spelled out with zlib, byte for byte as the RoCEv2 annex (IBA A17.3.3) defines it:
// 8 bytes of ones, the IPv4 header with TOS, TTL and checksum masked, the UDP header with its
// checksum masked, the BTH with its FECN/BECN byte masked, then the rest of the packet.
uint32_t reference_icrc(const uint8_t* ipv4_udp, std::span<const uint8_t> roce) {
  std::vector<uint8_t> m(8 + 28 + roce.size(), 0xff);
  std::copy(ipv4_udp, ipv4_udp + 28, m.begin() + 8);
  std::copy(roce.begin(), roce.end(), m.begin() + 8 + 28);
  m[8 + 1] = m[8 + 8] = m[8 + 10] = m[8 + 11] = m[8 + 26] = m[8 + 27] = m[8 + 28 + 4] = 0xff;
  return uint32_t(crc32(0, m.data(), uInt(m.size())));
}

// Whichever CRC-32 implementation the build uses (ISA-L's folding one or zlib's table), every
// length gives zlib's value: the folding code has separate paths for short, aligned and tail
// bytes, so lengths around its block sizes are all tried.
TEST(Icrc, SameAsZlibForEveryLength) {
  std::vector<uint8_t> roce(9000);
  for (size_t i = 0; i < roce.size(); ++i) roce[i] = uint8_t(i * 131 + 7);
  uint8_t ipv4_udp[28];
  for (size_t len : {12u,  13u,  16u,  28u,  31u,   32u,   33u,   63u,   64u,   65u,   127u,  128u,
                     129u, 255u, 256u, 257u, 1024u, 1500u, 4095u, 4096u, 4097u, 4124u, 8999u, 9000u}) {
    build_ipv4_udp(IpUdpInfo{0x7f000001, 0x7f000002, 49152, 4791}, len + kIcrcBytes, ipv4_udp);
    std::span<const uint8_t> r(roce.data(), len);
    EXPECT_EQ(compute_icrc(ipv4_udp, r), reference_icrc(ipv4_udp, r)) << len;
  }
}

#if defined(__x86_64__)
// XINUSE, the vector state the CPU holds as in use (XGETBV with ECX = 1, Intel SDM vol. 1
// 13.6): bit 2 the upper halves of YMM0-15, bit 6 the upper halves of ZMM0-15. False in
// *known where the CPU cannot say.
uint64_t vector_state_in_use(bool* known) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  *known = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 27)) &&          // OSXSAVE
           __get_cpuid_count(0xd, 1, &a, &b, &c, &d) && (a & (1u << 2));  // XGETBV with ECX = 1
  if (!*known) return 0;
  uint32_t lo = 0, hi = 0;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
  return uint64_t(hi) << 32 | lo;
}

// ISA-L's AVX-512 CRC returns with the upper halves of the vector registers in use, and every
// SSE instruction simnicd runs after it then pays for them: a 64 KiB WRITE cost the sending NIC
// 20-24 us instead of 15 (docs/performance.md, "The vector state ISA-L left behind").
TEST(Icrc, LeavesTheUpperHalvesOfTheVectorRegistersClean) {
  std::vector<uint8_t> roce(4096, 0x5a);
  uint8_t ipv4_udp[28];
  build_ipv4_udp(IpUdpInfo{0x7f000001, 0x7f000002, 49152, 4791}, roce.size() + kIcrcBytes, ipv4_udp);
  (void)compute_icrc(ipv4_udp, roce);
  bool known = false;
  const uint64_t in_use = vector_state_in_use(&known);
  if (!known) GTEST_SKIP() << "this CPU does not report which vector state is in use (XGETBV 1)";
  EXPECT_EQ(in_use & (1u << 2 | 1u << 6), 0u) << "XINUSE " << std::hex << in_use;
}
#endif

// scapy's roce.uts also carries a UC_SEND_ONLY "regression" value; it is not a capture from
// hardware and does not match the ConnectX algorithm above, so it is not used here.

TEST(Icrc, MaskedFieldsDoNotChangeIt) {
  auto frame =
      hex("45c2 003c 718c 4000 4011 9161 0a00 1101 0a00 1201"
          "0000 12b7 0028 0000"
          "8100 ffff 4000 0118 0000 0000"
          "0000 0000 0000 0000 0000 0000 0000 0000");
  std::span<const uint8_t> roce(frame.data() + 28, frame.size() - 28);
  uint32_t base = compute_icrc(frame.data(), roce);
  auto f = frame;
  f[1] = 0x00, f[8] = 0x01, f[10] = f[11] = 0x12, f[26] = f[27] = 0x34, f[28 + 4] = 0x80;  // TOS TTL csums FECN
  EXPECT_EQ(compute_icrc(f.data(), std::span<const uint8_t>(f.data() + 28, roce.size())), base);
  f = frame;
  f[16] ^= 1;  // the source address is covered
  EXPECT_NE(compute_icrc(f.data(), std::span<const uint8_t>(f.data() + 28, roce.size())), base);
}

const IpUdpInfo kIp{0x7f000001, 0x7f000002, 4791, 4791};

TEST(Packet, BuildThenParseEveryValidOpcode) {
  std::vector<uint8_t> payload(37);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = uint8_t(i * 13 + 1);
  int valid = 0;
  for (int op = 0; op < 256; ++op) {
    const OpcodeInfo& info = opcode_info(uint8_t(op));
    if (!(info.mask & kIsValid)) continue;
    ++valid;
    PacketHeaders h;
    h.bth.opcode = uint8_t(op);
    h.bth.dest_qp = 0x123456;
    h.bth.psn = 0xabcdef;
    h.bth.ack_req = true;
    h.bth.solicited = true;
    h.reth = {0x1122334455667788ull, 0xdeadbeef, 4096};
    h.aeth = {aeth_nak(kNakRemoteAccessError), 0x010203};
    h.atomic = {0x0102030405060708ull, 0x99, 5, 6};
    h.atomic_ack = {0xfedcba9876543210ull};
    h.deth = {0x11111111, 0x222222};
    h.imm_be = 0x0d0c0b0a;
    h.ieth_rkey = 0xabcd1234;
    h.xrc_srqn = 0x5a5a5a;
    std::span<const uint8_t> pl = (info.mask & kHasPayload) ? std::span<const uint8_t>(payload)
                                                            : std::span<const uint8_t>();
    std::vector<uint8_t> buf(packet_size(uint8_t(op), pl.size()));
    ASSERT_EQ(build_packet(h, pl, kIp, buf), buf.size()) << info.name;
    ASSERT_EQ(buf.size() % 4, 0u) << info.name;
    ParsedPacket p;
    ASSERT_EQ(parse_packet(buf, kIp, p), ParseError::kOk) << info.name;
    EXPECT_EQ(p.h.bth.opcode, op);
    EXPECT_EQ(p.h.bth.dest_qp, 0x123456u);
    EXPECT_EQ(p.h.bth.psn, 0xabcdefu);
    EXPECT_TRUE(p.h.bth.ack_req);
    EXPECT_EQ(std::vector<uint8_t>(p.payload.begin(), p.payload.end()), std::vector<uint8_t>(pl.begin(), pl.end()))
        << info.name;
    if (info.mask & kHasReth) {
      EXPECT_EQ(p.h.reth.va, 0x1122334455667788ull) << info.name;
    }
    if (info.mask & kHasAeth) {
      EXPECT_EQ(p.h.aeth.msn, 0x010203u) << info.name;
    }
    if (info.mask & kHasAtomicEth) {
      EXPECT_EQ(p.h.atomic.compare, 6u) << info.name;
    }
    if (info.mask & kHasAtomicAckEth) {
      EXPECT_EQ(p.h.atomic_ack.orig, 0xfedcba9876543210ull) << info.name;
    }
    if (info.mask & kHasDeth) {
      EXPECT_EQ(p.h.deth.src_qp, 0x222222u) << info.name;
    }
    if (info.mask & kHasImm) {
      EXPECT_EQ(p.h.imm_be, 0x0d0c0b0au) << info.name;
    }
    if (info.mask & kHasIeth) {
      EXPECT_EQ(p.h.ieth_rkey, 0xabcd1234u) << info.name;
    }
    if (info.mask & kHasXrceth) {
      EXPECT_EQ(p.h.xrc_srqn, 0x5a5a5au) << info.name;
    }
    // Every header has its length: the table's header_len is what was written.
    EXPECT_EQ(buf.size(), info.header_len + ((pl.size() + 3) & ~size_t(3)) + 4) << info.name;
  }
  EXPECT_EQ(valid,
            12 + 12 + 12 + 2 + 24);  // RC-only (with ATOMIC WRITE), RC send/write, UC send/write, UD, XRC (RC's twins)
}

TEST(Packet, AnyFlippedBitFailsTheIcrc) {
  std::vector<uint8_t> payload(64, 0x5a);
  PacketHeaders h;
  h.bth.opcode = kRcWriteOnly;
  h.reth = {0x1000, 7, 64};
  std::vector<uint8_t> buf(packet_size(kRcWriteOnly, payload.size()));
  ASSERT_GT(build_packet(h, payload, kIp, buf), 0u);
  ParsedPacket p;
  for (size_t i = 0; i < buf.size(); ++i) {
    if (i == 4) continue;  // byte 4 of the BTH (FECN/BECN/reserved) is masked by design
    auto bad = buf;
    bad[i] ^= 0x01;
    ParseError e = parse_packet(bad, kIp, p);
    EXPECT_TRUE(e == ParseError::kBadIcrc || e == ParseError::kBadOpcode) << "byte " << i;
  }
  // Right bytes, wrong addresses: the ICRC covers the IP header too.
  EXPECT_EQ(parse_packet(buf, IpUdpInfo{0x7f000003, 0x7f000002, 4791, 4791}, p), ParseError::kBadIcrc);
}

// The CNP above was sent with Identification 0x718c: solving the ICRC for it finds exactly that.
TEST(Icrc, TheIdentificationOfAConnectXCaptureIsRecovered) {
  auto frame = connectx_cnp();
  std::span<const uint8_t> roce(frame.data() + 28, frame.size() - 28 - 4);
  IpIdent sent;
  ASSERT_TRUE(icrc_verifies_for_some_ident(IpUdpInfo{0x0a001101, 0x0a001201, 0, 4791}, roce,
                                           wire_icrc(frame.data() + frame.size() - 4), &sent));
  EXPECT_EQ(sent.id, 0x718c);
  EXPECT_TRUE(sent.df);
}

// Another sender's kernel chose the Identification (and maybe no DF): the packet is accepted,
// and a flipped payload bit is still caught.
TEST(Packet, APacketSentWithAnotherIdentificationIsAccepted) {
  std::vector<uint8_t> payload(200, 0x3c);
  PacketHeaders h;
  h.bth.opcode = kRcSendOnly;
  std::vector<uint8_t> buf(packet_size(kRcSendOnly, payload.size()));
  ASSERT_GT(build_packet(h, payload, kIp, buf), 0u);
  const size_t end = buf.size() - 4;
  for (auto [id, df] : {std::pair{uint16_t(0xbeef), true}, std::pair{uint16_t(0x1234), false}}) {
    uint8_t ip_hdr[kIpv4UdpBytes];
    build_ipv4_udp(kIp, buf.size(), ip_hdr);
    ip_hdr[4] = uint8_t(id >> 8), ip_hdr[5] = uint8_t(id);
    if (!df) ip_hdr[6] = 0;
    uint32_t crc = compute_icrc(ip_hdr, std::span<const uint8_t>(buf.data(), end));
    auto sent = buf;
    for (int i = 0; i < 4; ++i) sent[end + i] = uint8_t(crc >> (8 * i));
    ParsedPacket p;
    EXPECT_EQ(parse_packet(sent, kIp, p), ParseError::kOk) << id;
    IpIdent got;
    ASSERT_TRUE(icrc_verifies_for_some_ident(kIp, std::span<const uint8_t>(sent.data(), end), crc, &got));
    EXPECT_EQ(got.id, id);
    EXPECT_EQ(got.df, df);
    sent[100] ^= 0x10;
    EXPECT_EQ(parse_packet(sent, kIp, p), ParseError::kBadIcrc) << id;
  }
}

// The per-length table of how each Identification bit moves the ICRC is cached (a few
// lengths): lengths that take turns, more of them than the cache holds, all still solve.
TEST(Icrc, IdentificationsAreRecoveredAcrossLengthsThatTakeTurns) {
  const size_t lengths[] = {20, 200, 1000, 4096, 60, 300};
  for (int round = 0; round < 3; ++round) {
    for (size_t n : lengths) {
      std::vector<uint8_t> payload(n, uint8_t(n + round));
      PacketHeaders h;
      h.bth.opcode = kRcSendOnly;
      std::vector<uint8_t> buf(packet_size(kRcSendOnly, payload.size()));
      ASSERT_GT(build_packet(h, payload, kIp, buf), 0u);
      const size_t end = buf.size() - 4;
      const uint16_t id = uint16_t(0x1000 * round + n);
      uint8_t ip_hdr[kIpv4UdpBytes];
      build_ipv4_udp(kIp, buf.size(), ip_hdr);
      ip_hdr[4] = uint8_t(id >> 8), ip_hdr[5] = uint8_t(id);
      const uint32_t crc = compute_icrc(ip_hdr, std::span<const uint8_t>(buf.data(), end));
      IpIdent got;
      ASSERT_TRUE(icrc_verifies_for_some_ident(kIp, std::span<const uint8_t>(buf.data(), end), crc, &got)) << n;
      EXPECT_EQ(got.id, id) << n;
      EXPECT_TRUE(got.df) << n;
    }
  }
}

// A GSO sender's shortcut: the ICRC's change from Identification 0 to k, from the length alone,
// equals recomputing the ICRC with the other header.
TEST(Icrc, TheChangeForAnIdentificationDependsOnlyOnTheLength) {
  for (size_t n : {size_t(12), size_t(40), size_t(1036), size_t(4108)}) {
    std::vector<uint8_t> roce(n);
    for (size_t i = 0; i < n; ++i) roce[i] = uint8_t(i * 13 + n);
    for (uint16_t id : {uint16_t(1), uint16_t(2), uint16_t(63), uint16_t(0xbeef)}) {
      uint8_t with_id[kIpv4UdpBytes], with_zero[kIpv4UdpBytes];
      build_ipv4_udp(kIp, n + kIcrcBytes, with_zero);
      build_ipv4_udp(kIp, n + kIcrcBytes, with_id);
      with_id[4] = uint8_t(id >> 8), with_id[5] = uint8_t(id);
      EXPECT_EQ(icrc_ident_change(n, id), compute_icrc(with_id, roce) ^ compute_icrc(with_zero, roce))
          << n << " " << id;
    }
  }
}

TEST(Packet, ShortAndMalformedPacketsAreRejected) {
  PacketHeaders h;
  h.bth.opcode = kRcSendOnly;
  std::vector<uint8_t> payload(10, 1);
  std::vector<uint8_t> buf(packet_size(kRcSendOnly, payload.size()));
  ASSERT_GT(build_packet(h, payload, kIp, buf), 0u);
  ParsedPacket p;
  for (size_t n = 0; n < 16; ++n)
    EXPECT_EQ(parse_packet(std::span<const uint8_t>(buf.data(), n), kIp, p), ParseError::kTooShort) << n;
  auto bad = buf;
  bad[0] = 0x7f;  // no such opcode
  EXPECT_EQ(parse_packet(bad, kIp, p), ParseError::kBadOpcode);
  // A payload where the opcode has none (an ACK carrying bytes).
  PacketHeaders ack;
  ack.bth.opcode = kRcAcknowledge;
  EXPECT_EQ(build_packet(ack, payload, kIp, buf), 0u) << "build refuses a payload on an ACK";
}

TEST(Packet, PadMakesPayloadAMultipleOfFour) {
  for (size_t n : {0u, 1u, 2u, 3u, 4u, 1023u, 1024u}) {
    std::vector<uint8_t> payload(n, 7);
    PacketHeaders h;
    h.bth.opcode = kRcSendOnly;
    std::vector<uint8_t> buf(packet_size(kRcSendOnly, n));
    ASSERT_EQ(build_packet(h, payload, kIp, buf), buf.size());
    EXPECT_EQ((buf[1] >> 4) & 3, (4 - n % 4) % 4) << n;
    ParsedPacket p;
    ASSERT_EQ(parse_packet(buf, kIp, p), ParseError::kOk);
    EXPECT_EQ(p.payload.size(), n);
  }
}

}  // namespace
}  // namespace simnic::proto
