// The objects a NIC holds for its users: contexts, PDs, MRs, CQs, SRQs, QPs, AHs.
// Plain data; the engines (requester, responder, completer) and the Device act on them.
#pragma once
#include <sys/types.h>
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <infiniband/verbs.h>

#include "simnic/abi/rings.h"
#include "simnic/core/env.h"
#include "simnic/proto/headers.h"
#include "simnic/proto/packet.h"

namespace simnic::core {

struct Context;

struct Pd {
  uint32_t handle = 0;
  Context* ctx = nullptr;
  uint32_t users = 0;  // MRs, QPs, SRQs, AHs on this PD: dealloc is EBUSY while > 0
};

struct Mr {
  uint32_t handle = 0;
  Context* ctx = nullptr;
  Pd* pd = nullptr;
  uint64_t addr = 0;  // in the owner's address space
  uint64_t iova = 0;  // what remote peers and SGEs address
  uint64_t length = 0;
  uint32_t access = 0;  // ibv_access_flags
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  mutable uint32_t bound_mws = 0;  // windows bound to it (bookkeeping): dereg is refused while > 0, as rxe
};

struct Qp;

// A memory window (IBA 10.6.7): remote access to part of an MR under its own rkey, bound and
// invalidated through a send queue. Type 1 is bound with ibv_bind_mw and stays valid until
// deallocated (binding length 0 unbinds it); type 2 is bound by a BIND_MW work request, only
// when free, is usable through the QP that bound it only, and is freed by LOCAL_INV or by a
// peer's SEND_WITH_INV.
struct Mw {
  uint32_t handle = 0;
  Context* ctx = nullptr;
  Pd* pd = nullptr;
  ibv_mw_type type = IBV_MW_TYPE_1;
  uint32_t rkey = 0;       // index (the handle) << 8 | key byte the binder chose
  const Mr* mr = nullptr;  // the MR it is bound to; nullptr = no window (type 2: "free")
  const Qp* qp = nullptr;  // type 2: the QP it was bound through
  uint64_t addr = 0;       // first byte of the window, in the MR's iova space
  uint64_t length = 0;
  uint32_t access = 0;  // IBV_ACCESS_REMOTE_* and IBV_ACCESS_ZERO_BASED
};

struct Channel {
  uint32_t handle = 0;
  Context* ctx = nullptr;
  int fd = -1;         // simnicd's end of the channel socket
  uint32_t users = 0;  // CQs bound to it
};

struct Cq {
  uint32_t handle = 0;
  Context* ctx = nullptr;
  Channel* channel = nullptr;
  ShmRegion mem;
  abi::CqShared* shm = nullptr;
  ibv_wc* slots = nullptr;
  uint64_t* timestamps = nullptr;  // one per slot: when the NIC wrote the CQE
  uint32_t entries = 0;            // power of two
  int cqe = 0;                     // what the user may rely on
  uint32_t users = 0;              // QPs using it
  bool overrun = false;
};

// An XRC domain (IBA Annex A14; ibv_open_xrcd): groups XRC SRQs and XRC TGT QPs, so that a
// TGT QP may deliver to any SRQ of its domain and to no other. Opened with a file, it is shared
// by every context of this NIC that opens the same file (same device and inode), as the kernel
// shares it between processes; it lives while some context has it open.
struct Xrcd {
  uint32_t handle = 0;
  bool has_file = false;
  uint64_t file_dev = 0, file_ino = 0;
  std::map<Context*, uint32_t> opens;  // the contexts that opened it, and how many times
  uint32_t users = 0;                  // XRC SRQs and TGT QPs in it
};

struct Srq {
  uint32_t handle = 0;
  Context* ctx = nullptr;
  Pd* pd = nullptr;
  ShmRegion mem;
  abi::SrqShared* shm = nullptr;
  abi::RecvWqe* slots = nullptr;
  uint32_t entries = 0;
  ibv_srq_attr attr{};
  uint32_t users = 0;
  // An XRC SRQ (IBV_SRQT_XRC): its domain, the CQ its receives complete on, and the number
  // requesters put in the XRCETH (ibv_get_srq_num).
  Xrcd* xrcd = nullptr;
  Cq* cq = nullptr;
  uint32_t srqn = 0;
};

struct Ah {
  uint32_t handle = 0;
  Context* ctx = nullptr;
  Pd* pd = nullptr;
  ibv_ah_attr attr{};
  uint32_t dst_ip = 0;
};

// Requester-side state of one SQ slot: the NIC's own copy of the WQE, and its progress.
struct SendWqeState {
  // Fetched from the shared ring once (Device::fetch_send_wqe), as an RNIC DMA-reads a WQE
  // once: everything the NIC does with the WQE afterwards uses this copy, so an application
  // that rewrites a posted WQE changes nothing the NIC already fetched.
  abi::SendWqe wqe{};
  uint32_t first_psn = 0;
  uint32_t npkts = 0;      // PSNs the WQE spans (a READ spans its response packets)
  uint32_t length = 0;     // total message length
  uint32_t rcvd_pkts = 0;  // READ: response packets received in order
  bool done = false;       // READ data / atomic result fully in
  bool rd_atomic = false;  // counts against max_rd_atomic while outstanding
  uint32_t dst_ip = 0;     // where its packets go: the connected peer, or a UD WQE's AH
  uint8_t tos = 0;         // their IPv4 TOS: the path's, or the UD AH's, traffic class
  uint32_t msn = 0;        // the responder's MSN once it has completed this message (24 bits)
  // Its first and last packets' numbers among the packets this NIC sent the peer NIC
  // (PeerProgress, latest sending of each): the ACK that retires the WQE says the peer has
  // read up to last_seq; nothing of it still unacknowledged was sent before first_seq.
  uint64_t first_seq = 0;
  uint64_t last_seq = 0;

  // The WQE starts at `psn`: its progress starts over, its fetched copy stays.
  void begin(uint32_t psn) {
    const abi::SendWqe fetched = wqe;
    *this = SendWqeState{};
    wqe = fetched;
    first_psn = psn;
  }
};

// The receive WQE a multi-packet SEND is landing in.
struct RecvInProgress {
  abi::RecvWqe wqe{};
  uint32_t offset = 0;  // bytes written so far
  bool from_srq = false;
};

// An answer the responder still owes, in request order: a READ request being answered (the
// responder streams its response packets), or one packet (an ACK, an atomic's answer) that
// arrived behind such a stream and must not overtake it.
struct ReadResponse {
  uint32_t first_psn = 0;  // PSN of the first response packet still to send
  uint32_t npkts = 0;      // total response packets of this READ
  uint32_t sent = 0;       // sent so far
  uint64_t va = 0;         // remote VA of the first byte of the whole READ
  uint32_t length = 0;
  const Mr* mr = nullptr;
  uint32_t msn = 0;
  std::optional<proto::PacketHeaders> answer;  // set: not a READ, this one packet (no payload)
};

// A replayable atomic result, so a duplicate atomic is never applied twice (C9-38).
struct AtomicResult {
  uint32_t psn = 0;
  uint64_t orig = 0;
};

struct QpCounters {
  uint64_t tx_packets = 0, rx_packets = 0, retransmits = 0, naks_sent = 0, naks_received = 0, rnr_naks_sent = 0,
           rnr_naks_received = 0, duplicates = 0, timeouts = 0;
};

// The requester's state (rxe's qp->req): which WQE is being sent and the PSNs it has used.
struct QpRequester {
  uint32_t sq_next = 0;     // the WQE being transmitted
  uint32_t sq_started = 0;  // WQEs before this one were checked and given PSNs
  uint32_t sq_fetched = 0;  // WQEs before this one were copied into sq_state (>= sq_started)
  uint32_t sq_seen = 0;     // trace: WQEs already reported as posted
  uint32_t pkt_in_wqe = 0;  // next packet index within sq_next
  uint32_t next_psn = 0;    // PSN of the next new packet
  // One past the highest PSN sent since RTS. A go-back-N moves next_psn back, not this: an ACK
  // for a PSN sent before the resend reached it again still acknowledges it (IBA 9.7.5.1.1).
  uint32_t psn_end = 0;
  uint32_t rd_atomic_outstanding = 0;
  uint32_t msn_started = 0;  // messages given PSNs so far (24 bits): the most an ACK's MSN can count
  uint64_t last_seq = 0;     // its latest packet's number among those sent to the peer NIC (PeerProgress)
  bool sq_watched = false;   // QpShared::sq_watched as last stored (Requester::watch_sq)
  // Its next PSN lent to the program (engines/direct_send.h): while `lent`, the offer's epoch,
  // and how many packets the peer NIC had been sent then (the program's packet comes after them).
  bool lent = false;
  uint32_t lend_epoch = 0;
  uint64_t lend_seq = 0;
  // The program took the lend of this epoch (0: none) at held_since_ns and may not have sent its
  // packet (held_psn) yet (abi::direct_packet_held): the ACK timer waits for it
  // (completer_timers.cc); an answer at or past held_psn says it left (Completer::receive).
  uint32_t held_epoch = 0;
  uint32_t held_psn = 0;
  uint64_t held_since_ns = 0;
};

// The completer's state (rxe's qp->comp): what the peer has acknowledged, the retry budget and
// the one timer (ACK timeout or RNR wait) that drives retransmission.
struct QpCompleter {
  uint32_t sq_consumer = 0;        // oldest not-yet-completed WQE (mirrors shm->sq.consumer)
  uint32_t una_psn = 0;            // oldest unacknowledged PSN
  uint64_t timer_deadline_ns = 0;  // ACK timeout or RNR wait, 0 = idle
  // How far the peer NIC had answered when the ACK timer was armed (completer_timers.cc: a
  // queue is not a loss).
  uint64_t timer_answered_seq = 0;
  // The peer-packet number the QP's last retransmission started at: a drop before it was
  // already paid for by a retry (completer_timers.cc).
  uint64_t resent_from_seq = 0;
  // The grace a loss verdict resting on the peer's answers gets (completer_timers.cc); an answer
  // or a resend starts it over ({}).
  struct AnswerGrace {
    bool passed_used = false;      // case 1's one expiry is spent
    uint64_t unread_since_ns = 0;  // since when this NIC's unread socket has put verdicts off (0: not)
  } grace;
  bool rnr_wait = false;
  uint32_t retry_left = 0;
  uint32_t rnr_retry_left = 0;
  uint32_t rd_psn = 0;                     // next expected READ/atomic response PSN
  uint32_t read_offset = 0;                // bytes of the current READ already scattered
  std::optional<uint32_t> read_gap_asked;  // the READ response PSN already re-requested once
  uint32_t msn_retired = 0;                // the MSN of the last message retired
  // The peer says it holds the oldest request for a receive WQE (a 0-credit ACK of the PSN
  // before it, receive_wait.cc): the last such notice, and the first since the QP last moved.
  uint64_t peer_holds_ns = 0;
  uint64_t peer_holds_since_ns = 0;
};

// A request that waits for a receive WQE (ReceiveWait::hold): its headers and its
// payload, copied out of the datagram, which the NIC's receive buffer reuses.
struct HeldRequest {
  proto::PacketHeaders h;
  uint32_t mask = 0;
  std::vector<uint8_t> payload;
};

// The responder's state (rxe's qp->resp): the PSN it expects and the message in progress.
struct QpResponder {
  uint32_t rq_seen = 0;      // trace: receive WQEs already reported as posted
  uint32_t epsn = 0;         // expected PSN
  uint32_t msn = 0;          // message sequence number (count of completed requests)
  bool nak_sent = false;     // a PSN sequence NAK is out; don't repeat it until in order
  bool uc_dropping = false;  // UC: the message in progress is being discarded (IBA 9.8.3)
  std::optional<RecvInProgress> recv;
  uint64_t write_va = 0;    // next VA of the WRITE in progress
  uint32_t write_left = 0;  // bytes the RETH announced and not yet written
  const Mr* write_mr = nullptr;
  uint32_t write_len = 0;  // RETH dma_len of the WRITE in progress
  std::deque<ReadResponse> read_responses;
  std::deque<AtomicResult> atomic_results;
  // Requests waiting for a receive WQE, the first one the one that found none, in arrival order.
  std::deque<HeldRequest> held;
  uint64_t held_bytes = 0;
  uint32_t held_wqes = 0;    // the receive WQEs they take (ReceiveWait::takes_receive_wqe)
  uint64_t held_until = 0;   // when the wait's window ends (receive_wait.cc); 0: nothing waits
  uint64_t held_since = 0;   // when the wait began: its windows together are bounded
  uint64_t held_notice = 0;  // when the next 0-credit ACK tells the requester the wait goes on
  uint64_t held_mark = 0;    // the program's receive-side indices as the window began (ReceiveWait)
  uint64_t rq_taken_ns = 0;  // when the NIC last took a WQE from the QP's own RQ (ReceiveWait)
};

struct Qp {
  uint32_t handle = 0;
  uint32_t qpn = 0;
  Context* ctx = nullptr;
  Pd* pd = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  Srq* srq = nullptr;    // an XRC TGT QP: the XRC SRQ the message in progress goes to
  Xrcd* xrcd = nullptr;  // an XRC TGT QP's domain
  ibv_qp_type type = IBV_QPT_RC;
  bool sq_sig_all = false;
  ibv_qp_cap cap{};
  ibv_qp_state state = IBV_QPS_RESET;
  bool sq_draining = false;  // SQD: WRs that had begun are still finishing (ibv_query_qp reports it)
  ibv_qp_attr attr{};        // the attributes as last set (ibv_query_qp reports them)
  uint32_t mtu_bytes = 1024;
  uint32_t remote_ip = 0;  // from the AV's GID (IPv4-mapped)

  ShmRegion mem;
  abi::QpShared* shm = nullptr;
  abi::SendWqe* sq = nullptr;
  uint32_t sq_entries = 0;
  abi::RecvWqe* rq = nullptr;
  uint32_t rq_entries = 0;
  std::vector<SendWqeState> sq_state;  // one per SQ slot

  // Each engine's own state, nested as rxe nests qp->req, qp->resp and qp->comp, so a reader
  // sees which engine owns a field. WQEs in [comp.sq_consumer, req.sq_next) have packets on
  // the wire.
  QpRequester req;
  QpCompleter comp;
  QpResponder resp;

  uint8_t work = 0;  // engines scheduled to run when the current event ends (Device::schedule)
  QpCounters counters;
  std::vector<std::array<uint8_t, 16>> mcast_gids;  // multicast groups it is attached to (MGIDs)
  std::string error_reason;  // why it last went to ERR/SQE (the rule), for ExplainQp; "" after RESET

  // The requester and completer run in RTS and, to drain what had begun, in SQD.
  bool sq_running() const { return state == IBV_QPS_RTS || state == IBV_QPS_SQD; }
  // UC and UD have no ACKs: a send WQE is done once its last packet is out, and a send error
  // stops only the SQ (state SQE, IBA 10.3.1.8) while receives go on.
  bool acked() const { return type == IBV_QPT_RC || is_xrc(); }
  bool is_xrc() const { return type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV; }
};

// One application connection: everything it created dies with it.
struct Context {
  uint32_t id = 0;
  pid_t pid = 0;
  uid_t uid = 0;
  int doorbell_fd = -1;  // owned by the I/O layer
  int async_fd = -1;
  std::vector<uint32_t> pds, mrs, mws, channels, cqs, srqs, qps, ahs;  // handles, in creation order
  std::vector<uint32_t> xrcds;                                         // XRC domains it opened, once per open
  uint64_t queue_bytes = 0;         // ring memory and per-WQE state of its CQs, SRQs and QPs
  std::deque<std::string> notices;  // what the NIC noticed about its QPs, for the program (TakeNotices)
  ShmRegion page;                   // its ContextShared page, once the shim asked (context_page.cc)
  abi::ContextShared* shared = nullptr;
  bool direct_send = false;  // it holds the NIC's socket: its QPs' next PSN may be lent (direct_send.h)
};

}  // namespace simnic::core
