// Addresses: the port's GID table and where an address vector leads.
//
// RoCE (the default): a packet's destination is its GRH, so an address vector must have one
// (is_global, as rxe and the kernel's rdma_check_ah_attr require), its sgid_index must name a
// GID simnic can send from (RoCE v2 over IPv4), and its dgid must be an IPv4-mapped address.
// InfiniBand mode: an address vector without a GRH names its peer by DLID, which the
// simulated subnet's LID registry turns into the peer NIC's address; one with a GRH names
// it by GID. The packets are RoCEv2 either way (docs/link-layer.md).
#include <cerrno>

#include "simnic/core/device.h"
#include "simnic/core/text.h"

namespace simnic::core {

namespace {
constexpr uint32_t kMaxUnicastLid = 0xbfff;  // IBA 4.1.3: 0 reserved, 0xc000.. multicast, 0xffff permissive
}  // namespace

const GidTable& Addressing::gid_table() const { return gids_; }

int Addressing::query_gid(uint32_t index, GidEntry* out) const {
  if (index >= gids_.length) return EINVAL;
  if (index >= gids_.entries.size()) return ENODATA;  // an empty slot, as rdma-core reports it
  *out = gids_.entries[index];
  return 0;
}

namespace {

// "index 0: ::ffff:127.0.0.1, RoCE v2; index 1: ..." (the first four; long tables are listed by
// `ibv_devinfo -v`).
std::string listed_entries(const GidTable& t) {
  std::string out;
  for (size_t i = 0; i < t.entries.size() && i < 4; ++i)
    out += std::string(i ? "; " : "") + "index " + std::to_string(i) + ": " + gid_string(t.entries[i].gid) + ", " +
           gid_type_name(t.entries[i].type);
  if (t.entries.size() > 4) out += "; ...";
  return out;
}

// Where a program that insists on GID index `index` finds it usable: the other tables simnic
// lists, with the index of their RoCE v2 IPv4 GID.
std::string tables_to_try(uint32_t index, uint32_t ipv4, GidTableKind current) {
  std::string exact, all;
  for (GidTableKind k : {GidTableKind::kSimple, GidTableKind::kRxe, GidTableKind::kMlx5}) {
    if (k == current) continue;
    const int usable = usable_gid_index(build_gid_table(k, false, ipv4, 0));
    all += std::string(all.empty() ? "" : ", ") + "--gid-table " + gid_table_kind_name(k) + " has it at index " +
           std::to_string(usable);
    if (usable == int(index)) exact = gid_table_kind_name(k);
  }
  if (!exact.empty())
    return "`simnic up --gid-table " + exact + "` lists " + exact + "'s table, whose RoCE v2 GID is index " +
           std::to_string(index);
  return "the RoCE v2 GID is index " + std::to_string(usable_gid_index(build_gid_table(current, false, ipv4, 0))) +
         " here (" + all + ")";
}

}  // namespace

std::string Addressing::gid_index_refusal(uint32_t index) const {
  const size_t n = gids_.entries.size();
  std::string why = "GID index " + std::to_string(index) + " is past the table (gid_tbl_len " +
                    std::to_string(gids_.length) + "), which has " + std::to_string(n) +
                    (n == 1 ? " entry (" : " entries (") + listed_entries(gids_) + ")";
  const int usable = usable_gid_index(gids_);
  if (usable >= 0)
    why += "; use index " + std::to_string(usable) + " (ibv_rc_pingpong -g " + std::to_string(usable) + ")";
  if (!dev_.config_.infiniband) why += ", or " + tables_to_try(index, dev_.config_.ipv4, dev_.config_.gid_table);
  return why + "; see docs/link-layer.md, GID tables";
}

uint16_t Addressing::lid_of(uint32_t ipv4) {
  if (!dev_.config_.infiniband) return 0;
  if (ipv4 == dev_.config_.ipv4) return dev_.config_.lid;
  return lids_ ? lids_->lid_of(ipv4) : 0;
}

// The local GID a GRH names must be one the NIC has and can send from; the refusal names the
// index to use instead.
int Addressing::check_sgid_index(uint8_t index, std::string* why) const {
  const int usable = usable_gid_index(gids_);
  const std::string use = usable < 0 ? std::string()
                                     : "; use sgid_index " + std::to_string(usable) + " (" +
                                           gid_string(gids_.entries[usable].gid) + ", " +
                                           gid_type_name(gids_.entries[usable].type) + ")";
  if (index >= gids_.entries.size()) {
    if (gids_.entries.size() == 1)
      *why = "sgid_index " + std::to_string(index) + " is beyond the GID table (index 0 only)";
    else
      *why = "sgid_index " + std::to_string(index) + " is an empty entry of the GID table (entries 0 to " +
             std::to_string(gids_.entries.size() - 1) + " are set, `ibv_devinfo -v` lists them)" + use;
    return EINVAL;
  }
  const std::string bad = gid_entry_unusable(gids_.entries[index]);
  if (bad.empty()) return 0;
  *why = "sgid_index " + std::to_string(index) + " is " + bad + use;
  return EINVAL;
}

int Addressing::resolve_dgid(const ibv_gid& dgid, uint32_t* ipv4, std::string* why) const {
  if (is_ipv4_mapped(dgid, ipv4)) return 0;
  if (dev_.config_.infiniband && is_simnic_ib_gid(dgid, ipv4)) return 0;
  if (dev_.config_.infiniband)
    *why = "dgid " + gid_string(dgid) +
           " is neither a simnic port's GID (fe80::253:4eXX:XXXX:XX01, GID 0 of "
           "each NIC) nor an IPv4-mapped address";
  else if (dgid.raw[0] == 0xfe && (dgid.raw[1] & 0xc0) == 0x80)
    *why = "dgid " + gid_string(dgid) +
           " is an IPv6 link-local GID, which simnic cannot reach (its NICs are IPv4); "
           "use the peer's IPv4-mapped GID (::ffff:a.b.c.d, RoCE v2)";
  else *why = "dgid " + gid_string(dgid) + " is not an IPv4-mapped address (::ffff:a.b.c.d); simnic peers are IPv4";
  return EINVAL;
}

int Addressing::resolve_dlid(uint16_t dlid, uint32_t* ipv4, std::string* why) {
  if (dlid == 0 || dlid > kMaxUnicastLid) {
    *why = "dlid " + hex(dlid) + " is not a unicast LID (1 to 0xbfff, IBA 4.1.3)";
    return EINVAL;
  }
  if (dlid == dev_.config_.lid) {  // this very port (a loopback connection)
    *ipv4 = dev_.config_.ipv4;
    return 0;
  }
  if (lids_ && lids_->address_of(dlid, ipv4)) return 0;
  *why = "dlid " + hex(dlid) +
         " names no port of the fabric: no NIC has that LID in the LID registry "
         "(`simnic status` shows each NIC's LID; across machines, list them with `simnic up --lid-map FILE`)";
  return EINVAL;
}

int Addressing::resolve_av(const ibv_ah_attr& av, uint32_t* ipv4, std::string* why) {
  if (!av.is_global) {
    if (dev_.config_.infiniband) return resolve_dlid(av.dlid, ipv4, why);
    // Every RoCE packet carries the GRH (RoCE v2: its IP header); the kernel's
    // rdma_check_ah_attr refuses a RoCE address vector without one with EINVAL.
    *why =
        "the address vector has no GRH (ah_attr.is_global = 0): on RoCE the GID is the address, set is_global "
        "and grh.dgid";
    return EINVAL;
  }
  if (int e = check_sgid_index(av.grh.sgid_index, why)) return e;
  return resolve_dgid(av.grh.dgid, ipv4, why);
}

}  // namespace simnic::core
