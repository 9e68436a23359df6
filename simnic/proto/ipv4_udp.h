// The outer headers of a RoCEv2 packet, as a NIC would put them on the wire. simnicd's UDP
// socket lets the kernel write the real ones; we build the same bytes for the ICRC and pcap.
#pragma once
#include <cstddef>
#include <cstdint>

namespace simnic::proto {

constexpr uint16_t kRoceV2Port = 4791;
constexpr size_t kIpv4UdpBytes = 28;

struct IpUdpInfo {
  uint32_t src_ip = 0;  // host order
  uint32_t dst_ip = 0;
  uint16_t src_port = kRoceV2Port;
  uint16_t dst_port = kRoceV2Port;
};

// IPv4 (version 4, IHL 5, TOS 0, id 0, DF, TTL 64, UDP, real checksum) + UDP (checksum 0).
void build_ipv4_udp(const IpUdpInfo& ip, size_t udp_payload_len, uint8_t out[kIpv4UdpBytes]);

}  // namespace simnic::proto
