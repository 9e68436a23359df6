// Slows down guessing a UD QP's QPN and Q_Key (issue 29 point 6). A UD QP takes a datagram
// from anyone who names its QPN (24 random bits) and Q_Key (IBA 10.2.5: the Q_Key is what
// authorizes a datagram, and one with another Q_Key is silently dropped, as rxe's check_keys
// does). Nothing tells the sender it missed, but nothing stops it from trying again either: a local sweep of QPNs with
// a well-known Q_Key hit a UD QP in about 9 s.
//
// A NIC sees such a sweep as a stream of UD datagrams that miss: no QP with that number, or
// the wrong Q_Key. Past kMaxMissesPerWindow misses in a window, the guard closes for
// kClosedNs: UD datagrams from senders that never delivered one are then dropped unseen
// (counted), so a guess made meanwhile is wasted, while peers that already delivered a
// datagram (they know a QPN and Q_Key) carry on. UD is unreliable (IBA 9.8.4), so a datagram
// of a new sender lost during a flood is a loss the application already copes with.
// Per-packet cost: one comparison while open; a hash lookup per UD datagram only while closed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <unordered_set>

namespace simnic::core {

class UdProbeGuard {
 public:
  static constexpr uint64_t kWindowNs = 1'000'000'000;  // simulated time
  static constexpr uint32_t kMaxMissesPerWindow = 256;
  static constexpr uint64_t kClosedNs = 1'000'000'000;
  static constexpr size_t kMaxKnownSenders = 4096;  // past this, new senders are not remembered

  // A UD datagram missed (no such QP, or the wrong Q_Key). True when it closed the guard.
  bool miss(uint64_t now_ns) {
    if (now_ns - window_start_ns_ >= kWindowNs) window_start_ns_ = now_ns, misses_ = 0;
    if (++misses_ < kMaxMissesPerWindow) return false;
    const bool was_open = !closed(now_ns);
    closed_until_ns_ = now_ns + kClosedNs;
    misses_ = 0;
    return was_open;
  }
  // A UD datagram from `src_ip` passed the QPN and Q_Key checks: its sender knows them.
  void delivered(uint32_t src_ip) {
    if (src_ip == last_known_) return;  // the common case: no lookup per datagram
    last_known_ = src_ip;
    if (known_.size() < kMaxKnownSenders) known_.insert(src_ip);
  }
  // True when a UD datagram from `src_ip` is to be dropped before it is looked at.
  bool refuses(uint32_t src_ip, uint64_t now_ns) const {
    return closed(now_ns) && src_ip != last_known_ && !known_.count(src_ip);
  }
  bool closed(uint64_t now_ns) const { return now_ns < closed_until_ns_; }

 private:
  uint64_t window_start_ns_ = 0;
  uint32_t misses_ = 0;
  uint64_t closed_until_ns_ = 0;
  uint32_t last_known_ = 0;
  std::unordered_set<uint32_t> known_;
};

}  // namespace simnic::core
