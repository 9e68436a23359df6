// Device: object tables and the resource verbs (everything but the QP state machine).
#include "simnic/core/device.h"
#include "simnic/core/qp_state_table.h"
#include "simnic/core/text.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

namespace simnic::core {

namespace {

uint32_t round_up_pow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

constexpr uint32_t kKnownAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                                  IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
                                  IBV_ACCESS_RELAXED_ORDERING;

// Where a QP's rings lie in its shared memory, and how many bytes it charges its context
// (rings plus the NIC's per-WQE state; not the page rounding of the mapping).
struct QpLayout {
  uint32_t sq_off, rq_off;
  size_t ring_bytes;
  uint64_t charged;
};

QpLayout qp_layout(uint32_t sq_entries, uint32_t rq_entries) {
  QpLayout l;
  l.sq_off = abi::align_up(sizeof(abi::QpShared), abi::kCacheLine);
  l.rq_off = abi::align_up(l.sq_off + sq_entries * sizeof(abi::SendWqe), abi::kCacheLine);
  l.ring_bytes = l.rq_off + size_t(rq_entries) * sizeof(abi::RecvWqe);
  l.charged = l.ring_bytes + uint64_t(sq_entries) * sizeof(SendWqeState);
  return l;
}

size_t srq_wqe_offset() { return abi::align_up(sizeof(abi::SrqShared), abi::kCacheLine); }
size_t srq_bytes(uint32_t entries) { return srq_wqe_offset() + size_t(entries) * sizeof(abi::RecvWqe); }

template <class T>
void erase_handle(std::vector<uint32_t>& v, uint32_t h) {
  v.erase(std::remove(v.begin(), v.end(), h), v.end());
}

}  // namespace

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

Device::Device(DeviceConfig config, HostMemory& memory, PacketSink& wire, ShmAllocator& shm,
               Notifier& notifier, Logger& logger)
    : config_(std::move(config)),
      memory_(memory),
      wire_(wire),
      shm_(shm),
      notifier_(notifier),
      logger_(logger),
      keys_(config_.key_seed) {
  config_.mtu_bytes = mtu_to_bytes(bytes_to_mtu(config_.mtu_bytes));
  gids_ = build_gid_table(config_.gid_table, config_.infiniband, config_.ipv4, node_guid_be());
  tx_buffer_.resize(8192);
  payload_buffer_.resize(8192);
  CmNicInfo cm{config_.ipv4, config_.udp_port, node_guid_be(), bytes_to_mtu(config_.mtu_bytes), config_.key_seed};
  cm_ = std::make_unique<CmAgent>(cm, wire_, notifier_, tracer_, logger_);
}

Device::~Device() {
  while (!contexts_.empty()) close_context(contexts_.begin()->second.get());
}

void Device::log(LogLevel level, const std::string& line) { logger_.log(level, line); }

// ---------------------------------------------------------------- attributes

uint64_t Device::node_guid_be() const {
  // 02:53:4e (a locally administered "SN") then the IPv4 address and a port byte.
  uint8_t g[8] = {0x02, 0x53, 0x4e, uint8_t(config_.ipv4 >> 24), uint8_t(config_.ipv4 >> 16),
                  uint8_t(config_.ipv4 >> 8), uint8_t(config_.ipv4), 0x01};
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
  a.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SYS_IMAGE_GUID |
                       IBV_DEVICE_PORT_ACTIVE_EVENT  |
                       IBV_DEVICE_N_NOTIFY_CQ | IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B |
                       IBV_DEVICE_XRC;
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
  auto ctx = std::make_unique<Context>();
  ctx->id = next_context_id_++;
  ctx->pid = pid;
  ctx->uid = uid;
  ctx->doorbell_fd = doorbell_fd;
  ctx->async_fd = async_fd;
  Context* raw = ctx.get();
  contexts_[raw->id] = std::move(ctx);
  tracer_.event("ctx_open").u("ctx", raw->id).u("pid", uint64_t(pid));
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
  for (auto h : std::vector<uint32_t>(ctx->pds)) dealloc_pd(ctx, h);
  log(LogLevel::kInfo, "context " + std::to_string(ctx->id) + " of pid " + std::to_string(ctx->pid) + " closed");
  tracer_.event("ctx_close").u("ctx", ctx->id).u("pid", uint64_t(ctx->pid));
  contexts_.erase(ctx->id);
}

// ---------------------------------------------------------------- PD, MR

int Device::alloc_pd(Context* ctx, uint32_t* handle) {
  if (pds_.size() >= DeviceLimits::kMaxPd || ctx->pds.size() >= ContextLimits::kMaxPd) return ENOMEM;
  auto pd = std::make_unique<Pd>();
  pd->handle = new_handle();
  pd->ctx = ctx;
  *handle = pd->handle;
  ctx->pds.push_back(pd->handle);
  tracer_.event("pd_create").u("ctx", ctx->id).u("pd", pd->handle);
  pds_[pd->handle] = std::move(pd);
  return 0;
}

int Device::dealloc_pd(Context* ctx, uint32_t handle) {
  Pd* pd = owned(pds_, ctx, handle);
  if (!pd) return EINVAL;
  if (pd->users) return EBUSY;
  tracer_.event("pd_destroy").u("ctx", ctx->id).u("pd", handle);
  erase_handle<Pd>(ctx->pds, handle);
  pds_.erase(handle);
  return 0;
}

int Device::reg_mr(Context* ctx, uint32_t pd_handle, uint64_t addr, uint64_t length,
                   uint64_t iova, uint32_t access, Mr** out) {
  Pd* pd = owned(pds_, ctx, pd_handle);
  if (!pd) return EINVAL;
  if (access & ~kKnownAccess) return refuse(EINVAL, "access flags " + hex(access) + " include bits simnic does not know");
  // Remote write or atomic access needs local write (IBA o10-36.2.1, ib_check_mr_access).
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(access & IBV_ACCESS_LOCAL_WRITE))
    return refuse(EINVAL, "IBV_ACCESS_REMOTE_WRITE and IBV_ACCESS_REMOTE_ATOMIC need IBV_ACCESS_LOCAL_WRITE too (IBA o10-36.2.1)");
  if (length == 0 || length > DeviceLimits::kMaxMrSize || addr + length < addr)
    return refuse(EINVAL, "length " + std::to_string(length) + " is 0, wraps around, or is more than max_mr_size");
  if (mrs_.size() >= DeviceLimits::kMaxMr || ctx->mrs.size() >= ContextLimits::kMaxMr)
    return refuse(ENOMEM, "too many MRs: " + std::to_string(ctx->mrs.size()) + " in this program (at most " +
                              std::to_string(ContextLimits::kMaxMr) + " per program)");
  // The kernel pins the pages at registration: an unmapped range fails here, not later.
  uint8_t probe;
  for (uint64_t at : {addr, addr + length - 1})
    if (int e = memory_.read(ctx->pid, at, &probe, 1))
      return refuse(e == EPERM ? EPERM : EFAULT, "[" + hex(addr) + ", +" + std::to_string(length) +
                                                     ") is not all mapped in the program (" + hex(at) + " is not)");

  auto mr = std::make_unique<Mr>();
  mr->handle = new_handle();
  mr->ctx = ctx;
  mr->pd = pd;
  mr->addr = addr;
  mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : iova;
  mr->length = length;
  mr->access = access;
  const uint32_t key = new_mr_key();
  mr->lkey = mr->rkey = key;
  pd->users++;
  ctx->mrs.push_back(mr->handle);
  mr_by_key_[key] = mr.get();
  *out = mr.get();
  if (tracer_.on()) trace_mr_create(*mr);
  mrs_[mr->handle] = std::move(mr);
  return 0;
}

int Device::dereg_mr(Context* ctx, uint32_t handle) {
  Mr* mr = owned(mrs_, ctx, handle);
  if (!mr) return EINVAL;
  if (mr->bound_mws) return EINVAL;  // windows still bound to it (rxe refuses the same way)
  // An engine may still point at this MR mid-message; drop those references.
  for (auto& [h, qp] : qps_) {
    if (qp->write_mr == mr) qp->write_mr = nullptr, qp->write_left = 0;
    for (auto& rr : qp->read_responses)
      if (rr.mr == mr) rr.mr = nullptr;
  }
  tracer_.event("mr_destroy").u("ctx", ctx->id).u("pd", mr->pd->handle).u("mr", handle).u("lkey", mr->lkey)
      .u("rkey", mr->rkey).hex("addr", mr->iova).u("length", mr->length).s("access", access_string(mr->access));
  mr->pd->users--;
  mr_by_key_.erase(mr->lkey);
  erase_handle<Mr>(ctx->mrs, handle);
  mrs_.erase(handle);
  return 0;
}

bool Device::charge_queue_memory(Context* ctx, uint64_t bytes) {
  if (ctx->queue_bytes + bytes > ContextLimits::kMaxQueueBytes || queue_bytes_ + bytes > DeviceLimits::kMaxQueueBytes)
    return false;
  ctx->queue_bytes += bytes;
  queue_bytes_ += bytes;
  return true;
}

void Device::refund_queue_memory(Context* ctx, uint64_t bytes) {
  ctx->queue_bytes -= bytes;
  queue_bytes_ -= bytes;
}

const Mr* Device::find_mr_by_key(uint32_t key) const {
  auto it = mr_by_key_.find(key);
  return it == mr_by_key_.end() ? nullptr : it->second;
}

// ---------------------------------------------------------------- channels, CQs

int Device::create_channel(Context* ctx, int fd, uint32_t* handle) {
  if (ctx->channels.size() >= ContextLimits::kMaxChannel) return ENOMEM;
  auto ch = std::make_unique<Channel>();
  ch->handle = new_handle();
  ch->ctx = ctx;
  ch->fd = fd;
  *handle = ch->handle;
  ctx->channels.push_back(ch->handle);
  channels_[ch->handle] = std::move(ch);
  return 0;
}

int Device::destroy_channel(Context* ctx, uint32_t handle) {
  Channel* ch = owned(channels_, ctx, handle);
  if (!ch) return EINVAL;
  if (ch->users) return EBUSY;
  notifier_.release_fd(ch->fd);
  erase_handle<Channel>(ctx->channels, handle);
  channels_.erase(handle);
  return 0;
}

int Device::create_cq(Context* ctx, int cqe, uint32_t channel, Cq** out) {
  if (cqe < 1 || cqe > DeviceLimits::kMaxCqe) return EINVAL;
  if (cqs_.size() >= DeviceLimits::kMaxCq || ctx->cqs.size() >= ContextLimits::kMaxCq) return ENOMEM;
  Channel* ch = nullptr;
  if (channel) {
    ch = owned(channels_, ctx, channel);
    if (!ch) return EINVAL;
  }
  auto cq = std::make_unique<Cq>();
  cq->handle = new_handle();
  cq->ctx = ctx;
  cq->channel = ch;
  cq->entries = round_up_pow2(uint32_t(cqe) + 1);
  cq->cqe = int(cq->entries) - 1;
  size_t bytes = abi::cq_bytes(cq->entries);
  if (!charge_queue_memory(ctx, bytes)) return ENOMEM;
  int err = 0;
  if (!shm_.allocate(bytes, "simnic-cq", &cq->mem, &err)) {
    refund_queue_memory(ctx, bytes);
    return err ? err : ENOMEM;
  }
  cq->shm = new (cq->mem.addr) abi::CqShared();
  cq->slots = reinterpret_cast<ibv_wc*>(static_cast<uint8_t*>(cq->mem.addr) + abi::cqe_offset());
  cq->timestamps = reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(cq->mem.addr) + abi::cqe_timestamp_offset(cq->entries));
  if (ch) ch->users++;
  ctx->cqs.push_back(cq->handle);
  *out = cq.get();
  tracer_.event("cq_create").u("ctx", ctx->id).u("cq", cq->handle).u("cqe", uint64_t(cq->cqe)).u("entries", cq->entries);
  cqs_[cq->handle] = std::move(cq);
  return 0;
}

int Device::destroy_cq(Context* ctx, uint32_t handle) {
  Cq* cq = owned(cqs_, ctx, handle);
  if (!cq) return EINVAL;
  if (cq->users) return EBUSY;
  tracer_.event("cq_destroy").u("ctx", ctx->id).u("cq", handle).u("cqe", uint64_t(cq->cqe)).u("entries", cq->entries);
  if (cq->channel) cq->channel->users--;
  refund_queue_memory(ctx, abi::cq_bytes(cq->entries));
  shm_.release(cq->mem);
  erase_handle<Cq>(ctx->cqs, handle);
  cqs_.erase(handle);
  return 0;
}

// rxe's rules (rxe_cq_chk_attr, rxe_cq_resize_queue): 1..max_cqe entries, no fewer than the
// completions waiting to be polled, rounded up as at creation. simnicd is single-threaded, so
// no CQE is written while the pending ones move; the shim holds its poll lock from the request
// until it has mapped the new ring, so the consumer index cannot move either.
int Device::resize_cq(Context* ctx, uint32_t handle, int cqe, Cq** out) {
  Cq* cq = owned(cqs_, ctx, handle);
  if (!cq || cqe < 1 || cqe > DeviceLimits::kMaxCqe) return EINVAL;
  const uint32_t prod = cq->shm->ring.producer.value.load(std::memory_order_relaxed);
  const uint32_t cons = cq->shm->ring.consumer.value.load(std::memory_order_acquire);
  const uint32_t pending = prod - cons;  // more than the ring holds: a consumer index the app broke
  if (pending > cq->entries || uint32_t(cqe) < pending) return EINVAL;
  const uint32_t entries = round_up_pow2(uint32_t(cqe) + 1);
  const size_t bytes = abi::cq_bytes(entries);
  if (!charge_queue_memory(ctx, bytes)) return ENOMEM;
  ShmRegion mem;
  int err = 0;
  if (!shm_.allocate(bytes, "simnic-cq", &mem, &err)) {
    refund_queue_memory(ctx, bytes);
    return err ? err : ENOMEM;
  }
  auto* shm = new (mem.addr) abi::CqShared();
  auto* slots = reinterpret_cast<ibv_wc*>(static_cast<uint8_t*>(mem.addr) + abi::cqe_offset());
  auto* stamps = reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(mem.addr) + abi::cqe_timestamp_offset(entries));
  // The indices keep counting where they were, so a viewer's CQE index stays the same CQE.
  for (uint32_t i = cons; i != prod; ++i) {
    slots[i & (entries - 1)] = cq->slots[i & (cq->entries - 1)];
    stamps[i & (entries - 1)] = cq->timestamps[i & (cq->entries - 1)];
  }
  shm->ring.consumer.value.store(cons, std::memory_order_relaxed);
  shm->ring.producer.value.store(prod, std::memory_order_release);
  shm->arm.store(cq->shm->arm.load(std::memory_order_acquire));
  shm->overrun.store(cq->shm->overrun.load());
  refund_queue_memory(ctx, abi::cq_bytes(cq->entries));
  shm_.release(cq->mem);
  cq->mem = mem;
  cq->shm = shm;
  cq->slots = slots;
  cq->timestamps = stamps;
  cq->entries = entries;
  cq->cqe = int(entries) - 1;
  tracer_.event("cq_resize").u("ctx", ctx->id).u("cq", handle).u("cqe", uint64_t(cq->cqe)).u("entries", entries)
      .u("pending", pending);
  *out = cq;
  return 0;
}

// ---------------------------------------------------------------- SRQ

int Device::create_srq(Context* ctx, uint32_t pd_handle, const ibv_srq_attr& attr, Srq** out) {
  Pd* pd = owned(pds_, ctx, pd_handle);
  if (!pd) return EINVAL;
  if (attr.max_wr < 1 || attr.max_wr > DeviceLimits::kMaxSrqWr || attr.max_sge > abi::kMaxSge)
    return EINVAL;
  if (srqs_.size() >= DeviceLimits::kMaxSrq || ctx->srqs.size() >= ContextLimits::kMaxSrq) return ENOMEM;
  auto srq = std::make_unique<Srq>();
  srq->handle = new_handle();
  srq->ctx = ctx;
  srq->pd = pd;
  srq->entries = round_up_pow2(attr.max_wr);
  srq->attr.max_wr = srq->entries;
  srq->attr.max_sge = abi::kMaxSge;
  srq->attr.srq_limit = attr.srq_limit;
  const size_t off = srq_wqe_offset(), bytes = srq_bytes(srq->entries);
  if (!charge_queue_memory(ctx, bytes)) return ENOMEM;
  int err = 0;
  if (!shm_.allocate(bytes, "simnic-srq", &srq->mem, &err)) {
    refund_queue_memory(ctx, bytes);
    return err ? err : ENOMEM;
  }
  srq->shm = new (srq->mem.addr) abi::SrqShared();
  srq->shm->limit.store(attr.srq_limit);
  srq->slots = reinterpret_cast<abi::RecvWqe*>(static_cast<uint8_t*>(srq->mem.addr) + off);
  pd->users++;
  ctx->srqs.push_back(srq->handle);
  *out = srq.get();
  srqs_[srq->handle] = std::move(srq);
  return 0;
}

int Device::modify_srq(Context* ctx, uint32_t handle, const ibv_srq_attr& attr, int mask) {
  Srq* srq = owned(srqs_, ctx, handle);
  if (!srq) return EINVAL;
  if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) return EINVAL;
  if (mask & IBV_SRQ_MAX_WR) return EOPNOTSUPP;  // resizing: not yet
  if (mask & IBV_SRQ_LIMIT) {
    if (attr.srq_limit > srq->attr.max_wr) return EINVAL;
    srq->attr.srq_limit = attr.srq_limit;
    srq->shm->limit.store(attr.srq_limit);
  }
  return 0;
}

int Device::query_srq(Context* ctx, uint32_t handle, ibv_srq_attr* attr) {
  Srq* srq = owned(srqs_, ctx, handle);
  if (!srq) return EINVAL;
  *attr = srq->attr;
  return 0;
}

int Device::destroy_srq(Context* ctx, uint32_t handle) {
  Srq* srq = owned(srqs_, ctx, handle);
  if (!srq) return EINVAL;
  if (srq->users) return EBUSY;
  if (srq->xrcd) xrc_release_srq(*srq);
  srq->pd->users--;
  refund_queue_memory(ctx, srq_bytes(srq->entries));
  shm_.release(srq->mem);
  erase_handle<Srq>(ctx->srqs, handle);
  srqs_.erase(handle);
  return 0;
}

// ---------------------------------------------------------------- QP create/destroy

int Device::create_qp(Context* ctx, const ibv_qp_init_attr& init, uint32_t pd_handle,
                      uint32_t send_cq, uint32_t recv_cq, uint32_t srq_handle, Qp** out) {
  Pd* pd = owned(pds_, ctx, pd_handle);
  Cq* scq = owned(cqs_, ctx, send_cq);
  Cq* rcq = owned(cqs_, ctx, recv_cq);
  if (!pd || !scq || !rcq) return EINVAL;
  Srq* srq = nullptr;
  if (srq_handle) {
    srq = owned(srqs_, ctx, srq_handle);
    if (!srq) return EINVAL;
  }
  if (init.qp_type != IBV_QPT_RC && init.qp_type != IBV_QPT_UC && init.qp_type != IBV_QPT_UD)
    return refuse(EOPNOTSUPP, "QP type " + std::to_string(init.qp_type) + ": simnic has RC, UC and UD QPs");
  const ibv_qp_cap& c = init.cap;
  if (c.max_send_wr > DeviceLimits::kMaxQpWr || c.max_send_sge > abi::kMaxSge ||
      c.max_inline_data > abi::kMaxInlineData ||
      (!srq && (c.max_recv_wr > DeviceLimits::kMaxQpWr || c.max_recv_sge > abi::kMaxSge)))
    return refuse(EINVAL, "cap asks for more than the device has (ibv_query_device): max_send_wr and max_recv_wr "
                          "at most " + std::to_string(DeviceLimits::kMaxQpWr) + ", max_send_sge and max_recv_sge " +
                          std::to_string(abi::kMaxSge) + ", max_inline_data " + std::to_string(abi::kMaxInlineData));
  if (qps_.size() >= DeviceLimits::kMaxQp || ctx->qps.size() >= ContextLimits::kMaxQp)
    return refuse(ENOMEM, "too many QPs: " + std::to_string(ctx->qps.size()) + " in this program (at most " +
                              std::to_string(ContextLimits::kMaxQp) + " per program, " +
                              std::to_string(DeviceLimits::kMaxQp) + " per NIC)");

  auto qp = std::make_unique<Qp>();
  qp->handle = new_handle();
  qp->qpn = new_qpn();
  qp->ctx = ctx;
  qp->pd = pd;
  qp->send_cq = scq;
  qp->recv_cq = rcq;
  qp->srq = srq;
  qp->type = init.qp_type;
  qp->sq_sig_all = init.sq_sig_all;
  // A UD message is one packet of up to the port's MTU (UD QPs have no path MTU attribute).
  if (qp->type == IBV_QPT_UD) qp->mtu_bytes = config_.mtu_bytes;
  qp->sq_entries = round_up_pow2(std::max(1u, c.max_send_wr));
  qp->rq_entries = srq ? 0 : round_up_pow2(std::max(1u, c.max_recv_wr));
  qp->cap.max_send_wr = qp->sq_entries;
  qp->cap.max_recv_wr = qp->rq_entries;
  qp->cap.max_send_sge = abi::kMaxSge;
  qp->cap.max_recv_sge = srq ? 0 : abi::kMaxSge;
  qp->cap.max_inline_data = abi::kMaxInlineData;

  const QpLayout layout = qp_layout(qp->sq_entries, qp->rq_entries);
  if (!charge_queue_memory(ctx, layout.charged))
    return refuse(ENOMEM, "out of queue memory: this program's queues already take " +
                              std::to_string(ctx->queue_bytes >> 20) + " MiB (at most " +
                              std::to_string(ContextLimits::kMaxQueueBytes >> 20) + " MiB per program); smaller "
                              "max_send_wr/max_recv_wr, or fewer QPs");
  int err = 0;
  if (!shm_.allocate(layout.ring_bytes, "simnic-qp", &qp->mem, &err)) {
    refund_queue_memory(ctx, layout.charged);
    return err ? err : ENOMEM;
  }
  qp->sq_state.resize(qp->sq_entries);
  auto* base = static_cast<uint8_t*>(qp->mem.addr);
  qp->shm = new (base) abi::QpShared();
  qp->shm->state.store(IBV_QPS_RESET);
  qp->sq = reinterpret_cast<abi::SendWqe*>(base + layout.sq_off);
  qp->rq = reinterpret_cast<abi::RecvWqe*>(base + layout.rq_off);

  qp->attr.qp_state = IBV_QPS_RESET;
  qp->attr.cap = qp->cap;
  qp->attr.path_mtu = IBV_MTU_1024;
  qp->attr.path_mig_state = IBV_MIG_MIGRATED;
  pd->users++;
  scq->users++;
  rcq->users++;
  if (srq) srq->users++;
  ctx->qps.push_back(qp->handle);
  qp_by_qpn_[qp->qpn] = qp.get();
  *out = qp.get();
  trace_qp_lifecycle("qp_create", *qp);
  log(LogLevel::kInfo, "QP 0x" + [&] { std::ostringstream s; s << std::hex << qp->qpn; return s.str(); }() +
                           " created (" + (qp->type == IBV_QPT_RC ? "RC" : qp->type == IBV_QPT_UC ? "UC" : "UD") +
                           ", sq " + std::to_string(qp->sq_entries) + ", rq " + std::to_string(qp->rq_entries) + ")");
  qps_[qp->handle] = std::move(qp);
  return 0;
}

int Device::destroy_qp(Context* ctx, uint32_t handle) {
  Qp* qp = owned(qps_, ctx, handle);
  if (!qp) return close_opened_qp(ctx, handle);  // an ibv_open_qp handle, or EINVAL
  // As uverbs: a QP still attached to a multicast group cannot be destroyed (a dying process's
  // are detached first, in close_context).
  if (!qp->mcast_gids.empty())
    return refuse(EBUSY, "QP " + hex(qp->qpn) + " is still attached to " + std::to_string(qp->mcast_gids.size()) +
                             " multicast group(s): ibv_detach_mcast them before ibv_destroy_qp");
  if (qp->is_xrc()) return destroy_xrc_qp(ctx, *qp);
  trace_qp_lifecycle("qp_destroy", *qp);
  unbind_mws_of_qp(*qp);
  busy_qps_.erase(qp->qpn);
  qp_by_qpn_.erase(qp->qpn);
  qp->pd->users--;
  qp->send_cq->users--;
  qp->recv_cq->users--;
  if (qp->srq) qp->srq->users--;
  refund_queue_memory(ctx, qp_layout(qp->sq_entries, qp->rq_entries).charged);
  shm_.release(qp->mem);
  erase_handle<Qp>(ctx->qps, handle);
  qps_.erase(handle);
  return 0;
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

int Device::explain_qp(Context* ctx, uint32_t qpn, std::string* why) {
  Qp* qp = find_qp_by_qpn(qpn);
  if (!qp || qp->ctx != ctx) return EINVAL;
  if (qp->error_reason.empty()) {
    *why = "";
    return 0;
  }
  *why = "QP " + hex(qp->qpn) + " is in " + qp_state_name(qp->state) + " because " + qp->error_reason;
  if (qp->state == IBV_QPS_ERR)
    *why += "; its other work requests complete with IBV_WC_WR_FLUSH_ERR until it is reset (RESET, INIT, RTR, RTS)";
  return 0;
}

Qp* Device::find_qp_by_qpn(uint32_t qpn) {
  auto it = qp_by_qpn_.find(qpn);
  return it == qp_by_qpn_.end() ? nullptr : it->second;
}

// ---------------------------------------------------------------- AH

int Device::create_ah(Context* ctx, uint32_t pd_handle, const ibv_ah_attr& attr, uint32_t* handle) {
  Pd* pd = owned(pds_, ctx, pd_handle);
  if (!pd) return EINVAL;
  if (attr.port_num != 1) return refuse(EINVAL, "port_num " + std::to_string(attr.port_num) + " does not exist (the NIC has port 1)");
  // On RoCE an AH without a GRH has nowhere to go; in IB mode its DLID names the peer. A
  // multicast GID is sent to the IPv4 group group_ipv4 maps it to.
  uint32_t dst_ip = 0;
  std::string why;
  if (attr.is_global && is_multicast_gid(attr.grh.dgid)) {
    if (check_sgid_index(attr.grh.sgid_index, &why)) return refuse(EINVAL, why);
    dst_ip = group_ipv4(attr.grh.dgid);
  } else if (resolve_av(attr, &dst_ip, &why)) {
    log(LogLevel::kWarn, "create_ah refused (EINVAL): " + why);
    return refuse(EINVAL, why);
  }
  if (ahs_.size() >= DeviceLimits::kMaxAh || ctx->ahs.size() >= ContextLimits::kMaxAh) return ENOMEM;
  auto ah = std::make_unique<Ah>();
  ah->handle = new_handle();
  ah->ctx = ctx;
  ah->pd = pd;
  ah->attr = attr;
  ah->dst_ip = dst_ip;
  pd->users++;
  *handle = ah->handle;
  ctx->ahs.push_back(ah->handle);
  ahs_[ah->handle] = std::move(ah);
  return 0;
}

int Device::destroy_ah(Context* ctx, uint32_t handle) {
  Ah* ah = owned(ahs_, ctx, handle);
  if (!ah) return EINVAL;
  ah->pd->users--;
  erase_handle<Ah>(ctx->ahs, handle);
  ahs_.erase(handle);
  return 0;
}

// ---------------------------------------------------------------- status

std::string Device::status_text() const {
  std::ostringstream s;
  s << "name " << config_.name << "\n";
  s << "addr " << (config_.ipv4 >> 24) << "." << ((config_.ipv4 >> 16) & 255) << "."
    << ((config_.ipv4 >> 8) & 255) << "." << (config_.ipv4 & 255) << "\n";
  s << "port " << config_.udp_port << "\n";
  s << "mtu " << config_.mtu_bytes << "\n";
  s << "link_layer " << (config_.infiniband ? "ib" : "eth") << "\n";
  if (config_.infiniband) s << "lid " << config_.lid << "\n" << "sm_lid " << config_.sm_lid << "\n";
  else s << "gid_table " << gid_table_kind_name(config_.gid_table) << "\n";
  s << "contexts " << contexts_.size() << "\n";
  s << "pds " << pds_.size() << "\n";
  s << "mrs " << mrs_.size() << "\n";
  s << "mws " << mws_.size() << "\n";
  s << "cqs " << cqs_.size() << "\n";
  s << "qps " << qps_.size() << "\n";
  s << "srqs " << srqs_.size() << "\n";
  counters_.for_each([&](const char* name, uint64_t v) { s << name << " " << v << "\n"; });
  // One line per QP, keyed by its QPN, for `simnic status NAME`.
  for (const auto& [h, qp] : qps_) {
    s << "qp." << hex(qp->qpn) << " " << qp_type_name(qp->type) << " " << qp_state_name(qp->state);
    if (qp->type != IBV_QPT_UD && qp->state != IBV_QPS_RESET && qp->state != IBV_QPS_INIT)
      s << " peer=" << ip_string(qp->remote_ip) << "/" << hex(qp->attr.dest_qp_num) << " next_psn=" << hex(qp->next_psn)
        << " una_psn=" << hex(qp->una_psn) << " expected_psn=" << hex(qp->epsn);
    s << " retransmits=" << qp->counters.retransmits << " rnr_naks=" << qp->counters.rnr_naks_received << "\n";
  }
  return s.str();
}

}  // namespace simnic::core
