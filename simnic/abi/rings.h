// The fast path: queues shared between an application (the shim) and simnicd.
//
// Like a real RNIC, work requests and completions never cross the control socket:
// the shim writes WQEs into rings in shared memory (a memfd created by simnicd and
// passed over the control socket) and rings a doorbell (an eventfd per context);
// simnicd writes CQEs into the CQ ring, which ibv_poll_cq reads with no system call.
//
// Indices are free-running uint32 counters; slot = index & (entries - 1).
// Each index has exactly one writer: producer by the side that fills, consumer by the
// side that drains. Stores are release, loads of the other side's index are acquire.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <infiniband/verbs.h>

#include "simnic/abi/direct_send.h"

namespace simnic::abi {

constexpr uint32_t kMaxSge = 16;          // per send or receive WQE
constexpr uint32_t kMaxInlineData = 256;  // bytes of IBV_SEND_INLINE payload per WQE
constexpr uint32_t kCacheLine = 64;

static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared-memory atomics must be lock free");

struct alignas(kCacheLine) RingIndex {
  std::atomic<uint32_t> value{0};
};

struct RingControl {
  RingIndex producer;  // next index the producer will fill
  RingIndex consumer;  // next index the consumer will take
};

// A send WQE as the shim writes it. Opcodes and flags are libibverbs' own enums.
struct SendWqe {
  uint64_t wr_id;
  uint32_t opcode;       // enum ibv_wr_opcode
  uint32_t send_flags;   // enum ibv_send_flags
  uint32_t num_sge;      // 0 when the payload is inline
  uint32_t inline_len;   // bytes in inline_data when IBV_SEND_INLINE
  uint32_t imm_data;     // network byte order, as in ibv_send_wr; also invalidate_rkey; BIND_MW: ibv_mw.rkey
  uint32_t rkey;         // RDMA / atomic; BIND_MW: the window's new rkey
  uint64_t remote_addr;  // RDMA / atomic; BIND_MW: the window's first byte
  uint64_t compare_add;  // atomics
  uint64_t swap;         // atomics
  uint32_t ah;           // UD: address handle (daemon handle)
  uint32_t remote_qpn;   // UD
  uint32_t remote_qkey;  // UD
  uint32_t remote_srqn;  // XRC: the XRC SRQ at the responder (wr.qp_type.xrc.remote_srqn)
  uint32_t bind_mw;      // BIND_MW: the window (daemon handle)
  uint32_t bind_lkey;    // BIND_MW: lkey of the MR to bind to, 0 to unbind (type 1)
  uint32_t bind_access;  // BIND_MW: mw_access_flags
  uint32_t reserved2;
  uint64_t bind_length;  // BIND_MW: bytes in the window
  union {
    struct ibv_sge sge[kMaxSge];
    uint8_t inline_data[kMaxInlineData];
  };
};
static_assert(sizeof(SendWqe) == 96 + kMaxInlineData);
static_assert(std::is_trivially_copyable_v<SendWqe>);

// A receive WQE (RQ or SRQ).
struct RecvWqe {
  uint64_t wr_id;
  uint32_t num_sge;
  uint32_t reserved;
  struct ibv_sge sge[kMaxSge];
};
static_assert(std::is_trivially_copyable_v<RecvWqe>);

// The bytes a send or receive WQE's scatter/gather list spans, lkeys unchecked. At most
// kMaxSge entries are read, whatever num_sge says: the program writes it.
template <class Wqe>
uint64_t sge_bytes(const Wqe& w) {
  uint64_t sum = 0;
  for (uint32_t i = 0; i < w.num_sge && i < kMaxSge; ++i) sum += w.sge[i].length;
  return sum;
}

// Header of a QP's shared memory. The SQ slots start at sq_offset and the RQ slots at
// rq_offset (both given in the CreateQp reply); a QP attached to an SRQ has no RQ slots.
struct QpShared {
  alignas(kCacheLine) std::atomic<uint32_t> state{0};  // enum ibv_qp_state; written by simnicd only
  RingControl sq;  // producer: shim (post_send); consumer: simnicd, advanced on completion
  RingControl rq;  // producer: shim (post_recv); consumer: simnicd, advanced on use
  // Non-zero while requests wait in simnicd for receive WQEs (ReceiveWait::hold): how
  // many they take. Written by simnicd only; ibv_post_recv reads it (receive_must_ring).
  alignas(kCacheLine) std::atomic<uint32_t> receives_awaited{0};
  // Non-zero while simnicd has packets of this RC QP in flight: the ACK, NAK or timer they
  // bring gives the requester a turn that reads the SQ producer index, so ibv_post_send need
  // not ring (send_must_ring). Written by simnicd only, beside the other word it alone writes.
  std::atomic<uint32_t> sq_watched{0};
  // The next PSN lent to the program while the requester has nothing to send (direct_send.h).
  DirectSend direct;
};

// Header of a CQ's shared memory; struct ibv_wc slots follow at cqe_offset(), then one
// uint64_t completion timestamp per slot (the NIC's clock: simulated ns, so 1 GHz) at
// cqe_timestamp_offset(entries), for ibv_wc_read_completion_ts.
struct CqShared {
  RingControl ring;  // producer: simnicd; consumer: shim (ibv_poll_cq)
  // Armed by ibv_req_notify_cq, disarmed by simnicd when it sends the event.
  alignas(kCacheLine) std::atomic<uint32_t> arm{0};  // CqArm
  std::atomic<uint32_t> overrun{0};                  // set by simnicd if a CQE found the ring full
};

// A context's page, shared with simnicd (Op::MapContextPage). simnicd adds one to `cqe_seq`
// after each CQE it writes to any CQ of the context; an ibv_poll_cq that has found its CQ
// empty for a while sleeps on that word (FUTEX_WAIT) instead of yielding the CPU, and simnicd
// wakes it (FUTEX_WAKE) when `sleepers` says someone sleeps. Busy-polling applications and the
// NIC then share two CPUs without starving each other (docs/performance.md).
//
// The doorbell gate (issue 26 point 2): a doorbell is an eventfd write, one system call per
// ibv_post_send. `doorbell_rung` says a doorbell is rung and simnicd has not yet begun the look
// at the context's queues that answers it; a post that finds it set skips the eventfd, since
// that look is still to come and will see its WQE. Only a simnicd that marks the page
// (`doorbell_gate` = kDoorbellGateOn) promises to clear the word: with any other, the shim
// rings every time. The two halves are doorbell_must_ring and open_doorbell_gate below.
struct ContextShared {
  alignas(kCacheLine) std::atomic<uint32_t> cqe_seq{0};
  std::atomic<uint32_t> sleepers{0};  // shim threads in FUTEX_WAIT on cqe_seq
  // Its own line: the shim sets it on every post, simnicd clears it on every doorbell.
  alignas(kCacheLine) std::atomic<uint32_t> doorbell_rung{0};  // 1: rung, the look not yet begun
  std::atomic<uint32_t> doorbell_gate{0};                      // kDoorbellGateOn: simnicd clears it
};
constexpr uint32_t kDoorbellGateOn = 0x0db0e11u;

// Why no WQE is left unseen. The shim (doorbell_must_ring) does W: store the SQ or RQ producer
// index (release), then F1: a seq_cst fence, then X: exchange doorbell_rung to 1. simnicd
// (open_doorbell_gate, before Requester::on_doorbell reads any producer index) does C: store 0,
// then F2: a seq_cst fence, then R: the producer loads. Take a post whose X read 1 (it skips
// the eventfd). The 1 came from an exchange E that read 0 (between them in doorbell_rung's
// modification order there are only exchanges writing 1, no clear), and E's poster wrote the
// eventfd after E. simnicd drains that eventfd and then runs on_doorbell, whose clear C thus
// happens after E, so C follows E, and hence X, in the modification order: X is coherence-
// ordered before C. By [atomics.order] the fence F1 before X then precedes the fence F2 after
// C in the single total order S, and since W is sequenced before F1 and F2 before R, R reads W
// or a later index: the look still to come sees the WQE. A post whose X read 0 rings, and the
// eventfd brings a look after it. Without F1 a release store followed by a seq_cst exchange
// gives no such order (the store may pass it on weakly ordered CPUs); without F2 the loads
// could pass the clear (on x86 too: a load may pass an earlier store). A held doorbell (step
// mode) clears the word when it is handled, so it keeps later posts quiet until then. The
// page is the context's own: a program that scribbles on the word silences or wakes only its
// own NIC context, and simnicd never reads it (it only clears it).
//
// The shim's half, after it published a producer index: whether to write the eventfd.
inline bool doorbell_must_ring(ContextShared* page) {
  if (!page || page->doorbell_gate.load(std::memory_order_relaxed) != kDoorbellGateOn) return true;
  std::atomic_thread_fence(std::memory_order_seq_cst);  // F1: the producer index before the word
  return page->doorbell_rung.exchange(1, std::memory_order_seq_cst) == 0;
}

// simnicd's half, before it reads the producer indices of the context's queues: a post from
// here on rings again, and one that did not ring is seen by the reads that follow.
inline void open_doorbell_gate(ContextShared* page) {
  if (!page) return;
  page->doorbell_rung.store(0, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // F2: the word before the producer loads
}

// Whether requests waiting for receive WQEs can go on: as many receives are posted as they
// take, or some are and the program has polled every completion of its receive CQ (it has
// caught up, and posts no more until more work comes). Both halves ask it: the shim after
// publishing the RQ producer index (ring the doorbell: receives otherwise never do), simnicd at
// the end of each event (ReceiveWait::release_posted). simnicd stores receives_awaited and
// fences before that look, the shim stores the index and fences before reading the word, so
// one of them sees the other's store and a wait is never left to its deadline by a receive
// posted in between (the Dekker pattern of the doorbell gate above). Counting once per post
// and not ringing each time keeps a program catching up from waking the NIC per receive.
inline bool awaited_receives_posted(const QpShared& qp, const CqShared* recv_cq) {
  const uint32_t wanted = qp.receives_awaited.load(std::memory_order_relaxed);
  if (!wanted) return false;
  const uint32_t posted = qp.rq.producer.value.load(std::memory_order_acquire) -
                          qp.rq.consumer.value.load(std::memory_order_relaxed);
  if (posted >= wanted) return true;
  const bool cq_drained = recv_cq && recv_cq->ring.producer.value.load(std::memory_order_relaxed) ==
                                         recv_cq->ring.consumer.value.load(std::memory_order_relaxed);
  return posted > 0 && cq_drained;
}

// The shim's half, after it published the RQ producer index.
inline bool receive_must_ring(const QpShared& qp, const CqShared* recv_cq) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return awaited_receives_posted(qp, recv_cq);
}

// A post while the QP's SQ is watched needs no doorbell. On 2 vCPUs a NIC that shares its CPU
// with the posting program preempts it at each doorbell and sends what one post made; a stream
// then costs a wake-up and a small batch per message, where the turn an ACK brings anyway
// takes every WQE posted since (docs/performance.md, "A stream's posts ride on its ACKs").
// Why no WQE is left unseen: the shim stores the SQ producer index, fences, reads the word
// (send_must_ring); simnicd stores 0, fences, reads the index (stop_watching_sq, then
// Requester::watch_sq) whenever it stops watching, on the QP's last ACK or any state change.
// One of the two sees the other's store (the Dekker pattern of the doorbell gate above):
// either the post rings, or the read after the clear finds its WQE. While the word stays set
// every ACK's turn reads the index again, so a WQE missed by one turn is found by the next.
inline bool send_must_ring(const QpShared& qp) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return qp.sq_watched.load(std::memory_order_relaxed) == 0;
}

// simnicd's half: a post from here on rings, and one that did not is seen by later reads.
inline void stop_watching_sq(QpShared& qp) {
  qp.sq_watched.store(0, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

enum CqArm : uint32_t { kCqDisarmed = 0, kCqArmNext = 1, kCqArmSolicited = 2 };

// Header of an SRQ's shared memory; RecvWqe slots follow at wqe_offset.
struct SrqShared {
  RingControl ring;                                    // producer: shim (post_srq_recv); consumer: simnicd
  alignas(kCacheLine) std::atomic<uint32_t> limit{0};  // srq_limit, 0 = not armed
};

constexpr uint32_t align_up(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }

// The byte offset of the first CQE slot in a CQ's memory.
constexpr uint32_t cqe_offset() { return align_up(sizeof(CqShared), kCacheLine); }
constexpr size_t cqe_timestamp_offset(uint32_t entries) { return cqe_offset() + size_t(entries) * sizeof(ibv_wc); }
constexpr size_t cq_bytes(uint32_t entries) {
  return cqe_timestamp_offset(entries) + size_t(entries) * sizeof(uint64_t);
}
constexpr uint64_t kNicClockKhz = 1'000'000;  // the timestamps count ns

}  // namespace simnic::abi
