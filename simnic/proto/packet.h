// Whole RoCEv2 packets (the UDP payload: BTH, extension headers, payload, pad, ICRC).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "simnic/proto/headers.h"
#include "simnic/proto/ipv4_udp.h"

namespace simnic::proto {

struct PacketHeaders {
  Bth bth;
  Reth reth;
  Aeth aeth;
  AtomicEth atomic;
  AtomicAckEth atomic_ack;
  Deth deth;
  uint32_t imm_be = 0;     // ImmDt as on the wire (network order), like ibv_send_wr.imm_data
  uint32_t ieth_rkey = 0;  // host order
  uint32_t xrc_srqn = 0;   // XRCETH: the XRC SRQ a request goes to at the responder (24 bits)
};

struct ParsedPacket {
  PacketHeaders h;
  uint32_t mask = 0;                 // opcode_info(h.bth.opcode).mask
  std::span<const uint8_t> payload;  // without pad and ICRC; points into the datagram
};

enum class ParseError { kOk, kTooShort, kBadOpcode, kBadVersion, kBadPadding, kBadIcrc, kBadLength };
const char* parse_error_name(ParseError e);

// Checks length, opcode, version, pad and ICRC (with the addresses the datagram came with).
ParseError parse_packet(std::span<const uint8_t> udp_payload, const IpUdpInfo& ip, ParsedPacket& out);

// The exact size build_packet needs.
size_t packet_size(uint8_t opcode, size_t payload_len);

// Writes the headers the opcode calls for, the payload, zero pad to 4 bytes and the ICRC.
// Returns the bytes written, 0 if `out` is too small or the opcode invalid.
size_t build_packet(const PacketHeaders& h, std::span<const uint8_t> payload, const IpUdpInfo& ip,
                    std::span<uint8_t> out);

}  // namespace simnic::proto
