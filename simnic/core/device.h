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
#include "simnic/core/engines/completions.h"
#include "simnic/core/engines/congestion.h"
#include "simnic/core/engines/engine_steps.h"
#include "simnic/core/engines/peer_progress.h"
#include "simnic/core/env.h"
#include "simnic/core/errors.h"
#include "simnic/core/memory/device_memory.h"
#include "simnic/core/memory/mr_verbs.h"
#include "simnic/core/objects/key_source.h"
#include "simnic/core/objects/multicast.h"
#include "simnic/core/objects/objects.h"
#include "simnic/core/objects/qp_states.h"
#include "simnic/core/objects/tables.h"
#include "simnic/core/observe/counters.h"
#include "simnic/core/observe/drop_reasons.h"
#include "simnic/core/observe/journal.h"
#include "simnic/core/observe/trace.h"
#include "simnic/core/observe/trace_points.h"
#include "simnic/core/port/gid_table.h"
#include "simnic/core/wire/ud_probe_guard.h"
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
// (qps_, mrs_, ...); outside Device, tables() shows them with their lookups.
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

  // --- The parts every engine and verb shares, one accessor each ---
  // The object tables, with the lookups and the keys of new objects (objects/tables.h).
  ObjectTables& tables() { return *this; }
  const ObjectTables& tables() const { return *this; }
  Journal& journal() { return journal_; }                // log, drops, notices, refusals (observe/journal.h)
  TracePoints& trace_points() { return trace_points_; }  // objects in trace events (observe/trace_points.h)
  Completions& completions() { return completions_; }    // CQEs, flushes, async events (engines/completions.h)
  QpStates& qp_states() { return qp_states_; }           // state changes (objects/qp_states.h)

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

  // Why QP `qpn` of `ctx` completed work requests in error: 0 and *why, or EINVAL.
  int explain_qp(Context* ctx, uint32_t qpn, std::string* why);

  // --- Data path ---
  // The application rang its doorbell `rings` times since the NIC last looked (an eventfd
  // adds them up): look for new WQEs on its QPs.
  void on_doorbell(Context* ctx, uint64_t now, uint64_t rings = 1);
  // A UDP datagram arrived on port 4791, sent to `dst_ip`: this NIC's address (0 says the
  // same) or an IP multicast group the port joined.
  // `tos` is the datagram's IPv4 TOS byte (its GRH traffic class), as the socket received it.
  void on_packet(uint32_t src_ip, uint16_t src_port, std::span<const uint8_t> bytes, uint64_t now, uint32_t dst_ip = 0,
                 uint8_t tos = 0);
  // Time passed: fire due timers (ACK timeout, RNR wait).
  void on_timer(uint64_t now);
  // The earliest timer deadline, 0 if none.
  uint64_t next_deadline() const;
  // True when an engine stopped early to let the event loop breathe (a long READ reply).
  bool has_pending_work() const { return !busy_qps_.empty(); }
  // Packets an engine may send per turn; step mode sets 1 so a user sees them one by one.
  void set_burst(uint32_t packets) { burst_ = packets ? packets : 1; }
  void run_pending(uint64_t now);

  // The connection manager (rdma_cm) of this NIC: CM MADs on QP1 go to it.
  CmAgent& cm() { return *cm_; }

  // For `simnic status` and tests.
  std::string status_text() const;
  const std::map<uint32_t, std::unique_ptr<Qp>>& qps() const { return qps_; }

 private:
  // device.cc
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

  // qp_modify.cc
  int check_qp_attr_values(const Qp& qp, const ibv_qp_attr& attr, int mask, std::string* why);
  void apply_qp_attr(Qp& qp, const ibv_qp_attr& attr, int mask, uint64_t now);

  // memory_window.cc
  // Executes a BIND_MW or LOCAL_INV WQE; IBV_WC_SUCCESS or the status it completes with.
  ibv_wc_status execute_local_wqe(Qp& qp, const abi::SendWqe& w, std::string* why);
  void bind_mw(Qp& qp, const abi::SendWqe& w, Mw& mw, const Mr* mr);  // checked: binds it
  // LOCAL_INV, or SEND_WITH_INV at the responder: frees the type 2 window `rkey` names.
  bool invalidate_mw(Qp& qp, uint32_t rkey, const char* by, std::string* why);
  const Mr* check_mw_access(const Qp& qp, const Mw& mw, uint32_t rkey, uint64_t va, uint64_t len, uint32_t access,
                            uint64_t* mr_va, std::string* why) const;
  void unbind_mw(Mw& mw);
  void unbind_mws_of_qp(const Qp& qp);  // a destroyed QP's type 2 windows become free

  // requester.cc
  enum class WqeStart { kWait, kDoneLocally, kBegun };
  void requester_run(Qp& qp, uint64_t now);
  void requester_idle(Qp& qp);                       // out of the busy set unless the responder owes answers
  bool requester_send_packet(Qp& qp, uint64_t now);  // false when nothing more may go now
  bool requester_may_send(Qp& qp);
  uint32_t request_headers(const Qp& qp, const SendWqeState& st, uint32_t i, proto::PacketHeaders& h);
  bool requester_packet_sent(Qp& qp, const SendWqeState& st, uint32_t mask, uint64_t now);
  const abi::SendWqe& fetch_send_wqe(Qp& qp, uint32_t index);
  WqeStart requester_start_wqe(Qp& qp, SendWqeState& st);
  // Whether the requester can carry the WQE out; if not, *err and *why say why.
  bool check_send_wqe(const Qp& qp, const abi::SendWqe& w, uint64_t* total, uint32_t* dst_ip, Error* err,
                      std::string* why);
  bool requester_local_op(Qp& qp, const abi::SendWqe& w, SendWqeState& st);
  bool ud_destination(const Qp& qp, const abi::SendWqe& w, uint32_t* dst_ip, std::string* why);
  void go_back_n(Qp& qp, uint32_t psn, uint64_t now, const char* cause);

  // engine_events.cc: an engine schedules another on a QP; the event entry points run it.
  enum WorkBits : uint8_t { kWorkRequester = 1 };
  void schedule(Qp& qp, uint8_t work);
  void run_scheduled(uint64_t now);
  std::vector<uint32_t> scheduled_;  // QPNs whose work flag is set

  // completer_timers.cc: the ACK timeout and the RNR wait
  static uint64_t rnr_timer_ns(uint32_t timer_field);  // IBA Table 45
  void arm_ack_timer(Qp& qp, uint64_t now);
  void stop_ack_timer(Qp& qp);
  void arm_rnr_timer(Qp& qp, uint32_t psn, uint32_t timer_field, uint64_t now);
  void completer_timer_fired(Qp& qp, uint64_t now);
  // An ACK timeout counts a lost packet, not a busy host (completer_timers.cc): how far each
  // peer NIC has read what this NIC sent it, by the peer's IPv4 address.
  std::unordered_map<uint32_t, PeerProgress> peer_progress_;
  void note_request_sent(Qp& qp, SendWqeState& st, uint32_t pkt_in_wqe, bool last_packet, SendOutcome outcome);
  void note_peer_answered(Qp& qp, const SendWqeState& st, uint64_t now);
  AckWait judge_ack_wait(Qp& qp, uint64_t now);
  AckWait judge_local_peer(const Qp& qp, const PeerProgress& peer, uint64_t now) const;

  // ingress.cc
  void receive_packet(uint32_t src_ip, uint16_t src_port, std::span<const uint8_t> bytes, uint64_t now,
                      uint32_t dst_ip);
  bool qp_accepts(Qp& qp, const proto::ParsedPacket& pkt, uint32_t src_ip);  // false: dropped, counted
  // ingress.cc, issue 29: false when the packet is dropped (counted, logged within budget).
  bool from_nic_port(const proto::ParsedPacket& pkt, uint32_t src_ip, uint16_t src_port);
  bool ud_guard_admits(const proto::ParsedPacket& pkt, uint32_t src_ip, uint64_t now);
  void ud_missed(uint32_t qpn, uint64_t now);

  // responder.cc
  void responder_receive(Qp& qp, const proto::ParsedPacket& pkt, uint64_t now);
  RespStep resp_check_psn(Qp& qp, const proto::ParsedPacket& pkt);
  RespStep resp_duplicate(Qp& qp, const proto::ParsedPacket& pkt);
  RespStep resp_execute(Qp& qp, const proto::ParsedPacket& pkt);
  void respond_send(Qp& qp, const proto::ParsedPacket& pkt);
  bool resp_begin_send(Qp& qp, const proto::ParsedPacket& pkt);
  void send_rnr_nak(Qp& qp, uint32_t psn, const char* what = "a SEND");
  void complete_send_recv(Qp& qp, const proto::ParsedPacket& pkt);
  void respond_write(Qp& qp, const proto::ParsedPacket& pkt);
  bool resp_check_write(Qp& qp, const proto::ParsedPacket& pkt);
  bool resp_take_write_imm_wqe(Qp& qp, const proto::ParsedPacket& pkt);
  Error write_rkey_error(const Qp& qp) const;
  bool resp_write_payload(Qp& qp, const proto::ParsedPacket& pkt);
  void respond_read(Qp& qp, const proto::ParsedPacket& pkt, bool duplicate);
  void respond_atomic(Qp& qp, const proto::ParsedPacket& pkt, bool duplicate);
  // RDMA ATOMIC WRITE (IBA Annex A19), responder.cc.
  void respond_atomic_write(Qp& qp, const proto::ParsedPacket& pkt, bool duplicate);
  const Mr* resp_check_atomic_write(Qp& qp, const proto::ParsedPacket& pkt, uint64_t* mr_va);
  void send_atomic_write_ack(Qp& qp, uint32_t psn);
  bool send_read_responses(Qp& qp, uint32_t budget);  // true when all sent
  void send_ack(Qp& qp, uint8_t syndrome, uint32_t psn);
  void send_answer_in_order(Qp& qp, const proto::PacketHeaders& h);  // behind owed READ responses
  void send_answer_now(Qp& qp, const proto::PacketHeaders& h);
  size_t rd_atomic_owed(const Qp& qp) const;
  void responder_error(Qp& qp, Error e, uint32_t psn, const std::string& detail);
  void complete_recv_in_error(Qp& qp, ibv_wc_status status);  // the receive WQE in progress
  bool take_recv_wqe(Qp& qp, RecvInProgress* out);
  struct RecvQueue {
    abi::RingControl* ring;
    abi::RecvWqe* slots;
    uint32_t entries;
  };
  RecvQueue recv_queue(Qp& qp);
  bool peek_recv_wqe(Qp& qp, RecvInProgress* out);  // the next receive WQE, left posted
  void consume_recv_wqe(Qp& qp);                    // takes the WQE peek_recv_wqe saw
  const Pd* recv_pd(const Qp& qp, const RecvInProgress& r) const;
  int scatter_recv(const Qp& qp, const RecvInProgress& r, uint32_t offset, const uint8_t* src, uint32_t len,
                   std::string* why);
  static Error recv_scatter_error(int e);
  void raise_responder_async_error(Qp& qp, const ErrorInfo& err);
  bool can_receive(Qp& qp);  // false (counted, traced) in RESET, INIT and ERR
  bool uc_accept(Qp& qp, const proto::ParsedPacket& pkt);
  void uc_discard(Qp& qp, uint32_t psn, const std::string& why);
  void uc_abandon_message(Qp& qp);

  // xrc.cc
  Xrcd* opened_xrcd(Context* ctx, uint32_t handle);  // an XRCD ctx has open, or nullptr
  void xrcd_put(Xrcd* xrcd);                         // frees it once nobody opens or uses it
  void close_xrcds(Context* ctx);                    // a closing context lets go of its XRCDs
  void xrc_receive(Qp& qp, const proto::ParsedPacket& pkt, uint64_t now);
  bool xrc_route(Qp& tgt, const proto::ParsedPacket& pkt);  // false: refused (NAK sent)
  void xrc_release_srq(Srq& srq);                           // an XRC SRQ is being destroyed
  int destroy_xrc_qp(Context* ctx, Qp& qp);
  Qp* opened_qp(Context* ctx, uint32_t handle);        // a TGT QP ctx holds through ibv_open_qp
  int close_opened_qp(Context* ctx, uint32_t handle);  // EINVAL when handle is no such open
  bool hand_over_tgt_qp(Qp& qp);                       // to another context's open, if any

  // datagram.cc: UD receive (one packet is one message; no ACK, no RNR, no PSN order)
  void respond_ud(Qp& qp, const proto::ParsedPacket& pkt, uint32_t src_ip, size_t udp_len, uint32_t dst_ip);
  int scatter_ud_grh(const Qp& qp, const RecvInProgress& r, uint32_t src_ip, uint32_t dst_ip, size_t udp_len,
                     std::string* why);
  void ud_drop_too_long(Qp& qp, const abi::RecvWqe& wqe, uint32_t len);

  // multicast.cc (McastGroup: objects/tables.h)
  int check_mcast_attach(const Qp& qp, const ibv_gid& gid, const McastGroup* group);  // 0 or the errno
  bool group_ip_joined(uint32_t ip) const;
  void receive_multicast(const proto::ParsedPacket& pkt, uint32_t src_ip, uint32_t group_ip, size_t udp_len);
  std::vector<Qp*> mcast_members(uint32_t group_ip);  // attached to any group of that IP, once each
  void detach_qp_from(Qp& qp, const GidBytes& gid);
  void detach_all_mcast(Qp& qp);  // a dying context's QP leaves every group

  // completer.cc
  bool ack_msn_plausible(const Qp& qp, uint32_t psn, uint32_t msn, bool is_nak) const;
  void completer_receive(Qp& qp, const proto::ParsedPacket& pkt, uint64_t now);
  struct CompletionWork {  // one response on its way through the completer's steps
    Qp& qp;
    const proto::ParsedPacket& pkt;
    uint64_t now;
    SendWqeState* wqe = nullptr;  // the READ/atomic it answers
  };
  CompStep completer_step(CompletionWork& c, CompStep step);
  CompStep comp_check_state(CompletionWork& c);
  CompStep comp_check_psn(CompletionWork& c);
  CompStep comp_find_wqe(CompletionWork& c);
  CompStep comp_atomic_ack(CompletionWork& c);
  CompStep comp_read_data(CompletionWork& c);
  CompStep comp_read_atomic_done(CompletionWork& c);
  CompStep comp_check_msn(CompletionWork& c);
  CompStep comp_rnr_nak(CompletionWork& c);
  CompStep comp_nak(CompletionWork& c);
  void complete_acked(Qp& qp, uint32_t psn, uint64_t now);  // all WQEs ending at or before psn
  void complete_send_wqe(Qp& qp, ibv_wc_status status);     // the oldest SQ WQE
  void requester_error(Qp& qp, Error e, const std::string& detail);

  // trace.cc helpers
  void trace_packet(TraceKind kind, const Qp* qp, uint32_t src, uint32_t dst, const proto::PacketHeaders& h,
                    uint32_t mask, size_t payload, const char* fault);

  // ingress.cc helpers
  void emit(Qp& qp, const proto::PacketHeaders& h, std::span<const uint8_t> payload) {
    emit_to(qp, qp.remote_ip, h, payload);
  }
  SendOutcome emit_to(Qp& qp, uint32_t dst_ip, const proto::PacketHeaders& h, std::span<const uint8_t> payload) {
    return emit_to(qp, dst_ip, h, payload, path_tos(qp));
  }
  // `tos`: the IPv4 TOS byte the datagram carries (a UD WQE's AH's traffic class).
  SendOutcome emit_to(Qp& qp, uint32_t dst_ip, const proto::PacketHeaders& h, std::span<const uint8_t> payload,
                      uint8_t tos);
  // The traffic class of a connected QP's path (ibv_modify_qp's ah_attr.grh), 0 without a GRH.
  static uint8_t path_tos(const Qp& qp) { return qp.attr.ah_attr.is_global ? qp.attr.ah_attr.grh.traffic_class : 0; }
  uint8_t wqe_tos(const Qp& qp, const abi::SendWqe& w);
  int gather(const Qp& qp, const abi::SendWqe& wqe, uint32_t offset, uint8_t* dst, uint32_t len, std::string* why);
  int copy_sges(const Qp& qp, const ibv_sge* sge, uint32_t num_sge, uint32_t offset, uint8_t* buf, uint32_t len,
                bool to_memory, std::string* why);
  // pd: the PD the lkeys must belong to when not the QP's (an SRQ's receive WQEs)
  int scatter(const Qp& qp, const ibv_sge* sge, uint32_t num_sge, uint32_t offset, const uint8_t* src, uint32_t len,
              std::string* why, const Pd* pd = nullptr);
  bool check_sges(const Qp& qp, const ibv_sge* sge, uint32_t num_sge, uint32_t need_access, uint64_t* total,
                  std::string* why) const;
  const Mr* local_mr(const Qp& qp, const ibv_sge& s, uint64_t offset, uint64_t len, uint32_t need_access,
                     std::string* why, const Pd* pd = nullptr) const;
  // The MR a remote access lands in, through an MR's rkey or a memory window's; *mr_va is
  // the address in that MR's iova space (a zero-based window's offset is translated).
  const Mr* check_rkey(const Qp& qp, uint32_t rkey, uint64_t va, uint64_t len, uint32_t access, uint64_t* mr_va,
                       std::string* why) const;

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
  uint8_t rx_tos_ = 0;  // the IPv4 TOS of the packet being received (on_packet): a UD GRH shows it
  uint32_t burst_ = 64;

  uint64_t queue_bytes_ = 0;  // charged to all contexts
  UdProbeGuard ud_guard_;     // slows QPN/Q_Key sweeps of UD QPs (issue 29 point 6)

  // The object tables: ObjectTables (objects/tables.h).
  std::map<uint32_t, Qp*> busy_qps_;  // QPs with more to send right now, by QPN
  std::vector<uint8_t> tx_buffer_;
  std::vector<uint8_t> payload_buffer_;
  std::unique_ptr<CmAgent> cm_;

  // The shared parts (declared after what they reach; the hooks reach the engines' state).
  Journal journal_{logger_, counters_, tracer_, now_, *this};
  TracePoints trace_points_{tracer_, config_, *this};
  Completions completions_{notifier_,
                           counters_,
                           tracer_,
                           journal_,
                           now_,
                           Completions::EngineHooks{[this] { flush_dma_writes(); },
                                                    [this](Qp& qp, ibv_wc_status status) {
                                                      complete_send_wqe(qp, status);
                                                    }}};
  QpStates qp_states_{tracer_, journal_, trace_points_, completions_,
                      QpStates::EngineHooks{[this](Qp& qp) { busy_qps_[qp.qpn] = &qp; },
                                            [this](Qp& qp) { busy_qps_.erase(qp.qpn); },
                                            [this](Qp& qp) { requester_idle(qp); },
                                            [this](Qp& qp) { cc_sync(qp, true); }}};

 public:
  // context_page.cc: the page an idle ibv_poll_cq sleeps on (abi::ContextShared). Allocated on
  // the shim's first request (EALREADY after that); *page's memfd goes to the client.
  int map_context_page(Context* ctx, ShmRegion** page);

 private:
  void release_context_page(Context* ctx);

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
  void forget_mr_in_engines(const Mr* mr);  // what dereg_mr does to messages in flight
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
  // A DMA through an ODP MR met a page with no mapping: the odp_fault trace event.
  void note_odp_fault(const Qp& qp, const Mr& mr, uint64_t va, uint64_t len, bool remote);
  // The responder's DMA into or out of `mr` failed with `err`: NAK remote access error for an
  // ODP page fault, remote operational error otherwise.
  void remote_dma_failed(Qp& qp, const Mr& mr, uint64_t va, uint64_t len, uint32_t psn, const std::string& what,
                         int err);

  // --- Fewer DMA system calls (issue 14): memory_access.cc ---
 public:
  // Makes the writes queued into pinned MRs (HostMemory::write_later). simnicd calls it at the
  // end of every event; the NIC calls it itself before a CQE, an ACK, or any other access to
  // application memory, so nothing can report bytes that have not landed.
  void flush_dma_writes();

 private:
  // A chunk of a message read from the application in one DMA, then sent as several packets.
  struct DmaStage {
    const void* owner = nullptr;  // the Qp
    uint64_t tag = 0;             // which message: a send WQE's SQ index, or read_stage_tag
    uint32_t begin = 0, end = 0;  // the message's bytes [begin, end) held in `bytes`
    bool failed = false;          // a chunk read failed: this message goes packet by packet
    uint64_t used = 0;            // when last used: the least recently used is replaced
    std::vector<uint8_t> bytes;
  };
  static constexpr uint32_t kStageBytes = 256 * 1024;    // one read covers 64 packets at MTU 4096
  static constexpr size_t kStages = 8;                   // messages staged at once (8 x 256 KiB)
  static constexpr uint64_t kMaxQueuedWrites = 4 << 20;  // bytes queued before a flush is forced
  enum class SgeDma { kRead, kWrite, kProbe, kCheck };   // kProbe: a read that reports nothing
  int sge_dma(const Qp& qp, const ibv_sge* sge, uint32_t num_sge, uint32_t offset, uint8_t* buf, uint32_t len,
              SgeDma op, std::string* why, const Pd* pd = nullptr);
  int dma_read(pid_t pid, uint64_t addr, void* dst, size_t len);
  int dma_write_now(pid_t pid, uint64_t addr, const void* src, size_t len);
  int dma_write(const Mr& mr, uint64_t addr, const void* src, size_t len);  // queued into a pinned MR
  // Bytes [offset, +len) of the message of send WQE `slot`: from a stage, or gathered into
  // payload_buffer_; *out points at them.
  int send_payload(const Qp& qp, uint32_t slot, const SendWqeState& st, uint32_t offset, uint32_t len,
                   const uint8_t** out, std::string* why);
  // The same for a READ response's bytes [offset, +len) (rr.mr must be set).
  int read_response_payload(const Qp& qp, const ReadResponse& rr, uint32_t offset, uint32_t len, const uint8_t** out);
  static uint64_t read_stage_tag(const ReadResponse& rr) { return (1ull << 32) | rr.first_psn; }
  // The stage holding [offset, +len) of message (owner, tag), filled by read(buf, from, n) when
  // none does; nullptr: gather the packet alone.
  template <class Read>
  DmaStage* stage(const void* owner, uint64_t tag, uint32_t offset, uint32_t len, uint32_t msg_len, Read&& read);
  void drop_stage(const void* owner, uint64_t tag);  // a new message takes the tag
  std::vector<DmaStage> stages_ = std::vector<DmaStage>(kStages);
  uint64_t stage_clock_ = 0;
  uint64_t queued_write_bytes_ = 0;
  std::vector<HostMemory::FailedWrite> failed_writes_;

  // --- Back-pressure and congestion control between NICs (issue 14 point 3): congestion.h,
  // congestion_hooks.cc ---
 public:
  const CongestionControl& congestion() const { return cc_; }
  // Caps the bytes in flight towards each peer (simnicd: below its UDP receive buffer).
  void set_peer_window_cap(uint64_t bytes) { cc_.set_cap(bytes); }

 private:
  uint64_t cc_charge_of(const Qp& qp) const;  // what the QP holds in flight now
  bool cc_admit(Qp& qp);                      // false: the QP waits for credit (queued)
  // Whether the packet about to leave asks for an ACK: `asked` (the requester's own rule), or
  // because the QP would have to wait after it, and what it holds must come back without an
  // ACK timeout (CongestionControl::would_wait, note_ack_req).
  bool cc_ack_req(const Qp& qp, bool asked);
  void cc_sync(Qp& qp, bool rewound);  // after its PSNs or state changed
  void cc_loss(Qp& qp);                // a timeout or sequence NAK: halve the window
  void cc_end_turn(Qp& qp);            // end of a requester turn
  void cc_forget(Qp& qp);              // destroyed
  void cc_wake();                      // resume QPs that freed credit lets go
  CongestionControl cc_{
      CongestionConfig{config_.peer_window_bytes ? config_.peer_window_bytes : DeviceConfig::kDefaultPeerWindow}};
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
