// Device: what is the device itself: its attributes, the names it draws (QPNs, keys),
// contexts, the queue memory they are charged, status. The verbs are in device_<object>.cc.
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
    : config_(std::move(config)),
      memory_(memory),
      wire_(wire),
      shm_(shm),
      notifier_(notifier),
      logger_(logger),
      keys_(config_.key_seed) {
  config_.mtu_bytes = mtu_to_bytes(bytes_to_mtu(config_.mtu_bytes));
  gids_ = build_gid_table(config_.gid_table, config_.infiniband, config_.ipv4, node_guid_be());
  CmNicInfo cm{config_.ipv4, config_.udp_port, node_guid_be(), bytes_to_mtu(config_.mtu_bytes), config_.key_seed};
  cm_ = std::make_unique<CmAgent>(cm, wire_, notifier_, tracer_, logger_);
}

Device::~Device() {
  while (!contexts_.empty()) close_context(contexts_.begin()->second.get());
}

void Device::log(LogLevel level, const std::string& line) { logger_.log(level, line); }

// The budget's "N more lines suppressed", written when due (log_limited calls this first).
void Device::log_budget_summary() {
  if (std::string summary = log_budget_.take_summary(now_); !summary.empty()) log(LogLevel::kWarn, summary);
}

// ---------------------------------------------------------------- attributes

uint64_t Device::node_guid_be() const {
  // 02:53:4e (a locally administered "SN") then the IPv4 address and a port byte.
  uint8_t g[8] = {0x02,
                  0x53,
                  0x4e,
                  uint8_t(config_.ipv4 >> 24),
                  uint8_t(config_.ipv4 >> 16),
                  uint8_t(config_.ipv4 >> 8),
                  uint8_t(config_.ipv4),
                  0x01};
  uint64_t v;
  std::memcpy(&v, g, 8);
  return v;
}

ibv_device_attr Device::device_attr() const {
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

ibv_port_attr Device::port_attr() const {
  ibv_port_attr p{};
  p.state = IBV_PORT_ACTIVE;
  p.max_mtu = IBV_MTU_4096;
  p.active_mtu = bytes_to_mtu(config_.mtu_bytes);
  p.gid_tbl_len = int(gids_.length);
  p.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
  p.max_msg_sz = 1u << 31;
  p.pkey_tbl_len = 1;
  p.max_vl_num = 1;
  p.active_width = 2;   // 4X
  p.active_speed = 32;  // EDR: 4X EDR reads as 100 Gb/s
  p.phys_state = 5;     // LinkUp
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
  if (config_.infiniband) {
    // An InfiniBand port the subnet manager has brought up: a LID, no LMC, the SM's LID;
    // subnet_timeout 18 is OpenSM's default. GIDs are not IP-based here.
    p.link_layer = IBV_LINK_LAYER_INFINIBAND;
    p.port_cap_flags = IBV_PORT_CM_SUP;
    p.lid = config_.lid;
    p.sm_lid = config_.sm_lid;
    p.lmc = 0;
    p.subnet_timeout = 18;
  }
  return p;
}

ibv_gid Device::gid0() const {
  ibv_gid g{};
  g.raw[10] = 0xff;
  g.raw[11] = 0xff;
  g.raw[12] = uint8_t(config_.ipv4 >> 24);
  g.raw[13] = uint8_t(config_.ipv4 >> 16);
  g.raw[14] = uint8_t(config_.ipv4 >> 8);
  g.raw[15] = uint8_t(config_.ipv4);
  return g;
}

// ---------------------------------------------------------------- names others must not guess

// A QPN nobody uses, drawn at random from the 24-bit space: not QP0/QP1 (the special QPs) and
// not 0xffffff (the multicast QPN, IBA 10.5.2.1).
uint32_t Device::new_qpn() {
  for (;;) {
    const uint32_t qpn = keys_.next() & 0xffffff;
    if (qpn > 1 && qpn != 0xffffff && !qp_by_qpn_.count(qpn)) return qpn;
  }
}

// MR keys have the top bit clear and memory-window rkeys have it set (their index is at least
// 0x800000), so a key names at most one of the two.
uint32_t Device::new_mr_key() {
  for (;;) {
    const uint32_t key = keys_.next() & 0x7fffffff;
    if (key && !mr_by_key_.count(key)) return key;
  }
}

uint32_t Device::new_mw_index() {
  for (;;) {
    const uint32_t index = 0x800000 | (keys_.next() & 0x7fffff);
    if (!mws_.count(index)) return index;
  }
}

// ---------------------------------------------------------------- contexts

Context* Device::open_context(pid_t pid, uid_t uid, int doorbell_fd, int async_fd) {
  const uint32_t id = next_context_id_++;
  Context* raw = (contexts_[id] = std::make_unique<Context>(
                      Context{.id = id, .pid = pid, .uid = uid, .doorbell_fd = doorbell_fd, .async_fd = async_fd}))
                     .get();
  tracer_.event(TraceKind::kCtxOpen).u("ctx", raw->id).u("pid", uint64_t(pid));
  log(LogLevel::kInfo, "context " + std::to_string(raw->id) + " opened by pid " + std::to_string(pid));
  return raw;
}

void Device::close_context(Context* ctx) {
  // Tear down like the kernel does for a dying process: QPs first, PDs last.
  for (auto h : std::vector<uint32_t>(ctx->qps)) {
    if (Qp* qp = owned(qps_, ctx, h)) detach_all_mcast(*qp);
    destroy_qp(ctx, h);
  }
  for (auto h : std::vector<uint32_t>(ctx->ahs)) destroy_ah(ctx, h);
  for (auto h : std::vector<uint32_t>(ctx->srqs)) destroy_srq(ctx, h);
  for (auto h : std::vector<uint32_t>(ctx->cqs)) destroy_cq(ctx, h);
  close_xrcds(ctx);  // after its XRC SRQs and TGT QPs
  for (auto h : std::vector<uint32_t>(ctx->channels)) destroy_channel(ctx, h);
  for (auto h : std::vector<uint32_t>(ctx->mws)) dealloc_mw(ctx, h);
  for (auto h : std::vector<uint32_t>(ctx->mrs)) dereg_mr(ctx, h);
  release_context_page(ctx);
  free_dms(ctx);     // after the MRs over them
  leave_group(ctx);  // its PDs go to a context that imported it (ibv_import_device)
  for (auto h : std::vector<uint32_t>(ctx->pds)) dealloc_pd(ctx, h);
  log(LogLevel::kInfo, "context " + std::to_string(ctx->id) + " of pid " + std::to_string(ctx->pid) + " closed");
  tracer_.event(TraceKind::kCtxClose).u("ctx", ctx->id).u("pid", uint64_t(ctx->pid));
  contexts_.erase(ctx->id);
}

// The kernel keeps one handle table per uverbs file for every kind of object, and answers a
// lookup that finds nothing with ENOENT (lookup_get_idr_uobject), one that finds an object of
// another kind with EINVAL (rdma_lookup_get_uobject). simnic's handles are also unique across
// kinds, so the same two answers follow from its tables.
int Device::check_handle(Context* ctx, HandleKind kind, uint32_t handle) {
  const bool opened_qp = [&] {
    auto it = tgt_opens_.find(handle);
    return it != tgt_opens_.end() && it->second.first == ctx;
  }();
  const std::pair<HandleKind, bool> names[] = {
      {HandleKind::kPd, owned(pds_, ctx, handle) != nullptr},
      {HandleKind::kMr, owned(mrs_, ctx, handle) != nullptr},
      {HandleKind::kMw, owned(mws_, ctx, handle) != nullptr},
      {HandleKind::kCq, owned(cqs_, ctx, handle) != nullptr},
      {HandleKind::kSrq, owned(srqs_, ctx, handle) != nullptr},
      {HandleKind::kQp, owned(qps_, ctx, handle) != nullptr || opened_qp},
      {HandleKind::kAh, owned(ahs_, ctx, handle) != nullptr},
      {HandleKind::kXrcd, std::find(ctx->xrcds.begin(), ctx->xrcds.end(), handle) != ctx->xrcds.end()},
  };
  bool other_kind = false;
  for (const auto& [k, named] : names) {
    if (named && k == kind) return 0;
    other_kind |= named;
  }
  if (other_kind)
    return refuse(EINVAL, "handle " + std::to_string(handle) + " names an object of another kind (uverbs: EINVAL)");
  return refuse(ENOENT, "handle " + std::to_string(handle) +
                            " names no object of this program: destroyed already, or never created (uverbs: ENOENT)");
}

// rxe offers num_possible_cpus() vectors (rxe_register_device); the CPUs the host has
// configured are the same number for a user process. Vectors steer interrupts on a real NIC;
// simnic has none, so every vector behaves alike.
uint32_t Device::num_comp_vectors() {
  static const uint32_t n = [] {
    const long cpus = ::sysconf(_SC_NPROCESSORS_CONF);
    return cpus > 0 ? uint32_t(cpus) : 1u;
  }();
  return n;
}

bool Device::queue_memory_fits(const Context* ctx, uint64_t bytes) const {
  return ctx->queue_bytes + bytes <= ContextLimits::kMaxQueueBytes &&
         queue_bytes_ + bytes <= DeviceLimits::kMaxQueueBytes;
}

bool Device::charge_queue_memory(Context* ctx, uint64_t bytes) {
  if (!queue_memory_fits(ctx, bytes)) return false;
  ctx->queue_bytes += bytes;
  queue_bytes_ += bytes;
  return true;
}

void Device::refund_queue_memory(Context* ctx, uint64_t bytes) {
  ctx->queue_bytes -= bytes;
  queue_bytes_ -= bytes;
}

int Device::map_queue_memory(Context* ctx, uint64_t charged, size_t bytes, const char* name, ShmRegion* out) {
  if (!charge_queue_memory(ctx, charged)) return ENOMEM;
  int err = 0;
  if (shm_.allocate(bytes, name, out, &err)) return 0;
  refund_queue_memory(ctx, charged);
  return err ? err : ENOMEM;
}

void Device::unmap_queue_memory(Context* ctx, uint64_t charged, ShmRegion& mem) {
  refund_queue_memory(ctx, charged);
  shm_.release(mem);
}

void Device::notice(uint32_t qpn, const std::string& text) {
  Qp* qp = find_qp_by_qpn(qpn);
  if (!qp) return;
  auto& q = qp->ctx->notices;
  if (q.size() >= 32) q.pop_front();  // a program that never asks keeps the newest only
  q.push_back(text);
}

std::string Device::take_notices(Context* ctx) {
  std::string out;
  for (const auto& n : ctx->notices) out += n + "\n";
  ctx->notices.clear();
  return out;
}

Qp* Device::find_qp_by_qpn(uint32_t qpn) {
  auto it = qp_by_qpn_.find(qpn);
  return it == qp_by_qpn_.end() ? nullptr : it->second;
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
