// libFuzzer target: the RoCEv2 packet codec (simnic/proto/packet.h).
//
// The input is a UDP payload. It is parsed as it came, then again with its ICRC made valid
// (random bytes almost never carry a good one, and everything after the ICRC check would go
// untested). A packet that parses must survive a round trip: building it again from the
// parsed headers and payload, and parsing that, gives the same headers and payload.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "simnic/proto/icrc.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/packet.h"

namespace {

using namespace simnic::proto;

constexpr IpUdpInfo kIp{0x7f000001, 0x7f000002, 49152, kRoceV2Port};

void fail(const char* what) {
  std::fprintf(stderr, "packet round trip: %s differs\n", what);
  std::abort();
}

// Every field the parser decodes (the pad count is recomputed by build_packet).
void expect_same(const ParsedPacket& a, const ParsedPacket& b) {
  const Bth &x = a.h.bth, &y = b.h.bth;
  if (x.opcode != y.opcode || x.solicited != y.solicited || x.migreq != y.migreq || x.pkey != y.pkey ||
      x.fecn != y.fecn || x.becn != y.becn || x.dest_qp != y.dest_qp || x.ack_req != y.ack_req || x.psn != y.psn)
    fail("BTH");
  const uint32_t m = a.mask;
  if ((m & kHasReth) &&
      (a.h.reth.va != b.h.reth.va || a.h.reth.rkey != b.h.reth.rkey || a.h.reth.dma_len != b.h.reth.dma_len))
    fail("RETH");
  if ((m & kHasAeth) && (a.h.aeth.syndrome != b.h.aeth.syndrome || a.h.aeth.msn != b.h.aeth.msn)) fail("AETH");
  const AtomicEth &p = a.h.atomic, &q = b.h.atomic;  // field by field: the struct has padding
  if ((m & kHasAtomicEth) && (p.va != q.va || p.rkey != q.rkey || p.swap_add != q.swap_add || p.compare != q.compare))
    fail("AtomicETH");
  if ((m & kHasAtomicAckEth) && a.h.atomic_ack.orig != b.h.atomic_ack.orig) fail("AtomicAckETH");
  if ((m & kHasDeth) && (a.h.deth.qkey != b.h.deth.qkey || a.h.deth.src_qp != b.h.deth.src_qp)) fail("DETH");
  if ((m & kHasImm) && a.h.imm_be != b.h.imm_be) fail("ImmDt");
  if ((m & kHasIeth) && a.h.ieth_rkey != b.h.ieth_rkey) fail("IETH");
  if (a.payload.size() != b.payload.size() ||
      (!a.payload.empty() && std::memcmp(a.payload.data(), b.payload.data(), a.payload.size()) != 0))
    fail("payload");
}

void round_trip(const ParsedPacket& pkt) {
  std::vector<uint8_t> again(packet_size(pkt.h.bth.opcode, pkt.payload.size()));
  if (build_packet(pkt.h, pkt.payload, kIp, again) != again.size()) fail("built size");
  ParsedPacket back;
  if (parse_packet(again, kIp, back) != ParseError::kOk) fail("parse result");
  expect_same(pkt, back);
}

void parse_and_check(const std::vector<uint8_t>& bytes) {
  ParsedPacket pkt;
  ParseError e = parse_packet(bytes, kIp, pkt);
  (void)parse_error_name(e);
  if (e != ParseError::kOk) return;
  // The payload lies inside the datagram, before the ICRC.
  if (pkt.payload.data() < bytes.data() ||
      pkt.payload.data() + pkt.payload.size() + kIcrcBytes > bytes.data() + bytes.size())
    fail("payload bounds");
  round_trip(pkt);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);  // an exact-size copy: ASan sees any overread
  parse_and_check(bytes);
  if (size >= kIcrcBytes) {
    uint32_t crc = compute_icrc(kIp, std::span<const uint8_t>(bytes.data(), size - kIcrcBytes));
    for (int i = 0; i < 4; ++i) bytes[size - kIcrcBytes + i] = uint8_t(crc >> (8 * i));
    parse_and_check(bytes);
  }
  return 0;
}
