#include "simnic/proto/packet.h"

#include <cstring>

#include "simnic/proto/header_layout.h"
#include "simnic/proto/icrc.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/wire.h"

namespace simnic::proto {

const char* parse_error_name(ParseError e) {
  switch (e) {
    case ParseError::kOk: return "ok";
    case ParseError::kTooShort: return "too short for its opcode";
    case ParseError::kBadOpcode: return "unknown opcode";
    case ParseError::kBadVersion: return "transport version is not 0";
    case ParseError::kBadPadding: return "pad count larger than the payload";
    case ParseError::kBadIcrc: return "bad ICRC";
    case ParseError::kBadLength: return "payload on an opcode that carries none";
  }
  return "?";
}

size_t packet_size(uint8_t opcode, size_t payload_len) {
  const OpcodeInfo& info = opcode_info(opcode);
  return info.header_len + ((payload_len + 3) & ~size_t(3)) + kIcrcBytes;
}

size_t build_packet(const PacketHeaders& h, std::span<const uint8_t> payload, const IpUdpInfo& ip,
                    std::span<uint8_t> out) {
  const OpcodeInfo& info = opcode_info(h.bth.opcode);
  if (!(info.mask & kIsValid)) return 0;
  if (!payload.empty() && !(info.mask & kHasPayload)) return 0;
  const size_t need = packet_size(h.bth.opcode, payload.size());
  if (out.size() < need) return 0;
  uint8_t* p = out.data();
  Bth bth = h.bth;
  bth.pad_count = uint8_t((4 - payload.size() % 4) % 4);
  bth.tver = 0;
  encode_bth(bth, p);
  size_t off = kBthBytes;
  for (const ExtHeader& x : kHeaderLayout) {
    if (!(info.mask & x.bit)) continue;
    x.encode(h, p + off);
    off += x.bytes;
  }
  if (!payload.empty()) std::memcpy(p + off, payload.data(), payload.size());
  off += payload.size();
  std::memset(p + off, 0, bth.pad_count);
  off += bth.pad_count;
  uint32_t crc = compute_icrc(ip, std::span<const uint8_t>(p, off));
  p[off] = uint8_t(crc);
  p[off + 1] = uint8_t(crc >> 8);
  p[off + 2] = uint8_t(crc >> 16);
  p[off + 3] = uint8_t(crc >> 24);
  return off + kIcrcBytes;
}

ParseError parse_packet(std::span<const uint8_t> b, const IpUdpInfo& ip, ParsedPacket& out) {
  if (b.size() < kBthBytes + kIcrcBytes) return ParseError::kTooShort;
  const uint8_t* p = b.data();
  const OpcodeInfo& info = opcode_info(p[0]);
  if (!(info.mask & kIsValid)) return ParseError::kBadOpcode;
  if (b.size() < size_t(info.header_len) + kIcrcBytes) return ParseError::kTooShort;
  const size_t end = b.size() - kIcrcBytes;
  uint32_t want = compute_icrc(ip, std::span<const uint8_t>(p, end));
  uint32_t got = uint32_t(p[end]) | uint32_t(p[end + 1]) << 8 | uint32_t(p[end + 2]) << 16 | uint32_t(p[end + 3]) << 24;
  IpIdent sent_with;
  if (want != got && !icrc_change_explained(end, want ^ got, &sent_with)) return ParseError::kBadIcrc;

  out = ParsedPacket{};
  out.mask = info.mask;
  PacketHeaders& h = out.h;
  h.bth = decode_bth(p);
  if (h.bth.tver != 0) return ParseError::kBadVersion;
  size_t off = kBthBytes;
  for (const ExtHeader& x : kHeaderLayout) {
    if (!(info.mask & x.bit)) continue;
    x.decode(p + off, h);
    off += x.bytes;
  }
  const size_t rest = end - off;
  if (h.bth.pad_count > rest) return ParseError::kBadPadding;
  if (rest && !(info.mask & kHasPayload)) return ParseError::kBadLength;
  out.payload = std::span<const uint8_t>(p + off, rest - h.bth.pad_count);
  return ParseError::kOk;
}

}  // namespace simnic::proto
