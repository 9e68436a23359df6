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
  // The IPv4 Identification, which the ICRC covers: 0 for simnic's datagrams (DF on an
  // unconnected socket), j for the j-th segment of a UDP GSO send (the kernel numbers the
  // segments of one send up from the first one's, as inet_gso_segment does).
  uint16_t ip_id = 0;
  // The TOS byte (DSCP and ECN): RoCEv2 carries the GRH's traffic class in it (IBA Annex A17,
  // as rxe's prepare_ipv4_hdr does with the AH's traffic_class). The ICRC masks it.
  uint8_t tos = 0;
};

// IPv4 (version 4, IHL 5, TOS ip.tos, id ip.ip_id, DF, TTL 64, UDP, real checksum) + UDP (checksum 0).
void build_ipv4_udp(const IpUdpInfo& ip, size_t udp_payload_len, uint8_t out[kIpv4UdpBytes]);

// The bytes a RoCEv2 packet adds around an MTU-sized payload, at most: IPv4 20 + UDP 8 + BTH 12,
// the largest extension headers sent with a payload (XRCETH 4 + RETH 16 + ImmDt 4, a first or
// only RDMA WRITE with immediate on an XRC QP), and the ICRC 4.
constexpr uint32_t kRoceV2MaxOverhead = 68;

// The path MTU a RoCE port has on an IPv4 link of `link_mtu` bytes: the largest IB MTU
// (256, 512, 1024, 2048, 4096) whose packets fit in one datagram of link_mtu bytes, so no packet
// is ever fragmented (a 1500-byte Ethernet link gives 1024, as on rxe and ConnectX ports;
// loopback's 65536 gives 4096). 0 when not even 256 fits.
uint32_t roce_mtu_for_link_mtu(uint32_t link_mtu);

}  // namespace simnic::proto
