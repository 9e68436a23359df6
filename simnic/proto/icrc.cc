#include "simnic/proto/icrc.h"

#include <algorithm>
#include <cstring>
#include <zlib.h>

#include "simnic/proto/headers.h"

namespace simnic::proto {

uint32_t compute_icrc(const uint8_t ipv4_udp[kIpv4UdpBytes], std::span<const uint8_t> roce) {
  // 8 bytes of ones stand for the masked LRH a real IB packet would have (the RoCEv2 rule).
  uint8_t head[8 + kIpv4UdpBytes + kBthBytes];
  std::memset(head, 0xff, 8);
  uint8_t* ip = head + 8;
  std::memcpy(ip, ipv4_udp, kIpv4UdpBytes);
  ip[1] = 0xff;                    // TOS: DSCP and ECN may change in flight
  ip[8] = 0xff;                    // TTL
  ip[10] = ip[11] = 0xff;          // header checksum
  ip[26] = ip[27] = 0xff;          // UDP checksum
  uint8_t* bth = ip + kIpv4UdpBytes;
  size_t bth_len = std::min<size_t>(kBthBytes, roce.size());
  std::memcpy(bth, roce.data(), bth_len);
  if (bth_len > 4) bth[4] = 0xff;  // FECN, BECN and the reserved bits
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, head, uInt(8 + kIpv4UdpBytes + bth_len));
  if (roce.size() > bth_len) crc = crc32(crc, roce.data() + bth_len, uInt(roce.size() - bth_len));
  return uint32_t(crc);
}

uint32_t compute_icrc(const IpUdpInfo& ip, std::span<const uint8_t> roce) {
  uint8_t h[kIpv4UdpBytes];
  build_ipv4_udp(ip, roce.size() + kIcrcBytes, h);
  return compute_icrc(h, roce);
}

}  // namespace simnic::proto
