// Addressing: what ibv_query_device and ibv_query_port report, and the port's GUID and GID 0.
#include "simnic/core/device.h"
#include "simnic/core/port/addressing.h"

#include <unistd.h>

#include <cstring>

namespace simnic::core {

Addressing::Addressing(Device& dev) : dev_(dev) {
  const DeviceConfig& c = dev_.config();
  gids_ = build_gid_table(c.gid_table, c.infiniband, c.ipv4, node_guid_be());
}

// rxe offers num_possible_cpus() vectors (rxe_register_device); the CPUs the host has
// configured are the same number for a user process. Vectors steer interrupts on a real NIC;
// simnic has none, so every vector behaves alike.
uint32_t Addressing::num_comp_vectors() {
  static const uint32_t n = [] {
    const long cpus = ::sysconf(_SC_NPROCESSORS_CONF);
    return cpus > 0 ? uint32_t(cpus) : 1u;
  }();
  return n;
}

uint64_t Addressing::node_guid_be() const {
  // 02:53:4e (a locally administered "SN") then the IPv4 address and a port byte.
  uint8_t g[8] = {0x02,
                  0x53,
                  0x4e,
                  uint8_t(dev_.config_.ipv4 >> 24),
                  uint8_t(dev_.config_.ipv4 >> 16),
                  uint8_t(dev_.config_.ipv4 >> 8),
                  uint8_t(dev_.config_.ipv4),
                  0x01};
  uint64_t v;
  std::memcpy(&v, g, 8);
  return v;
}

ibv_device_attr Addressing::device_attr() const {
  ibv_device_attr a{};
  std::snprintf(a.fw_ver, sizeof(a.fw_ver), "simnic 0.1.0");
  a.node_guid = node_guid_be();
  a.sys_image_guid = node_guid_be();
  a.max_mr_size = DeviceLimits::kMaxMrSize;
  a.page_size_cap = 0xfffff000;
  a.vendor_id = 0x00534e;  // our own, so tools take the generic (non-vendor) code paths
  a.vendor_part_id = 0x0001;
  a.hw_ver = 1;
  a.max_qp = DeviceLimits::kMaxQp;
  a.max_qp_wr = DeviceLimits::kMaxQpWr;
  a.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_PORT_ACTIVE_EVENT |
                       IBV_DEVICE_N_NOTIFY_CQ | IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_XRC;
  a.max_sge = abi::kMaxSge;
  a.max_sge_rd = abi::kMaxSge;
  a.max_cq = DeviceLimits::kMaxCq;
  a.max_cqe = DeviceLimits::kMaxCqe;
  a.max_mr = DeviceLimits::kMaxMr;
  a.max_pd = DeviceLimits::kMaxPd;
  a.max_mw = DeviceLimits::kMaxMw;
  a.max_qp_rd_atom = DeviceLimits::kMaxRdAtomic;
  a.max_res_rd_atom = DeviceLimits::kMaxRdAtomic * DeviceLimits::kMaxQp;
  a.max_qp_init_rd_atom = DeviceLimits::kMaxRdAtomic;
  a.atomic_cap = IBV_ATOMIC_HCA;
  a.max_srq = DeviceLimits::kMaxSrq;
  a.max_srq_wr = DeviceLimits::kMaxSrqWr;
  a.max_srq_sge = abi::kMaxSge;
  a.max_ah = DeviceLimits::kMaxAh;
  a.max_mcast_grp = DeviceLimits::kMaxMcastGrp;
  a.max_mcast_qp_attach = DeviceLimits::kMaxMcastQpAttach;
  a.max_total_mcast_qp_attach = DeviceLimits::kMaxTotalMcastQpAttach;
  a.max_pkeys = 1;
  a.local_ca_ack_delay = 15;
  a.phys_port_cnt = 1;
  return a;
}

ibv_port_attr Addressing::port_attr() const {
  ibv_port_attr p{};
  p.state = IBV_PORT_ACTIVE;
  p.max_mtu = IBV_MTU_4096;
  p.active_mtu = bytes_to_mtu(dev_.config_.mtu_bytes);
  p.gid_tbl_len = int(gids_.length);
  p.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
  p.max_msg_sz = 1u << 31;
  p.pkey_tbl_len = 1;
  p.max_vl_num = 1;
  p.active_width = 2;   // 4X
  p.active_speed = 32;  // EDR: 4X EDR reads as 100 Gb/s
  p.phys_state = 5;     // LinkUp
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
  if (dev_.config_.infiniband) {
    // An InfiniBand port the subnet manager has brought up: a LID, no LMC, the SM's LID;
    // subnet_timeout 18 is OpenSM's default. GIDs are not IP-based here.
    p.link_layer = IBV_LINK_LAYER_INFINIBAND;
    p.port_cap_flags = IBV_PORT_CM_SUP;
    p.lid = dev_.config_.lid;
    p.sm_lid = dev_.config_.sm_lid;
    p.lmc = 0;
    p.subnet_timeout = 18;
  }
  return p;
}

ibv_gid Addressing::gid0() const {
  ibv_gid g{};
  g.raw[10] = 0xff;
  g.raw[11] = 0xff;
  g.raw[12] = uint8_t(dev_.config_.ipv4 >> 24);
  g.raw[13] = uint8_t(dev_.config_.ipv4 >> 16);
  g.raw[14] = uint8_t(dev_.config_.ipv4 >> 8);
  g.raw[15] = uint8_t(dev_.config_.ipv4);
  return g;
}
}  // namespace simnic::core
