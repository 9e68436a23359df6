// simnic's lossless fabric: a NIC-wide window of bytes in flight towards each peer NIC, shared
// by every QP sending to it, with AIMD congestion control on it (docs/congestion.md).
//
// Real RoCE fabrics do not drop for congestion: a switch whose buffer fills pauses the link
// (PFC, IEEE 802.1Qbb) and DCQCN slows the senders that caused it. Between simnicds the
// "link" is the receiving NIC's UDP socket buffer, and a full one drops silently; so each NIC
// keeps what it has in flight towards a peer below what that buffer holds. A QP whose next
// packet does not fit waits in the peer's FIFO (no busy loop) and is woken, in order, when
// ACKs free credit.
//
// A QP's charge is a pure function of its state (PSNs sent and not yet acknowledged, times the
// path MTU; nothing in RESET, ERR or an RNR wait), set again after every change, so credit
// cannot leak: a QP that goes back N, fails, is reset or destroyed charges what it now holds.
// Pure: no clock, no I/O; the Device feeds it (congestion_hooks.cc).
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

namespace simnic::core {

struct CongestionConfig {
  uint64_t cap_bytes = 4u << 20;      // most a NIC keeps in flight towards one peer
  uint64_t floor_bytes = 256u << 10;  // the window never shrinks below this, or cap/4 (AIMD)
};

// One destination NIC, seen from this one.
struct PeerWindow {
  uint64_t in_flight = 0;        // bytes charged by this NIC's QPs towards the peer
  uint64_t cwnd = 0;             // the limit now: cap_bytes, halved on loss, grown per ACK
  uint64_t acked_since_cut = 0;  // bytes acknowledged since the last halving
  std::deque<uint32_t> waiting;  // QPNs waiting for credit, oldest first
  size_t returned = 0;           // woken QPs put back at the head since the last wake-up
};

// NIC-wide figures for `simnic status`.
struct CongestionStats {
  uint64_t waits = 0;      // times a QP found the peer's window full and queued
  uint64_t wakeups = 0;    // times a waiting QP was resumed by freed credit
  uint64_t cuts = 0;       // multiplicative decreases (loss seen)
  uint64_t in_flight = 0;  // bytes charged now, all peers
  uint64_t waiting = 0;    // QPs queued now, all peers
  uint64_t peers = 0;      // peers with a window
  uint64_t min_cwnd = 0;   // the smallest peer window now (0: no peer)
};

class CongestionControl {
 public:
  explicit CongestionControl(CongestionConfig config = {});

  const CongestionConfig& config() const { return config_; }
  void set_cap(uint64_t cap_bytes);  // lowers or raises every peer's cap (and window, if above)

  // Whether QP `qpn` may put `bytes` more in flight towards `peer_ip` now. When not, it joins the
  // peer's queue (once) and is handed back by take_wakeups when credit allows. A QP woken from
  // the queue is granted a share of the freed credit (at most kMaxGrant) that it may send past
  // those still waiting, in its next turn; one that was not queued, or has used its grant, waits
  // behind them (first come, first served: round robin among busy QPs). With nothing in flight
  // anything passes, so a window smaller than a packet cannot stall a peer.
  bool admit(uint32_t qpn, uint32_t peer_ip, uint64_t bytes);
  // Whether QP `qpn`, admitted for a packet of `bytes` about to leave, would have to wait before
  // the one after (it does not fit, or others are waiting). That packet must ask for an ACK, or
  // the credit its unacknowledged packets hold would come back only with the ACK timeout
  // (simnic's responder, like rxe's, coalesces: it acknowledges when a packet asks, with AckReq
  // in the BTH).
  bool would_wait(uint32_t qpn, uint32_t peer_ip, uint64_t bytes) const;
  // The packet QP `qpn` is sending asks for an ACK, or not. A QP refused while its last packet
  // did not ask (others started waiting since its last turn) may send one packet more, which
  // asks: at most one packet per QP past the window, instead of credit held until a timeout.
  void note_ack_req(uint32_t qpn, bool asked);
  // QP `qpn` now holds `bytes` in flight towards `peer_ip` (0 when it holds nothing). Freed bytes
  // count as acknowledged (additive increase) unless `rewound` (go-back-N, error, reset).
  void set_charge(uint32_t qpn, uint32_t peer_ip, uint64_t bytes, bool rewound);
  // The QP is gone: its charge is released and it leaves any queue.
  void forget(uint32_t qpn);
  // A loss towards the peer (ACK timeout, NAK PSN sequence error): halve its window, at most
  // once per window of acknowledged bytes (TCP Reno's one cut per round trip, RFC 5681).
  void on_loss(uint32_t peer_ip);
  // QPs to resume now that credit was freed, in FIFO order, as many as the free bytes cover.
  std::vector<uint32_t> take_wakeups();
  // The QP's turn of sending is over: a woken QP's right to pass the queue ends with it, and
  // credit it left unused goes to the next in line (take_wakeups).
  void end_turn(uint32_t qpn);

  uint64_t in_flight(uint32_t peer_ip) const;
  uint64_t window(uint32_t peer_ip) const;  // cap_bytes for a peer not yet seen
  uint64_t charge(uint32_t qpn) const;
  bool queued(uint32_t qpn) const;
  CongestionStats stats() const;

 private:
  struct QpCharge {
    uint32_t peer_ip = 0;
    uint64_t bytes = 0;
    uint64_t quantum = 4096;  // the last admitted packet size: the wake-up estimate
    bool queued = false;
    uint64_t grant = 0;       // woken: bytes it may send past those still waiting, this turn
    bool used_grant = false;  // and it sent something since
    bool unasked = false;     // its last packet did not ask for an ACK
  };
  PeerWindow& peer(uint32_t ip);
  void release(QpCharge& q, uint64_t bytes, bool rewound);
  void grow(PeerWindow& p, uint64_t acked);

  CongestionConfig config_;
  std::unordered_map<uint32_t, PeerWindow> peers_;
  std::unordered_map<uint32_t, QpCharge> qps_;
  std::vector<uint32_t> freed_peers_;  // peers whose credit grew since take_wakeups
  uint64_t waits_ = 0, wakeups_ = 0, cuts_ = 0;
};

}  // namespace simnic::core
