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

// Header of a QP's shared memory. The SQ slots start at sq_offset and the RQ slots at
// rq_offset (both given in the CreateQp reply); a QP attached to an SRQ has no RQ slots.
struct QpShared {
  alignas(kCacheLine) std::atomic<uint32_t> state{0};  // enum ibv_qp_state; written by simnicd only
  RingControl sq;  // producer: shim (post_send); consumer: simnicd, advanced on completion
  RingControl rq;  // producer: shim (post_recv); consumer: simnicd, advanced on use
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
struct ContextShared {
  alignas(kCacheLine) std::atomic<uint32_t> cqe_seq{0};
  std::atomic<uint32_t> sleepers{0};  // shim threads in FUTEX_WAIT on cqe_seq
};

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
