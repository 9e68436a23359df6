// The RoCEv2 invariant CRC (IBA Annex A17.3.3): CRC-32 over the packet with the fields that
// routers may change masked to ones, so it survives the trip end to end.
#pragma once
#include <cstdint>
#include <span>

#include "simnic/proto/ipv4_udp.h"

namespace simnic::proto {

// `ipv4_udp`: the packet's 28 bytes of IPv4 + UDP headers; `roce`: BTH up to (not including)
// the ICRC. The result goes on the wire least-significant byte first.
uint32_t compute_icrc(const uint8_t ipv4_udp[kIpv4UdpBytes], std::span<const uint8_t> roce);
uint32_t compute_icrc(const IpUdpInfo& ip, std::span<const uint8_t> roce);

// The IPv4 Identification and Don't-Fragment bit a packet was sent with, as far as its ICRC
// tells. simnic sends Identification 0 with DF (the header build_ipv4_udp makes), but another
// sender's kernel picks its own Identification, and a UDP socket never shows it to the
// receiver. The ICRC covers those 17 bits and CRC-32 is affine in them, so they can be solved
// for: `got` verifies if some Identification/DF makes the ICRC match. The price: a corrupted
// packet now passes with probability 2^-15 instead of 2^-32.
struct IpIdent {
  uint16_t id = 0;
  bool df = true;
};
bool icrc_verifies_for_some_ident(const IpUdpInfo& ip, std::span<const uint8_t> roce, uint32_t got, IpIdent* sent_with);
// The same, for a receiver that already computed the ICRC with `ip`'s header: `change` is that
// ICRC XOR the one received, for `roce_len` covered bytes.
bool icrc_change_explained(size_t roce_len, uint32_t change, IpIdent* sent_with);

// What the ICRC of `roce_len` covered bytes (BTH to payload, no ICRC) changes by (XOR) when the
// IPv4 Identification goes from 0 to `id`, everything else equal: it depends on nothing else,
// the CRC being affine (a GSO sender renumbers its segments with it, simnic/io/udp_port.cc).
uint32_t icrc_ident_change(size_t roce_len, uint16_t id);

}  // namespace simnic::proto
