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

}  // namespace simnic::proto
