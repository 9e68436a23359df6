// One simulated RNIC: its object tables, the verbs the control socket serves, and the data
// path (requester, responder, completer). Pure: every effect on the world goes through the
// interfaces in env.h, and time comes in as an argument, so tests drive it deterministically.
//
// The implementation is split by responsibility, like rxe: device.cc (what is the device:
// attributes, contexts, queue memory, status), objects/tables.h (the object tables), the
// verbs by object (objects/pd_mr.cc, objects/cq.cc, objects/srq.cc, objects/qp.cc, xrc.cc,
// multicast.cc), qp_modify.cc (state machine), requester.cc, responder.cc, completer.cc,
// ingress.cc (the one receive path), completion.cc (CQEs, flush).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <infiniband/verbs.h>

#include "simnic/core/cm/agent.h"
#include "simnic/core/engines/completer.h"
#include "simnic/core/engines/congestion.h"
#include "simnic/core/engines/congestion_hooks.h"
#include "simnic/core/engines/datagram.h"
#include "simnic/core/engines/engine_steps.h"
#include "simnic/core/engines/peer_progress.h"
#include "simnic/core/engines/receive_queue.h"
#include "simnic/core/engines/requester.h"
#include "simnic/core/engines/responder.h"
#include "simnic/core/env.h"
#include "simnic/core/errors.h"
#include "simnic/core/memory/device_memory.h"
#include "simnic/core/memory/memory_access.h"
#include "simnic/core/memory/mr_verbs.h"
#include "simnic/core/objects/key_source.h"
#include "simnic/core/objects/multicast.h"
#include "simnic/core/objects/objects.h"
#include "simnic/core/objects/tables.h"
#include "simnic/core/objects/window_binding.h"
#include "simnic/core/observe/counters.h"
#include "simnic/core/observe/drop_reasons.h"
#include "simnic/core/observe/log_limiter.h"
#include "simnic/core/observe/trace.h"
#include "simnic/core/port/gid_table.h"
#include "simnic/core/wire/ingress.h"
#include "simnic/core/wire/transmit.h"
#include "simnic/proto/packet.h"

namespace simnic::core {

struct DeviceConfig {
  std::string name = "simnic0";
  uint32_t ipv4 = 0x7f000001;  // host order
  uint16_t udp_port = 4791;
  uint32_t mtu_bytes = 4096;       // the port's active MTU
  uint32_t window_packets = 1024;  // unacknowledged packets per QP before the requester waits
  uint64_t key_seed = 0;           // 0: keys and QPNs from getrandom; else a reproducible sequence
  // Link layer and addressing (docs/link-layer.md). RoCE by default; in InfiniBand mode the
  // port has a LID and address vectors may name peers by DLID alone (the wire stays RoCEv2).
  bool infiniband = false;
  uint16_t lid = 0;  // IB mode: this port's LID and the subnet manager's
  uint16_t sm_lid = 0;
  GidTableKind gid_table = GidTableKind::kSimple;  // RoCE mode: whose GID table to list
  uint32_t netdev_ifindex = 0;                     // the interface holding ipv4 (ibv_query_gid_ex's ndev_ifindex)
  // Unacknowledged bytes per QP (with window_packets: the smaller, at least 4 packets).
  uint32_t window_bytes = 1u << 20;
  // Bytes in flight towards one peer NIC, all QPs together (congestion.h): below what the
  // peer's UDP receive buffer holds, so that no RC QP loses packets when none are injected.
  // 0: kDefaultPeerWindow, which simnicd lowers to a quarter of its socket's receive buffer.
  uint64_t peer_window_bytes = 0;
  static constexpr uint64_t kDefaultPeerWindow = 4u << 20;
};

// Limits simnicd reports in ibv_query_device and enforces.
struct DeviceLimits {
  static constexpr uint32_t kMaxQp = 4096;
  static constexpr uint32_t kMaxQpWr = 16384;
  static constexpr uint32_t kMaxCq = 4096;
  // What a ConnectX (mlx5) reports, 2^22 - 1: libfabric's ofi_rxm asks 1024 x FI_UNIVERSE_SIZE
  // (256) entries. A ring is a memfd whose pages the kernel gives as CQEs first touch them;
  // its full size (56 bytes an entry: 224 MiB here) is charged to the queue memory budgets.
  static constexpr int kMaxCqe = (1 << 22) - 1;
  static constexpr uint32_t kMaxMr = 65536;
  static constexpr uint64_t kMaxMrSize = 1ull << 40;
  static constexpr uint32_t kMaxPd = 4096;
  static constexpr uint32_t kMaxSrq = 1024;
  static constexpr uint32_t kMaxSrqWr = 16384;
  static constexpr uint32_t kMaxRdAtomic = 16;
  static constexpr uint32_t kMaxAh = 32767;  // rxe's RXE_MAX_AH ((1 << 15) - 1, rxe_param.h)
  static constexpr uint32_t kMaxMw = 65536;
  static constexpr uint64_t kMaxQueueBytes = 4ull << 30;  // rings and per-WQE state, all contexts
  // Multicast (ibv_attach_mcast): groups with a member on this NIC (each is one joined IP
  // group, one socket in simnicd), QPs attached to one group, attachments on the whole NIC.
  static constexpr uint32_t kMaxMcastGrp = 256;
  static constexpr uint32_t kMaxMcastQpAttach = 64;
  static constexpr uint32_t kMaxTotalMcastQpAttach = 4096;
};

// What one context (one ibv_open_device) may hold. Objects: no limit of its own - all the NIC
// has, as on rxe, whose pools are per device (rxe_pool.c): a program can create what
// ibv_query_device advertises, and the NIC's totals (DeviceLimits) bound them all
// (Device::check_room). Queue memory: a quarter of the NIC's, so that one runaway program
// cannot take all of simnicd's memory from the others. Past a limit the verb fails with ENOMEM,
// as a kernel driver's does when its pool or memory runs out.
struct ContextLimits {
  static constexpr size_t kMaxChannel = 2048;  // completion channels: the NIC has no limit of its own
  static constexpr uint64_t kMaxQueueBytes = DeviceLimits::kMaxQueueBytes / 4;
};
static_assert(ContextLimits::kMaxQueueBytes == 1ull << 30);

// What one user (uid, from SO_PEERCRED) may hold on a NIC that several users' programs use
// (issue 29): alone, everything the NIC has, as above; while another user has a context open
// on the NIC, at most 3/4 of each of the NIC's totals of PDs, MRs, CQs, QPs and AHs, so that
// the last quarter stays for the others whatever one user's programs do. Counted over all of
// the user's contexts, so a second context does not double a share.
struct UserShares {
  static constexpr size_t share_of(size_t total) { return total - total / 4; }
};

// The object tables are a private base: the verbs and the engines name them directly
// (qps_, mrs_, ...), and outside Device only object_counts() shows them.
class Device : private ObjectTables {
 public:
  Device(DeviceConfig config, HostMemory& memory, PacketSink& wire, ShmAllocator& shm, Notifier& notifier,
         Logger& logger);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceConfig& config() const { return config_; }
  const DeviceCounters& counters() const { return counters_; }
  // The time of the event being handled (simulated ns); control verbs use the last one.
  void set_time(uint64_t now) {
    now_ = now;
    tracer_.set_time(now);
  }
  Tracer& tracer() { return tracer_; }

  // --- Attributes ---
  ibv_device_attr device_attr() const;
  ibv_port_attr port_attr() const;
  ibv_gid gid0() const;  // the IPv4-mapped address, RoCE v2
  // address.cc: the GID table and how address vectors reach a peer.
  const GidTable& gid_table() const { return gids_; }
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
  uint64_t node_guid_be() const;

  // --- Contexts (one per control connection) ---
  Context* open_context(pid_t pid, uid_t uid, int doorbell_fd, int async_fd);
  void close_context(Context* ctx);  // destroys everything it created
  size_t context_count() const { return contexts_.size(); }
  ObjectCounts object_counts() const { return counts(); }
  // device.cc: what uverbs answers for a handle a destroy verb cannot use (rdma_core.c,
  // rdma_lookup_get_uobject): 0 when `handle` names an object of `kind` that `ctx` may use,
  // ENOENT when it names none of the context's objects, EINVAL when it names one of another kind.
  enum class HandleKind { kPd, kMr, kMw, kCq, kSrq, kQp, kAh, kXrcd };
  int check_handle(Context* ctx, HandleKind kind, uint32_t handle);
  // device.cc: the completion vectors ibv_context.num_comp_vectors offers: one per CPU, as rxe.
  static uint32_t num_comp_vectors();

  // --- Verbs; each returns 0 or a positive errno, as the kernel's uverbs would ---
  // objects/pd_mr.cc: PDs, MRs, AHs
  int alloc_pd(Context* ctx, uint32_t* handle);
  int dealloc_pd(Context* ctx, uint32_t handle);
  int reg_mr(Context* ctx, uint32_t pd, uint64_t addr, uint64_t length, uint64_t iova, uint32_t access, Mr** out);
  int dereg_mr(Context* ctx, uint32_t handle);
  int create_ah(Context* ctx, uint32_t pd, const ibv_ah_attr& attr, uint32_t* handle);
  int destroy_ah(Context* ctx, uint32_t handle);
  // memory_window.cc
  int alloc_mw(Context* ctx, uint32_t pd, ibv_mw_type type, Mw** out);
  int dealloc_mw(Context* ctx, uint32_t handle);
  // objects/cq.cc: completion channels, CQs
  int create_channel(Context* ctx, int fd, uint32_t* handle);  // takes ownership of fd
  int destroy_channel(Context* ctx, uint32_t handle);
  int create_cq(Context* ctx, int cqe, uint32_t channel, Cq** out);
  int destroy_cq(Context* ctx, uint32_t handle);
  // ibv_resize_cq: a new ring of at least `cqe` entries takes the CQ's pending completions in
  // order. The caller (the shim) must not poll the CQ until it has mapped the new ring.
  int resize_cq(Context* ctx, uint32_t handle, int cqe, Cq** out);
  // objects/srq.cc
  int create_srq(Context* ctx, uint32_t pd, const ibv_srq_attr& attr, Srq** out);
  int modify_srq(Context* ctx, uint32_t handle, const ibv_srq_attr& attr, int mask);
  int query_srq(Context* ctx, uint32_t handle, ibv_srq_attr* attr);
  int destroy_srq(Context* ctx, uint32_t handle);
  // objects/qp.cc (create, destroy), qp_modify.cc (modify, query)
  int create_qp(Context* ctx, const ibv_qp_init_attr& init, uint32_t pd, uint32_t send_cq, uint32_t recv_cq,
                uint32_t srq, Qp** out);
  int modify_qp(Context* ctx, uint32_t handle, const ibv_qp_attr& attr, int mask, uint64_t now);
  int query_qp(Context* ctx, uint32_t handle, ibv_qp_attr* attr, Qp** qp);
  int destroy_qp(Context* ctx, uint32_t handle);
  // multicast.cc: UD QPs join and leave multicast groups (IBA 10.5), with rdma-core's errnos.
  int attach_mcast(Context* ctx, uint32_t qp, const ibv_gid& gid, uint16_t lid);
  int detach_mcast(Context* ctx, uint32_t qp, const ibv_gid& gid, uint16_t lid);

  // --- XRC (xrc.cc; IBA Annex A14) ---
  // ibv_open_xrcd: with a file (has_file: the file's device and inode, as simnicd saw them),
  // the domain every context of this NIC opening that file shares, made if O_CREAT allows;
  // without a file, a new domain of its own. *handle names it for this context.
  int open_xrcd(Context* ctx, bool has_file, uint64_t dev, uint64_t ino, int oflags, uint32_t* handle);
  int close_xrcd(Context* ctx, uint32_t handle);
  // ibv_create_srq_ex with IBV_SRQT_XRC: receives complete on `cq`; (*out)->srqn is its number.
  int create_xrc_srq(Context* ctx, uint32_t pd, uint32_t xrcd, uint32_t cq, const ibv_srq_attr& attr, Srq** out);
  // ibv_create_qp_ex with IBV_QPT_XRC_SEND (an INI QP: pd and send_cq) or IBV_QPT_XRC_RECV (a
  // TGT QP: xrcd only).
  int create_xrc_qp(Context* ctx, const ibv_qp_init_attr& init, uint32_t pd, uint32_t send_cq, uint32_t xrcd, Qp** out);
  // ibv_open_qp: another handle on TGT QP `qpn` of XRC domain `xrcd`, which ctx has open. The QP
  // lives while any handle on it does: its creator's destroy hands it to an opener.
  int open_xrc_qp(Context* ctx, uint32_t xrcd, uint32_t qpn, uint32_t* handle, Qp** out);

  // Why the last refused verb was refused ("" if it gave no reason); taking it clears it.
  std::string take_refusal() { return std::exchange(refusal_, {}); }
  // Refuses a verb with `err`, keeping `why` for the application (take_refusal).
  int refuse(int err, std::string why) {
    refusal_ = std::move(why);
    return err;
  }
  // Why QP `qpn` of `ctx` completed work requests in error: 0 and *why, or EINVAL.
  int explain_qp(Context* ctx, uint32_t qpn, std::string* why);
  // What the NIC noticed about ctx's QPs since the last call, one per line; clears it.
  std::string take_notices(Context* ctx);

  // --- Data path: one-line hand-offs to the engines (docs/architecture.md, "Engines") ---
  // The application rang its doorbell `rings` times since the NIC last looked (an eventfd
  // adds them up): look for new WQEs on its QPs.
  void on_doorbell(Context* ctx, uint64_t now, uint64_t rings = 1) { requester_.on_doorbell(ctx, now, rings); }
  // A UDP datagram arrived on port 4791, sent to `dst_ip`: this NIC's address (0 says the
  // same) or an IP multicast group the port joined.
  // `tos` is the datagram's IPv4 TOS byte (its GRH traffic class), as the socket received it.
  void on_packet(uint32_t src_ip, uint16_t src_port, std::span<const uint8_t> bytes, uint64_t now, uint32_t dst_ip = 0,
                 uint8_t tos = 0) {
    ingress_.on_packet(src_ip, src_port, bytes, now, dst_ip, tos);
  }
  // Time passed: fire due timers (ACK timeout, RNR wait).
  void on_timer(uint64_t now) { completer_.on_timer(now); }
  // The earliest timer deadline, 0 if none.
  uint64_t next_deadline() const { return completer_.next_deadline(); }
  // True when an engine stopped early to let the event loop breathe (a long READ reply).
  bool has_pending_work() const { return requester_.has_pending_work(); }
  // Packets an engine may send per turn; step mode sets 1 so a user sees them one by one.
  void set_burst(uint32_t packets) { requester_.set_burst(packets); }
  void run_pending(uint64_t now) { requester_.run_pending(now); }
  // Makes the writes queued into pinned MRs (HostMemory::write_later). simnicd calls it at the
  // end of every event; the NIC calls it itself before a CQE, an ACK, or any other access to
  // application memory, so nothing can report bytes that have not landed.
  void flush_dma_writes() { dma_.flush_dma_writes(); }
  const CongestionControl& congestion() const { return congestion_.control(); }
  // Caps the bytes in flight towards each peer (simnicd: below its UDP receive buffer).
  void set_peer_window_cap(uint64_t bytes) { congestion_.set_cap(bytes); }

  // The connection manager (rdma_cm) of this NIC: CM MADs on QP1 go to it.
  CmAgent& cm() { return *cm_; }

  // For `simnic status` and tests.
  std::string status_text() const;
  Qp* find_qp_by_qpn(uint32_t qpn);
  const std::map<uint32_t, std::unique_ptr<Qp>>& qps() const { return qps_; }

 private:
  // device.cc
  uint32_t new_qpn();
  uint32_t new_mr_key();
  uint32_t new_mw_index();
  // The object `handle` names, if it belongs to `ctx` (a context never reaches another's).
  // PDs and MRs are also reachable from the contexts that imported their creator's
  // (ibv_import_device; shares()).
  template <class T>
  T* owned(std::map<uint32_t, std::unique_ptr<T>>& table, Context* ctx, uint32_t handle) {
    auto it = table.find(handle);
    constexpr bool kShared = std::is_same_v<T, Pd> || std::is_same_v<T, Mr>;
    if (it == table.end() || (it->second->ctx != ctx && !(kShared && shares(it->second->ctx, ctx)))) return nullptr;
    return it->second.get();
  }
  const Mr* find_mr_by_key(uint32_t key) const;
  bool queue_memory_fits(const Context* ctx, uint64_t bytes) const;  // under the context's and the NIC's limits
  bool charge_queue_memory(Context* ctx, uint64_t bytes);            // false (nothing charged) past a limit
  void refund_queue_memory(Context* ctx, uint64_t bytes);
  // A queue's shared memory: `charged` bytes counted against ctx and the NIC (the rings and the
  // NIC's own per-WQE state), `bytes` of them mapped. 0, ENOMEM past a limit, or the
  // allocator's errno; nothing is charged then.
  int map_queue_memory(Context* ctx, uint64_t charged, size_t bytes, const char* name, ShmRegion* out);
  void unmap_queue_memory(Context* ctx, uint64_t charged, ShmRegion& mem);
  // objects/qp.cc: what RC, UC, UD and XRC QPs share
  int check_qp_request(Context* ctx, const ibv_qp_init_attr& init, bool has_srq);
  // objects/shares.cc: room for one more object of a kind on the NIC: 0, or ENOMEM with the
  // reason when the NIC holds all `total` of them (`in_use`), or when ctx's user already holds
  // its UserShares of them (`held`: that kind's handles in a context) while another user is here.
  int check_room(const Context* ctx, size_t in_use, std::vector<uint32_t> Context::*held, size_t total,
                 const char* objects, const char* attr);
  int check_user_share(const Context* ctx, std::vector<uint32_t> Context::*held, size_t total, const char* objects,
                       const char* attr);
  int map_qp_queues(Context* ctx, Qp& qp, const QpLayout& layout);
  Qp* add_qp(std::unique_ptr<Qp> qp);
  void remove_qp(Context* ctx, Qp& qp);
  void log(LogLevel level, const std::string& line);
  // A complaint that may repeat in a storm: written the first time, then at most once a second
  // per `what` and QP, with the count held back. `line` is built only when written.
  // Past that, all such lines share a budget per `what` and one for all (LogBudget), so a
  // sweep of QPNs cannot fill the disk; a summary says how many were suppressed.
  template <class MakeLine>
  void log_limited(LogLevel level, const char* what, uint32_t qpn, MakeLine&& line) {
    log_budget_summary();
    if (!log_budget_.has_room(what, now_)) return log_budget_.suppressed(what);
    uint64_t held = 0;
    if (!log_limiter_.allow(std::string(what) + ":" + std::to_string(qpn), now_, &held)) return;
    log_budget_.spend(what);
    std::string text = line();
    notice(qpn, text);
    if (held) text += " (" + std::to_string(held) + " more like this since the last report)";
    log(level, text);
  }
  // Counts, logs (if its row says so) and traces one dropped packet by its row of the drop
  // table (drop_reasons.h); `line` says what was wrong with this packet, built only when it is
  // logged or traced. Returns the pkt_drop event, for the caller to add fields to.
  template <class MakeLine>
  TraceEvent drop(Drop why, uint32_t qpn, MakeLine&& line) {
    const DropReason& r = drop_reason(why);
    if (r.counter) ++(counters_.*r.counter);
    if (r.logged) log_limited(r.level, r.name, qpn, line);
    return trace_drop(tracer_, why, qpn, tracer_.on() ? line() : std::string());
  }
  // The program that owns QP `qpn` is told too, when it next asks (a bounded queue).
  void notice(uint32_t qpn, const std::string& text);
  void log_budget_summary();  // ingress.cc: the LogBudget's summary line, when one is due

  // qp_modify.cc
  int check_qp_attr_values(const Qp& qp, const ibv_qp_attr& attr, int mask, std::string* why);
  void apply_qp_attr(Qp& qp, const ibv_qp_attr& attr, int mask, uint64_t now);
  void set_qp_state(Qp& qp, ibv_qp_state state, const char* cause = "modify_qp", uint32_t mask = 0);
  void reset_qp(Qp& qp);
  void check_sq_drained(Qp& qp);  // SQD: ends the drain and notifies once nothing is in flight

  // memory_window.cc
  Mw* find_mw_by_rkey_index(uint32_t rkey) const;  // the window whose index `rkey` carries

  // xrc.cc
  Xrcd* opened_xrcd(Context* ctx, uint32_t handle);  // an XRCD ctx has open, or nullptr
  void xrcd_put(Xrcd* xrcd);                         // frees it once nobody opens or uses it
  void close_xrcds(Context* ctx);                    // a closing context lets go of its XRCDs
  void xrc_release_srq(Srq& srq);                    // an XRC SRQ is being destroyed
  int destroy_xrc_qp(Context* ctx, Qp& qp);
  Qp* opened_qp(Context* ctx, uint32_t handle);        // a TGT QP ctx holds through ibv_open_qp
  int close_opened_qp(Context* ctx, uint32_t handle);  // EINVAL when handle is no such open
  bool hand_over_tgt_qp(Qp& qp);                       // to another context's open, if any

  // multicast.cc (McastGroup: objects/tables.h)
  int check_mcast_attach(const Qp& qp, const ibv_gid& gid, const McastGroup* group);  // 0 or the errno
  void detach_qp_from(Qp& qp, const GidBytes& gid);
  void detach_all_mcast(Qp& qp);  // a dying context's QP leaves every group

  // completion.cc
  void push_cqe(Cq& cq, const ibv_wc& wc, bool solicited);
  void flush_qp(Qp& qp);  // ERR state: complete everything posted with WR_FLUSH_ERR
  void flush_sq(Qp& qp);  // SQE state: the send queue only
  void send_async_event(Context* ctx, ibv_event_type type, uint32_t handle);

  // trace.cc helpers
  void trace_new_wqes(Qp& qp);
  void trace_qp_lifecycle(TraceKind kind, const Qp& qp);
  std::string qp_attr_json(const Qp& qp) const;
  void trace_mr_create(const Mr& mr);  // at registration, and in a snapshot
  void trace_mw_create(const Mw& mw);

 public:
  // Emits the NIC's current objects as events, for a trace that starts now.
  void trace_snapshot();
  // Reports the WQEs posted since the NIC last looked (receives ring no doorbell): for a viewer.
  void trace_posted_wqes() {
    if (!tracer_.on()) return;
    for (auto& [h, qp] : qps_) trace_new_wqes(*qp);
  }

 private:
  // address.cc
  int check_sgid_index(uint8_t index, std::string* why) const;
  int resolve_dgid(const ibv_gid& dgid, uint32_t* ipv4, std::string* why) const;
  int resolve_dlid(uint16_t dlid, uint32_t* ipv4, std::string* why);

  DeviceConfig config_;
  GidTable gids_;
  LidDirectory* lids_ = nullptr;
  HostMemory& memory_;
  PacketSink& wire_;
  ShmAllocator& shm_;
  Notifier& notifier_;
  Logger& logger_;
  DeviceCounters counters_;
  Tracer tracer_;
  uint64_t now_ = 0;

  uint64_t queue_bytes_ = 0;  // charged to all contexts
  std::string refusal_;       // see take_refusal
  KeySource keys_;
  LogLimiter log_limiter_;
  LogBudget log_budget_;  // all log_limited lines together (issue 29 point 4)

  // The object tables: ObjectTables (objects/tables.h).
  std::unique_ptr<CmAgent> cm_;

 public:
  // context_page.cc: the page an idle ibv_poll_cq sleeps on (abi::ContextShared). Allocated on
  // the shim's first request (EALREADY after that); *page's memfd goes to the client.
  int map_context_page(Context* ctx, ShmRegion** page);

 private:
  void release_context_page(Context* ctx);
  // After a CQE of ctx's: the sequence moves on, and a poller asleep on it is woken.
  void note_cqe_written(Context* ctx);

  // --- Verbs completeness (issue 17): memory/rereg.cc, memory/dm.cc ---
 public:
  // ibv_rereg_mr: what req.flags names changes in place; handle and keys stay.
  int rereg_mr(Context* ctx, const MrRereg& req, Mr** out);
  // The NIC's clock (simulated ns) at the event being handled: CQE timestamps count in it.
  uint64_t now() const { return now_; }
  // Device memory (device_memory.h): a memfd of at least `length` bytes the caller maps.
  int alloc_dm(Context* ctx, uint64_t length, uint32_t log_align, Dm** out);
  int free_dm(Context* ctx, uint32_t handle);  // EBUSY while MRs over it remain
  int reg_dm_mr(Context* ctx, const DmMrReg& req, Mr** out);
  bool is_dm_mr(uint32_t mr_handle) const;
  // ibv_import_device (objects/import.cc): contexts that share PDs and MRs, as processes that
  // share one uverbs file do. set_ctl_fd_number: what the context's Hello said its socket's
  // descriptor number is; join_context: `holds(pid, fd)` says whether that descriptor of that
  // process is the socket the importer passed.
  void set_ctl_fd_number(Context* ctx, int fd) { ctl_fd_number_[ctx] = fd; }
  int join_context(Context* ctx, const std::function<bool(pid_t pid, int fd)>& holds);
  int import_pd(Context* ctx, uint32_t handle);
  int import_mr(Context* ctx, uint32_t handle, Mr** out);
  bool shares(const Context* owner, const Context* user) const;

 private:
  void leave_group(Context* ctx);  // a closing context hands what others still use to them
  int check_mr_access(uint32_t access);
  int check_mr_range(Context* ctx, uint64_t addr, uint64_t length, uint32_t access);
  int check_pinnable(Context* ctx, uint64_t addr, uint64_t length, uint32_t access);
  // A registration that passed its verb's checks becomes an MR with a fresh key.
  int add_mr(Context* ctx, Pd* pd, uint64_t addr, uint64_t length, uint64_t iova, uint32_t access, Mr** out);
  int reg_dm_range(Context* ctx, const DmMrReg& req, Mr** out);  // the MR of reg_dm_mr, length 0 too
  int check_rereg(Context* ctx, const Mr& mr, const MrRereg& req, Pd** new_pd);
  void forget_mr_in_engines(const Mr* mr) { responder_.forget_mr(mr); }  // what dereg_mr does to messages in flight
  void trace_mr_destroy(const Mr& mr);
  void free_dms(Context* ctx);
  std::map<uint32_t, std::unique_ptr<Dm>> dms_;
  std::map<uint32_t, uint32_t> dm_mrs_;  // MR handle -> the DM it lies in (entries of dead MRs are stale)
  uint64_t dm_bytes_ = 0;                // pages of device memory allocated, all contexts
  std::map<const Context*, int> ctl_fd_number_;
  std::map<const Context*, uint32_t> group_of_;  // contexts that share PDs and MRs: same group

  // --- On-demand paging (issue 17): memory/odp.cc ---
 public:
  // ibv_advise_mr: checks the advice, flags and every SGE; with IBV_ADVISE_MR_FLAG_FLUSH a
  // prefetch also checks that every page exists now. Nothing is pinned: there is nothing to fetch.
  // The arguments are ibv_advise_mr(3)'s: sge[0, num_sge), num_sge at most kMaxAdviseSge.
  int advise_mr(Context* ctx, uint32_t pd, uint32_t advice, uint32_t flags, const ibv_sge* sge, uint32_t num_sge);

 private:
  // ibv_reg_mr's range rules for an IBV_ACCESS_ON_DEMAND MR (explicit, or implicit: NULL, SIZE_MAX).
  int check_odp_range(uint64_t addr, uint64_t length, uint64_t iova);

  // --- The data path's units (docs/architecture.md, "Engines"), constructed in the order they
  // depend on each other; each unit's header says what it owns and whom it calls. A unit that
  // calls one constructed after it only keeps the reference while the Device is built.
  Transmit transmit_{*this};
  WindowBinding windows_{*this};
  MemoryAccess dma_{*this, windows_};
  ReceiveQueue recv_{*this, dma_};
  CongestionHooks congestion_{*this, requester_,
                              config_.peer_window_bytes ? config_.peer_window_bytes : DeviceConfig::kDefaultPeerWindow};
  Requester requester_{*this, transmit_, dma_, windows_, congestion_, completer_, responder_};
  Completer completer_{*this, requester_, dma_, congestion_};
  Responder responder_{*this, transmit_, dma_, recv_, windows_, requester_, completer_};
  DatagramReceiver datagram_{*this, recv_, responder_, ingress_};
  Ingress ingress_{*this, transmit_, requester_, completer_, responder_, datagram_};

  // What the verbs ask of the engines' state: one-line hand-offs.
  void unbind_mw(Mw& mw) { windows_.unbind_mw(mw); }
  void unbind_mws_of_qp(const Qp& qp) { windows_.unbind_mws_of_qp(qp); }  // a destroyed QP's type 2 windows
  bool group_ip_joined(uint32_t ip) const { return datagram_.group_ip_joined(ip); }
  void cc_forget(Qp& qp) { congestion_.forget(qp); }  // destroyed: its credit goes back to the peer

  // Parts of the NIC that use its shared helpers (issue 27 point 1; a later step narrows this)
  friend class Transmit;
  friend class Ingress;
  friend class WindowBinding;
  friend class MemoryAccess;
  friend class ReceiveQueue;
  friend class CongestionHooks;
  friend class Requester;
  friend class Completer;
  friend class Responder;
  friend class DatagramReceiver;
};

// The name rdma-core's ibv_wc_status_str gives a status (simnicd does not link libibverbs).
const char* wc_status_name(ibv_wc_status status);
const char* wc_opcode_name(ibv_wc_opcode opcode);
std::string access_string(uint32_t ibv_access_flags);  // "LOCAL_WRITE|REMOTE_READ"
// IBV_ACCESS_ON_DEMAND MRs: nothing pinned, a page is looked for at each access (memory/odp.cc).
bool is_odp_mr(const Mr& mr);
bool is_implicit_odp_mr(const Mr& mr);  // over the whole address space: ibv_reg_mr(pd, NULL, SIZE_MAX, ...)
const char* wr_opcode_name(uint32_t opcode);

// Bytes of an ibv_mtu enum (0 if invalid) and back.
uint32_t mtu_to_bytes(ibv_mtu mtu);
ibv_mtu bytes_to_mtu(uint32_t bytes);

}  // namespace simnic::core
