#include "simnic/proto/ipv4_udp.h"

#include "simnic/proto/wire.h"

namespace simnic::proto {

void build_ipv4_udp(const IpUdpInfo& ip, size_t udp_payload_len, uint8_t out[kIpv4UdpBytes]) {
  uint8_t* h = out;
  h[0] = 0x45;    // IPv4, 5 words
  h[1] = ip.tos;  // TOS (DSCP/ECN): the GRH traffic class
  store_be16(h + 2, uint16_t(kIpv4UdpBytes + udp_payload_len));
  store_be16(h + 4, ip.ip_id);  // identification
  store_be16(h + 6, 0x4000);    // don't fragment
  h[8] = 64;                    // TTL
  h[9] = 17;                    // UDP
  store_be16(h + 10, 0);
  store_be32(h + 12, ip.src_ip);
  store_be32(h + 16, ip.dst_ip);
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += load_be16(h + i);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  store_be16(h + 10, uint16_t(~sum));
  uint8_t* u = out + 20;
  store_be16(u, ip.src_port);
  store_be16(u + 2, ip.dst_port);
  store_be16(u + 4, uint16_t(8 + udp_payload_len));
  store_be16(u + 6, 0);  // RoCEv2 senders may leave the UDP checksum zero
}

uint32_t roce_mtu_for_link_mtu(uint32_t link_mtu) {
  for (uint32_t mtu = 4096; mtu >= 256; mtu /= 2)
    if (uint64_t(mtu) + kRoceV2MaxOverhead <= link_mtu) return mtu;
  return 0;
}

}  // namespace simnic::proto
