// One simulated RNIC: its object tables, the verbs the control socket serves, and the data
// path (requester, responder, completer). Pure: every effect on the world goes through the
// interfaces in env.h, and time comes in as an argument, so tests drive it deterministically.
//
// The verbs are served by parts of the device, by concern (each ~40 members at most):
// Addressing (port/), Budgets, ContextVerbs, QueueVerbs, XrcVerbs (objects/), MemoryVerbs
// (memory/); Device keeps the object tables (objects/tables.h), the helpers the parts and the
// engines share, and the data path: requester.cc, responder.cc, completer.cc, ingress.cc (the
// one receive path), completion.cc (CQEs, flush).
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
#include "simnic/core/memory/memory_verbs.h"
#include "simnic/core/memory/mr_verbs.h"
#include "simnic/core/objects/budgets.h"
#include "simnic/core/objects/contexts.h"
#include "simnic/core/objects/key_source.h"
#include "simnic/core/objects/multicast.h"
#include "simnic/core/objects/objects.h"
#include "simnic/core/objects/qp_states.h"
#include "simnic/core/objects/queue_verbs.h"
#include "simnic/core/objects/tables.h"
#include "simnic/core/objects/xrc_verbs.h"
#include "simnic/core/observe/counters.h"
#include "simnic/core/observe/drop_reasons.h"
#include "simnic/core/observe/journal.h"
#include "simnic/core/observe/trace.h"
#include "simnic/core/observe/trace_points.h"
#include "simnic/core/port/addressing.h"
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
// (Budgets::check_room). Queue memory: a quarter of the NIC's, so that one runaway program
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

  // --- The parts that serve the verbs (each reaches the tables through this Device) ---
  Addressing& addressing() { return addressing_; }  // attributes, GID table, address vectors
  const Addressing& addressing() const { return addressing_; }
  ContextVerbs& context_verbs() { return context_verbs_; }  // contexts, handles, import
  MemoryVerbs& memory_verbs() { return memory_verbs_; }     // PDs, MRs, MWs, DM, AHs
  QueueVerbs& queue_verbs() { return queue_verbs_; }        // channels, CQs, SRQs, QPs, multicast
  XrcVerbs& xrc_verbs() { return xrc_verbs_; }              // XRC domains, SRQs, QPs
  Budgets& budgets() { return budgets_; }                   // queue memory and object shares
  const Budgets& budgets() const { return budgets_; }
  // --- The parts every engine and verb shares, one accessor each ---
  // The object tables, with the lookups and the keys of new objects (objects/tables.h).
  ObjectTables& tables() { return *this; }
  const ObjectTables& tables() const { return *this; }
  Journal& journal() { return journal_; }                // log, drops, notices, refusals (observe/journal.h)
  TracePoints& trace_points() { return trace_points_; }  // objects in trace events (observe/trace_points.h)
  Completions& completions() { return completions_; }    // CQEs, flushes, async events (engines/completions.h)
  QpStates& qp_states() { return qp_states_; }           // state changes (objects/qp_states.h)

  size_t context_count() const { return contexts_.size(); }
  ObjectCounts object_counts() const { return counts(); }
  // device.cc: the completion vectors ibv_context.num_comp_vectors offers: one per CPU, as rxe.
  static uint32_t num_comp_vectors();

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
  void xrc_receive(Qp& qp, const proto::ParsedPacket& pkt, uint64_t now);
  bool xrc_route(Qp& tgt, const proto::ParsedPacket& pkt);  // false: refused (NAK sent)

  // datagram.cc: UD receive (one packet is one message; no ACK, no RNR, no PSN order)
  void respond_ud(Qp& qp, const proto::ParsedPacket& pkt, uint32_t src_ip, size_t udp_len, uint32_t dst_ip);
  int scatter_ud_grh(const Qp& qp, const RecvInProgress& r, uint32_t src_ip, uint32_t dst_ip, size_t udp_len,
                     std::string* why);
  void ud_drop_too_long(Qp& qp, const abi::RecvWqe& wqe, uint32_t len);

  // multicast.cc (McastGroup: objects/tables.h)
  bool group_ip_joined(uint32_t ip) const;
  void receive_multicast(const proto::ParsedPacket& pkt, uint32_t src_ip, uint32_t group_ip, size_t udp_len);
  std::vector<Qp*> mcast_members(uint32_t group_ip);  // attached to any group of that IP, once each

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

  DeviceConfig config_;
  GidTable gids_;
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

  UdProbeGuard ud_guard_;  // slows QPN/Q_Key sweeps of UD QPs (issue 29 point 6)

  // The object tables: ObjectTables (objects/tables.h).
  std::map<uint32_t, Qp*> busy_qps_;  // QPs with more to send right now, by QPN
  std::vector<uint8_t> tx_buffer_;
  std::vector<uint8_t> payload_buffer_;
  std::unique_ptr<CmAgent> cm_;

  // The parts that serve the verbs (their accessors are above).
  Addressing addressing_{*this};
  Budgets budgets_{*this};
  ContextVerbs context_verbs_{*this};
  MemoryVerbs memory_verbs_{*this};
  QueueVerbs queue_verbs_{*this};
  XrcVerbs xrc_verbs_{*this};

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
  // The NIC's clock (simulated ns) at the event being handled: CQE timestamps count in it.
  uint64_t now() const { return now_; }

 private:
  // memory/rereg.cc: what dereg_mr and rereg_mr leave behind in the engines and the trace
  void forget_mr_in_engines(const Mr* mr);  // what dereg_mr does to messages in flight

  // --- On-demand paging (issue 17): memory/odp.cc ---
 private:
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

  // Parts of the NIC that use its shared helpers (issue 27 point 1; a later step narrows this)
  friend class Addressing;
  friend class Budgets;
  friend class ContextVerbs;
  friend class MemoryVerbs;
  friend class QueueVerbs;
  friend class XrcVerbs;
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
