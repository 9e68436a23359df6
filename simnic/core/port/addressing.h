// Addressing: what the NIC says about itself (ibv_query_device, ibv_query_port, its GUID and GID
// table) and how an address vector reaches a peer NIC (by GID in RoCE mode, by LID in IB mode).
// A part of Device (device.h): it owns the GID table and reads the NIC's configuration.
#pragma once
#include <cstdint>
#include <string>

#include <infiniband/verbs.h>

#include "simnic/core/env.h"
#include "simnic/core/port/gid_table.h"

namespace simnic::core {

class Device;

class Addressing {
 public:
  explicit Addressing(Device& dev);

  // attributes.cc
  ibv_device_attr device_attr() const;
  ibv_port_attr port_attr() const;
  ibv_gid gid0() const;  // the IPv4-mapped address, RoCE v2
  uint64_t node_guid_be() const;
  // The completion vectors ibv_context.num_comp_vectors offers: one per CPU, as rxe.
  static uint32_t num_comp_vectors();

  // address.cc: the GID table and how address vectors reach a peer.
  const GidTable& gid_table() const;
  // GID `index` of port 1: 0, ENODATA for an empty slot (below gid_tbl_len), else EINVAL.
  int query_gid(uint32_t index, GidEntry* out) const;
  // Why GID `index` is past the table (a query_gid EINVAL): what the table holds, and which
  // `simnic up --gid-table` lists a table where the program's index is the usable GID.
  std::string gid_index_refusal(uint32_t index) const;
  // IB mode: where LIDs lead (nullptr: only this port's own LID is known).
  void set_lid_directory(LidDirectory* lids) { lids_ = lids; }
  // The NIC address an address vector sends to: by its GRH's dgid (RoCE needs one; its
  // sgid_index must be an entry simnic can send from), or in IB mode by its DLID. 0 or EINVAL
  // with the reason in *why.
  int resolve_av(const ibv_ah_attr& av, uint32_t* ipv4, std::string* why);
  uint16_t lid_of(uint32_t ipv4);  // IB mode: the LID of the NIC at ipv4, 0 if unknown
  // Whether an address vector's sgid_index names a GID simnic can send from (ibv_create_ah too).
  int check_sgid_index(uint8_t index, std::string* why) const;

 private:
  int resolve_dgid(const ibv_gid& dgid, uint32_t* ipv4, std::string* why) const;
  int resolve_dlid(uint16_t dlid, uint32_t* ipv4, std::string* why);

  Device& dev_;
  GidTable gids_;  // port 1's, built from the configuration (gid_table.h)
  LidDirectory* lids_ = nullptr;
};

}  // namespace simnic::core
