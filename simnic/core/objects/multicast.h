// Multicast addresses as the NIC sees them: which GIDs name a group, and the IPv4 group a
// RoCEv2 packet to that GID is sent to.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <string>

#include <infiniband/verbs.h>

#include "simnic/core/port/gid_table.h"  // gid_string

namespace simnic::core {

// The destination QP of every multicast packet (IBA 9.2 BTH DestQP, IBA 10.5): the packet goes
// to every QP attached to the group its destination address names.
constexpr uint32_t kMulticastQpn = 0xffffff;

using GidBytes = std::array<uint8_t, 16>;

inline GidBytes gid_bytes(const ibv_gid& g) {
  GidBytes b;
  std::memcpy(b.data(), g.raw, 16);
  return b;
}

// ::ffff:a.b.c.d, the form a RoCEv2 GID of an IPv4 address takes.
inline bool is_v4_mapped(const ibv_gid& g) {
  static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, kPrefix, 12) == 0;
}

inline bool is_multicast_ipv4(uint32_t ip) { return (ip >> 28) == 0xe; }  // 224.0.0.0/4

// A multicast GID as the kernel's rdma_is_multicast_addr() decides it: an IPv4-mapped address
// in 224.0.0.0/4, or an IPv6 (IB) multicast address, ff00::/8.
inline bool is_multicast_gid(const ibv_gid& g) {
  if (is_v4_mapped(g)) return (g.raw[12] >> 4) == 0xe;
  return g.raw[0] == 0xff;
}

// The IPv4 group a multicast GID's datagrams travel to. An IPv4-mapped GID carries it; an
// ff00::/8 GID has no IPv4 form, and simnic's wire is IPv4, so its low 24 bits go into the
// administratively scoped 239.0.0.0/8 (as IPv6 maps a group to an Ethernet address by its low
// 32 bits: two GIDs equal in those bits share one IP group, and each NIC delivers a datagram of
// that IP group to the QPs attached to either).
inline uint32_t group_ipv4(const ibv_gid& g) {
  if (is_v4_mapped(g))
    return uint32_t(g.raw[12]) << 24 | uint32_t(g.raw[13]) << 16 | uint32_t(g.raw[14]) << 8 | g.raw[15];
  return 239u << 24 | uint32_t(g.raw[13]) << 16 | uint32_t(g.raw[14]) << 8 | g.raw[15];
}

}  // namespace simnic::core
