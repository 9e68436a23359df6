// GID tables as rxe, mlx5 and an InfiniBand port list them (see gid_table.h).
#include "simnic/core/port/gid_table.h"

#include <arpa/inet.h>

#include <cstring>

namespace simnic::core {

namespace {

struct KindName {
  GidTableKind kind;
  const char* name;
  uint32_t length;  // gid_tbl_len the device reports
};

// rxe: RXE_PORT_GID_TBL_LEN (rxe_param.h). ConnectX-4/5/6: roce_address_table_size, 256.
constexpr KindName kKinds[] = {
    {GidTableKind::kSimple, "simple", 1},
    {GidTableKind::kRxe, "rxe", 1024},
    {GidTableKind::kMlx5, "mlx5", 256},
};

// fe80::/64 and the modified EUI-64 of the MAC (RFC 4291 appendix A), as the kernel's
// make_default_gid() builds a RoCE port's default GID.
ibv_gid link_local_from_mac(const uint8_t mac[6]) {
  ibv_gid g{};
  g.raw[0] = 0xfe;
  g.raw[1] = 0x80;
  const uint8_t eui[8] = {uint8_t(mac[0] ^ 0x02), mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
  std::memcpy(g.raw + 8, eui, 8);
  return g;
}

ibv_gid link_local_from_guid(uint64_t guid_be) {
  ibv_gid g{};
  g.raw[0] = 0xfe;
  g.raw[1] = 0x80;
  std::memcpy(g.raw + 8, &guid_be, 8);
  return g;
}

}  // namespace

bool parse_gid_table_kind(std::string_view name, GidTableKind* out) {
  for (const KindName& k : kKinds)
    if (name == k.name) {
      *out = k.kind;
      return true;
    }
  return false;
}

const char* gid_table_kind_name(GidTableKind kind) {
  for (const KindName& k : kKinds)
    if (k.kind == kind) return k.name;
  return "?";
}

void simnic_mac(uint32_t ipv4, uint8_t mac[6]) {
  const uint8_t m[6] = {0x02, 0x53, uint8_t(ipv4 >> 24), uint8_t(ipv4 >> 16), uint8_t(ipv4 >> 8), uint8_t(ipv4)};
  std::memcpy(mac, m, 6);
}

ibv_gid ipv4_mapped_gid(uint32_t ipv4) {
  ibv_gid g{};
  g.raw[10] = g.raw[11] = 0xff;
  g.raw[12] = uint8_t(ipv4 >> 24);
  g.raw[13] = uint8_t(ipv4 >> 16);
  g.raw[14] = uint8_t(ipv4 >> 8);
  g.raw[15] = uint8_t(ipv4);
  return g;
}

namespace {
uint32_t ipv4_at(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }
}  // namespace

bool is_ipv4_mapped(const ibv_gid& gid, uint32_t* ipv4) {
  static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(gid.raw, kPrefix, 12) != 0) return false;
  if (ipv4) *ipv4 = ipv4_at(gid.raw + 12);
  return true;
}

bool is_simnic_ib_gid(const ibv_gid& gid, uint32_t* ipv4) {
  static const uint8_t kPrefix[11] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x53, 0x4e};
  if (std::memcmp(gid.raw, kPrefix, 11) != 0 || gid.raw[15] != 0x01) return false;
  if (ipv4) *ipv4 = ipv4_at(gid.raw + 11);
  return true;
}

std::string gid_string(const ibv_gid& gid) {
  char s[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid.raw, s, sizeof s);
  return s;
}

const char* gid_type_name(ibv_gid_type type) {
  switch (type) {
    case IBV_GID_TYPE_IB: return "IB";
    case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
  }
  return "?";
}

GidTable build_gid_table(GidTableKind kind, bool infiniband, uint32_t ipv4, uint64_t port_guid_be) {
  GidTable t;
  if (infiniband) {
    t.entries.push_back({link_local_from_guid(port_guid_be), IBV_GID_TYPE_IB});
    t.length = 1;
    return t;
  }
  for (const KindName& k : kKinds)
    if (k.kind == kind) t.length = k.length;
  uint8_t mac[6];
  simnic_mac(ipv4, mac);
  const ibv_gid local = link_local_from_mac(mac), mapped = ipv4_mapped_gid(ipv4);
  switch (kind) {
    case GidTableKind::kSimple: t.entries = {{mapped, IBV_GID_TYPE_ROCE_V2}}; break;
    case GidTableKind::kRxe:  // RoCE v2 only: the default GID, then the address
      t.entries = {{local, IBV_GID_TYPE_ROCE_V2}, {mapped, IBV_GID_TYPE_ROCE_V2}};
      break;
    case GidTableKind::kMlx5:  // v1 and v2 of the default GID, then of the address
      t.entries = {{local, IBV_GID_TYPE_ROCE_V1},
                   {local, IBV_GID_TYPE_ROCE_V2},
                   {mapped, IBV_GID_TYPE_ROCE_V1},
                   {mapped, IBV_GID_TYPE_ROCE_V2}};
      break;
  }
  return t;
}

std::string gid_entry_unusable(const GidEntry& e) {
  if (e.type == IBV_GID_TYPE_IB) return "";  // IB mode: the port's own GID
  if (e.type == IBV_GID_TYPE_ROCE_V1)
    return "a RoCE v1 GID (" + gid_string(e.gid) +
           "): RoCE v1 packets are Ethernet frames with no IP header, and simnic sends RoCE v2 (UDP/IPv4) only";
  if (!is_ipv4_mapped(e.gid))
    return "the IPv6 link-local GID " + gid_string(e.gid) +
           ": simnic's NICs have IPv4 addresses only, so no packet can be sent from it";
  return "";
}

int usable_gid_index(const GidTable& table) {
  for (size_t i = 0; i < table.entries.size(); ++i)
    if (gid_entry_unusable(table.entries[i]).empty()) return int(i);
  return -1;
}

}  // namespace simnic::core
