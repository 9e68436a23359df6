// The port's GID table, listed the way a real NIC lists it, and what simnic can send from.
//
// A RoCE port's table is filled by the kernel (drivers/infiniband/core/cache.c and
// roce_gid_mgmt.c): first one "default" GID per RoCE version the device supports, the IPv6
// link-local address made from the netdev's MAC (fe80::EUI-64), then, for every IP address of
// the netdev, one entry per supported version. Versions come in the order of the kernel's
// enum ib_gid_type (RoCE v1, then v2). So for an interface with one IPv4 address:
//   rxe  (RoCE v2 only):   0 fe80:: v2, 1 ::ffff:a.b.c.d v2                  (gid_tbl_len 1024)
//   mlx5 (RoCE v1 and v2): 0 fe80:: v1, 1 fe80:: v2, 2 ::ffff:a.b.c.d v1,
//                          3 ::ffff:a.b.c.d v2                               (gid_tbl_len 256)
// "simple", simnic's own, has the one entry it can use: 0 ::ffff:a.b.c.d v2.
// An InfiniBand port has one GID: the subnet prefix fe80::/64 and the port GUID (IBA 4.1.1).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <infiniband/verbs.h>

namespace simnic::core {

enum class GidTableKind : uint8_t { kSimple, kRxe, kMlx5 };

struct GidEntry {
  ibv_gid gid{};
  ibv_gid_type type = IBV_GID_TYPE_ROCE_V2;  // verbs.h: IB, ROCE_V1, ROCE_V2
};

struct GidTable {
  std::vector<GidEntry> entries;  // entry i is GID index i
  uint32_t length = 1;            // gid_tbl_len; indexes in [entries.size(), length) are empty
};

// "simple", "rxe", "mlx5".
bool parse_gid_table_kind(std::string_view name, GidTableKind* out);
const char* gid_table_kind_name(GidTableKind kind);

// The table of a port with IPv4 address `ipv4` (host order). `infiniband`: the IB link layer,
// whose one GID is fe80::<port_guid> (port_guid in network byte order) whatever `kind` says.
GidTable build_gid_table(GidTableKind kind, bool infiniband, uint32_t ipv4, uint64_t port_guid_be);

// The MAC address simnic gives the (simulated) netdev of the NIC at `ipv4`: 02:53 and the four
// address bytes (locally administered, unique per address). rxe and mlx5 derive their fe80::
// GIDs from the netdev's MAC, so simnic's tables do too.
void simnic_mac(uint32_t ipv4, uint8_t mac[6]);

ibv_gid ipv4_mapped_gid(uint32_t ipv4);
bool is_ipv4_mapped(const ibv_gid& gid, uint32_t* ipv4 = nullptr);
// A GID of simnic's IB mode, fe80::02:53:4e:<IPv4>:01 (the port GUID carries the address).
bool is_simnic_ib_gid(const ibv_gid& gid, uint32_t* ipv4 = nullptr);
std::string gid_string(const ibv_gid& gid);    // as inet_ntop prints an IPv6 address
const char* gid_type_name(ibv_gid_type type);  // "RoCE v2", "RoCE v1", "IB"

// Why simnic cannot send packets from `e`, or "" when it can: its packets are RoCE v2 over
// IPv4, so neither a RoCE v1 GID (an Ethernet frame with no IP header) nor an IPv6 one (there
// is no IPv6 address to send from) can be carried.
std::string gid_entry_unusable(const GidEntry& e);

// The index a program should use instead: the first entry simnic can carry, or -1.
int usable_gid_index(const GidTable& table);

}  // namespace simnic::core
