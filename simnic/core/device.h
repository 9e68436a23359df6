// One simulated RNIC: its object tables, the verbs the control socket serves, and the data
// path (requester, responder, completer). Pure: every effect on the world goes through the
// interfaces in env.h, and time comes in as an argument, so tests drive it deterministically.
//
// Device is the composition root (docs/architecture.md, "Inside the core"): it keeps the
// object tables (objects/tables.h) and the NIC's environment, and holds three groups of parts,
// each a class of ~40 members at most:
// - the verbs' parts (objects/verb_parts.h): Addressing (port/), Budgets, ContextVerbs,
//   QueueVerbs, XrcVerbs (objects/), MemoryVerbs (memory/);
// - the parts every engine and verb shares: Journal, TracePoints (observe/), Completions
//   (engines/), QpStates (objects/);
// - the data path's units (engines/engines.h): Ingress and Transmit (wire/), Requester,
//   Completer, Responder, DatagramReceiver, ReceiveQueue, CongestionHooks (engines/),
//   MemoryAccess (memory/), WindowBinding (objects/).
// Packets, doorbells and timers come in through Device's data-path hand-offs.
#pragma once
#include <algorithm>
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
#include "simnic/core/engines/engines.h"
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
#include "simnic/core/objects/verb_parts.h"
#include "simnic/core/objects/xrc_verbs.h"
#include "simnic/core/observe/counters.h"
#include "simnic/core/observe/drop_reasons.h"
#include "simnic/core/observe/journal.h"
#include "simnic/core/observe/trace.h"
#include "simnic/core/observe/trace_points.h"
#include "simnic/core/port/addressing.h"
#include "simnic/core/port/gid_table.h"
#include "simnic/core/shared_parts.h"
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
  // READs and atomics in flight per QP, each way: rxe's RXE_MAX_QP_RD_ATOM and
  // RXE_MAX_QP_INIT_RD_ATOM (rxe_param.h). perftest keeps as many READs in flight as this allows.
  static constexpr uint32_t kMaxRdAtomic = 128;
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

  // --- What the NIC is and its clock ---
  const DeviceConfig& config() const { return config_; }
  const DeviceCounters& counters() const { return counters_; }
  Tracer& tracer() { return tracer_; }
  // The time of the event being handled (simulated ns); control verbs use the last one, and
  // CQE timestamps count in it.
  void set_time(uint64_t now) {
    now_ = now;
    tracer_.set_time(now);
  }
  uint64_t now() const { return now_; }

  // --- The parts that serve the verbs (objects/verb_parts.h) ---
  Addressing& addressing() { return verbs_.addressing; }  // attributes, GID table, address vectors
  const Addressing& addressing() const { return verbs_.addressing; }
  ContextVerbs& context_verbs() { return verbs_.contexts; }  // contexts, handles, import
  MemoryVerbs& memory_verbs() { return verbs_.memory; }      // PDs, MRs, MWs, DM, AHs
  QueueVerbs& queue_verbs() { return verbs_.queues; }        // channels, CQs, SRQs, QPs, multicast
  XrcVerbs& xrc_verbs() { return verbs_.xrc; }               // XRC domains, SRQs, QPs
  Budgets& budgets() { return verbs_.budgets; }              // queue memory and object shares

  // --- The parts every engine and verb shares, one accessor each ---
  // The object tables, with the lookups and the keys of new objects (objects/tables.h).
  ObjectTables& tables() { return *this; }
  const ObjectTables& tables() const { return *this; }
  Journal& journal() { return shared_.journal; }                // log, drops, notices, refusals
  TracePoints& trace_points() { return shared_.trace_points; }  // objects in trace events
  Completions& completions() { return shared_.completions; }    // CQEs, flushes, async events
  QpStates& qp_states() { return shared_.qp_states; }           // QP state changes
  CmAgent& cm() { return *cm_; }                                // the connection manager: CM MADs on QP1 go to it

  // --- Data path: one-line hand-offs to the engines (engines/engines.h) ---
  // The application rang its doorbell `rings` times since the NIC last looked (an eventfd
  // adds them up): look for new WQEs on its QPs.
  void on_doorbell(Context* ctx, uint64_t now, uint64_t rings = 1) { engines_.requester.on_doorbell(ctx, now, rings); }
  // A UDP datagram arrived on port 4791, sent to `dst_ip`: this NIC's address (0 says the
  // same) or an IP multicast group the port joined.
  // `tos` is the datagram's IPv4 TOS byte (its GRH traffic class), as the socket received it.
  void on_packet(uint32_t src_ip, uint16_t src_port, std::span<const uint8_t> bytes, uint64_t now, uint32_t dst_ip = 0,
                 uint8_t tos = 0) {
    engines_.ingress.on_packet(src_ip, src_port, bytes, now, dst_ip, tos);
  }
  // Time passed: fire due timers (ACK timeout, RNR wait).
  void on_timer(uint64_t now) {
    engines_.direct.sweep(now);  // first: a packet a program sent under a lend then has its ACK timer
    engines_.completer.on_timer(now);
    engines_.receive_wait.expire(now);
  }
  // The earliest timer deadline, 0 if none.
  uint64_t next_deadline() const {
    uint64_t best = 0;
    for (uint64_t t :
         {engines_.completer.next_deadline(), engines_.receive_wait.next_deadline(), engines_.direct.next_deadline()})
      if (t && (!best || t < best)) best = t;
    return best;
  }
  // True when an engine stopped early to let the event loop breathe (a long READ reply).
  bool has_pending_work() const { return engines_.requester.has_pending_work(); }
  // Packets an engine may send per turn; step mode sets 1 so a user sees them one by one, and
  // then no program sends past the NIC (engines/direct_send.h).
  void set_burst(uint32_t packets) {
    engines_.requester.set_burst(packets);
    if (packets <= 1) engines_.direct.take_back_all(now_);
  }
  void run_pending(uint64_t now) { engines_.requester.run_pending(now); }
  // One ACK per QP per event instead of one per request that asks (IBA 9.7.5.1.1); on unless
  // turned off (simnicd: SIMNIC_ACK_COALESCING=0, for an A/B).
  void set_ack_coalescing(bool on) { engines_.responder.coalescing.on = on; }
  // The end of an event (simnicd calls it after each): requests that waited for a receive WQE
  // go on if one was posted meanwhile (receive_wait.h), the event's coalesced ACKs leave
  // (Responder::send_answer_in_order), the writes queued into pinned MRs
  // (HostMemory::write_later) land, then the pollers asleep on a context that got CQEs are
  // woken, once per context. The NIC flushes by itself before a CQE, an ACK, or any other
  // access to application memory, so nothing can report bytes that have not landed. A wire
  // that no longer takes a program's own packets (a fault set, a trace started:
  // engines/direct_send.h) gets every lent PSN back first.
  void finish_turn() {
    if (!engines_.direct.lends_allowed()) engines_.direct.take_back_all(now_);
    engines_.receive_wait.release_posted();  // a receive posted meanwhile lets them go on
    engines_.responder.send_waiting_acks();
    engines_.dma.flush_dma_writes();
    shared_.completions.wake_sleepers();
  }
  const CongestionControl& congestion() const { return engines_.congestion.control(); }
  // Caps the bytes in flight towards each peer (simnicd: below its UDP receive buffer).
  void set_peer_window_cap(uint64_t bytes) { engines_.congestion.set_cap(bytes); }

  // --- For `simnic status` and tests ---
  std::string status_text() const;
  const std::map<uint32_t, std::unique_ptr<Qp>>& qps() const { return qps_; }

 private:
  // The NIC's environment (env.h) and what it reports.
  DeviceConfig config_;
  Environment env_;
  DeviceCounters counters_;
  Tracer tracer_;
  uint64_t now_ = 0;
  std::unique_ptr<CmAgent> cm_;

  // The parts, declared after what they reach (the shared parts' hooks reach the engines only
  // once the Device is built).
  VerbParts verbs_{*this};
  SharedParts shared_{*this};
  Engines engines_{*this};

  // Parts that reach the tables, the environment and each other through this Device
  // (issue 27 point 1; the engines already reach each other only by their public methods).
  friend struct VerbParts;
  friend struct SharedParts;
  friend struct Engines;
  friend class Addressing;
  friend class Budgets;
  friend class ContextVerbs;
  friend class MemoryVerbs;
  friend class QueueVerbs;
  friend class XrcVerbs;
  friend class Transmit;
  friend class Ingress;
  friend class WindowBinding;
  friend class MemoryAccess;
  friend class ReceiveQueue;
  friend class CongestionHooks;
  friend class Requester;
  friend class Completer;
  friend class Responder;
  friend class ReceiveWait;
  friend class DirectSend;
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
