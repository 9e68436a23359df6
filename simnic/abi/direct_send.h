// Posts that send themselves (issue 26 point 4; docs/architecture.md, "Posts that send
// themselves"). While an RC QP's requester has nothing left to send, simnicd lends the QP's next
// PSN to its program: the shim's ibv_post_send then builds the request packet of a one-packet SEND
// or WRITE (or a one-response READ, an atomic) itself and sends it from the NIC's own UDP socket (a
// descriptor simnicd gave it, Op::OpenDirectSend), instead of ringing the doorbell and waiting for
// the NIC process to be scheduled. simnicd accounts the packet as its own the next time it looks at
// the QP: the ACK that answers it, a doorbell, a timer, a state change. A real RNIC has the same
// shortcut: mlx5's BlueFlame doorbell carries the WQE itself, so the NIC need not fetch it.
//
// The lend is one word, written by both sides: epoch << 2 | state. simnicd writes the
// parameters, then stores kLendOffered with a new epoch (release). The shim reads the word
// (acquire) and the parameters, writes and publishes the WQE at sq_index, and only then takes
// the PSN with a compare-exchange to kLendTaken. simnicd ends every lend before its requester or
// completer touches the QP (end_direct_lend): a compare-exchange back to 0, or, when the shim
// was first, a read of the taken word. Exactly one of the two exchanges wins, so the PSN is
// either the program's (and simnicd sees its published WQE: the shim's producer store is
// sequenced before its exchange, which simnicd's acquire read synchronizes with) or simnicd's
// (the shim rings the doorbell as any post does). While the word is offered, simnicd sends
// nothing on the QP and keeps next_psn as lent, so a WQE the program published but simnicd did
// not hear of in time is sent by simnicd with the same PSN: at worst a duplicate, which the
// responder answers again and does not execute twice (IBA 9.7.5.1.1). Parameters read under an
// epoch that ended are never used: the exchange then fails, its expected word gone. A program
// that scribbles on the word changes only how its own QP's next packet leaves: simnicd
// accounts a packet it did not send, which its ACK timer resends, or sends one again.
//
// A taken PSN is not yet a packet on the wire: a program preempted between the exchange and
// its sendto (tens of milliseconds on a busy host) holds it. So the shim, once sendto returned,
// exchanges kLendTaken for kLendSent (same epoch), and simnicd leaves a taken word as it found
// it: until the word says sent, its ACK timer counts no wait for that packet as a loss (the
// packet has not left; what the peer answered meanwhile says nothing about it) and it offers the
// QP no new lend, which would overwrite the word. A program that never marks it is waited for
// only as long as a stalled peer is (completer_timers.cc).
#pragma once
#include <atomic>
#include <cstdint>

namespace simnic::abi {

enum LendState : uint32_t { kLendOff = 0, kLendOffered = 1, kLendTaken = 2, kLendSent = 3 };

constexpr uint32_t lend_word(uint32_t epoch, LendState state) { return (epoch << 2) | uint32_t(state); }
constexpr LendState lend_state(uint32_t word) { return LendState(word & 3u); }

// In QpShared, on a cache line of its own: both sides write the word.
struct alignas(64) DirectSend {
  std::atomic<uint32_t> lend{0};      // lend_word(epoch, state)
  std::atomic<uint32_t> sq_index{0};  // the SQ index the program's WQE must have
  std::atomic<uint32_t> psn{0};       // the PSN its packet carries
  std::atomic<uint32_t> dest_qp{0};   // the connected peer's QPN
  std::atomic<uint32_t> dst_ip{0};    // the peer NIC's IPv4 address, host order
  std::atomic<uint32_t> mtu{0};       // the path MTU in bytes: the packet's payload at most
};

// What the shim reads under an offered lend.
struct DirectLend {
  uint32_t word = 0;
  uint32_t sq_index = 0, psn = 0, dest_qp = 0, dst_ip = 0, mtu = 0;
};

// The shim's first half, before it builds anything: the lend on offer, or false.
inline bool read_direct_lend(const DirectSend& d, DirectLend* out) {
  out->word = d.lend.load(std::memory_order_acquire);
  if (lend_state(out->word) != kLendOffered) return false;
  out->sq_index = d.sq_index.load(std::memory_order_relaxed);
  out->psn = d.psn.load(std::memory_order_relaxed);
  out->dest_qp = d.dest_qp.load(std::memory_order_relaxed);
  out->dst_ip = d.dst_ip.load(std::memory_order_relaxed);
  out->mtu = d.mtu.load(std::memory_order_relaxed);
  return true;
}

// The shim's second half, after it published the WQE at lend.sq_index: true when the PSN is
// its own to send; false when simnicd ended the lend first (the post rings as any other).
inline bool take_direct_lend(DirectSend& d, const DirectLend& lend) {
  uint32_t expected = lend.word;
  return d.lend.compare_exchange_strong(expected, (lend.word & ~3u) | kLendTaken, std::memory_order_acq_rel,
                                        std::memory_order_relaxed);
}

// The shim, after its sendto under a lend it took (whatever sendto returned): the packet is
// out of its hands.
inline void mark_direct_packet_sent(DirectSend& d, const DirectLend& lend) {
  uint32_t expected = (lend.word & ~3u) | kLendTaken;
  d.lend.compare_exchange_strong(expected, (lend.word & ~3u) | kLendSent, std::memory_order_release,
                                 std::memory_order_relaxed);
}

// simnicd: offers the next PSN under `epoch` (non-zero, new for each offer).
inline void offer_direct_lend(DirectSend& d, uint32_t epoch, const DirectLend& lend) {
  d.sq_index.store(lend.sq_index, std::memory_order_relaxed);
  d.psn.store(lend.psn, std::memory_order_relaxed);
  d.dest_qp.store(lend.dest_qp, std::memory_order_relaxed);
  d.dst_ip.store(lend.dst_ip, std::memory_order_relaxed);
  d.mtu.store(lend.mtu, std::memory_order_relaxed);
  d.lend.store(lend_word(epoch, kLendOffered), std::memory_order_release);
}

// simnicd: ends the lend of `epoch`. True when the program took it: its WQE at sq_index is
// published, and its packet is on the wire or about to be (direct_packet_held says which); the
// word is then left for the shim to mark sent.
inline bool end_direct_lend(DirectSend& d, uint32_t epoch) {
  uint32_t w = d.lend.load(std::memory_order_acquire);
  if (w == lend_word(epoch, kLendOffered) &&
      d.lend.compare_exchange_strong(w, 0, std::memory_order_acq_rel, std::memory_order_acquire))
    return false;
  if (w == lend_word(epoch, kLendTaken)) return true;
  d.lend.store(0, std::memory_order_relaxed);
  return w == lend_word(epoch, kLendSent);
}

// simnicd: whether the program that took the lend of `epoch` has yet to send its packet.
inline bool direct_packet_held(const DirectSend& d, uint32_t epoch) {
  return d.lend.load(std::memory_order_acquire) == lend_word(epoch, kLendTaken);
}

}  // namespace simnic::abi
