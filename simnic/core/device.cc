// Device: what is the device itself: the names it draws (QPNs, keys), its notices, status.
// Its parts have their own files: the attributes and addressing (port/), the contexts
// (objects/contexts.cc), the budgets (objects/budgets.cc), the verbs by object group.
#include "simnic/core/device.h"
#include "simnic/core/objects/qp_state_table.h"
#include "simnic/core/text.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include <unistd.h>

namespace simnic::core {

uint32_t mtu_to_bytes(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
  }
  return 0;
}

ibv_mtu bytes_to_mtu(uint32_t bytes) {
  if (bytes >= 4096) return IBV_MTU_4096;
  if (bytes >= 2048) return IBV_MTU_2048;
  if (bytes >= 1024) return IBV_MTU_1024;
  if (bytes >= 512) return IBV_MTU_512;
  return IBV_MTU_256;
}

Device::Device(DeviceConfig config, HostMemory& memory, PacketSink& wire, ShmAllocator& shm, Notifier& notifier,
               Logger& logger)
    : ObjectTables(config.key_seed), config_(std::move(config)), env_{memory, wire, shm, notifier, logger} {
  shares_objects = [this](const Context* owner, const Context* user) { return verbs_.contexts.shares(owner, user); };
  config_.mtu_bytes = mtu_to_bytes(bytes_to_mtu(config_.mtu_bytes));
  CmNicInfo cm{config_.ipv4, config_.udp_port, addressing().node_guid_be(), bytes_to_mtu(config_.mtu_bytes),
               config_.key_seed};
  cm_ = std::make_unique<CmAgent>(cm, env_.wire, env_.notifier, tracer_, env_.logger);
}

Device::~Device() {
  while (!contexts_.empty()) verbs_.contexts.close_context(contexts_.begin()->second.get());
}

// ---------------------------------------------------------------- status

std::string Device::status_text() const {
  std::ostringstream s;
  s << "name " << config_.name << "\n";
  s << "addr " << (config_.ipv4 >> 24) << "." << ((config_.ipv4 >> 16) & 255) << "." << ((config_.ipv4 >> 8) & 255)
    << "." << (config_.ipv4 & 255) << "\n";
  s << "port " << config_.udp_port << "\n";
  s << "mtu " << config_.mtu_bytes << "\n";
  s << "link_layer " << (config_.infiniband ? "ib" : "eth") << "\n";
  if (config_.infiniband)
    s << "lid " << config_.lid << "\n"
      << "sm_lid " << config_.sm_lid << "\n";
  else s << "gid_table " << gid_table_kind_name(config_.gid_table) << "\n";
  s << "contexts " << contexts_.size() << "\n";
  s << "pds " << pds_.size() << "\n";
  s << "mrs " << mrs_.size() << "\n";
  s << "mws " << mws_.size() << "\n";
  s << "cqs " << cqs_.size() << "\n";
  s << "qps " << qps_.size() << "\n";
  s << "srqs " << srqs_.size() << "\n";
  counters_.for_each([&](const char* name, uint64_t v) { s << name << " " << v << "\n"; });
  // The per-peer window (congestion.h).
  const CongestionStats cc = congestion().stats();
  s << "cc_window_cap " << congestion().config().cap_bytes << "\ncc_window_min "
    << (cc.peers ? cc.min_cwnd : congestion().config().cap_bytes) << "\ncc_in_flight " << cc.in_flight
    << "\ncc_waiting_qps " << cc.waiting << "\ncc_waits " << cc.waits << "\ncc_wakeups " << cc.wakeups << "\ncc_cuts "
    << cc.cuts << "\n";
  // One line per QP, keyed by its QPN, for `simnic status NAME`.
  for (const auto& [h, qp] : qps_) {
    s << "qp." << hex(qp->qpn) << " " << qp_type_name(qp->type) << " " << qp_state_name(qp->state);
    if (qp->type != IBV_QPT_UD && qp->state != IBV_QPS_RESET && qp->state != IBV_QPS_INIT)
      s << " peer=" << ip_string(qp->remote_ip) << "/" << hex(qp->attr.dest_qp_num)
        << " next_psn=" << hex(qp->req.next_psn) << " una_psn=" << hex(qp->comp.una_psn)
        << " expected_psn=" << hex(qp->resp.epsn);
    s << " retransmits=" << qp->counters.retransmits << " rnr_naks=" << qp->counters.rnr_naks_received << "\n";
  }
  return s.str();
}

}  // namespace simnic::core
