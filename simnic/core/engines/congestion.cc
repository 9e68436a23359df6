// The per-peer window and its AIMD (congestion.h; docs/reliability.md).
#include "simnic/core/engines/congestion.h"

#include <algorithm>

namespace simnic::core {

namespace {

// Additive increase: the window grows by this much per window of bytes acknowledged. TCP Reno
// adds one segment per round trip (RFC 5681 3.1); simnic's unit of sending is a burst of up
// to 64 KiB (one GSO send), so that is its "segment".
constexpr uint64_t kIncreasePerWindow = 64u << 10;
// The most a woken QP may send past those waiting in one turn: one burst of 64 KiB, so that
// hundreds of QPs behind it each get their turn soon.
constexpr uint64_t kMaxGrant = 64u << 10;

}  // namespace

CongestionControl::CongestionControl(CongestionConfig config) : config_(config) {}

void CongestionControl::set_cap(uint64_t cap_bytes) {
  config_.cap_bytes = std::max<uint64_t>(cap_bytes, 1);
  for (auto& [ip, p] : peers_) {
    p.cwnd = std::min(p.cwnd, config_.cap_bytes);
    freed_peers_.push_back(ip);  // a raised cap may let waiters go
  }
}

PeerWindow& CongestionControl::peer(uint32_t ip) {
  auto [it, fresh] = peers_.try_emplace(ip);
  if (fresh) {
    it->second.cwnd = config_.cap_bytes;
    it->second.acked_since_cut = config_.cap_bytes;  // the first loss cuts at once
  }
  return it->second;
}

bool CongestionControl::admit(uint32_t qpn, uint32_t peer_ip, uint64_t bytes) {
  PeerWindow& p = peer(peer_ip);
  QpCharge& q = qps_[qpn];
  if (q.queued) return false;  // its turn comes from take_wakeups
  if (q.bytes == 0) q.peer_ip = peer_ip;
  q.quantum = std::max<uint64_t>(bytes, 1);
  const bool fits = p.in_flight == 0 || p.in_flight + bytes <= p.cwnd;
  if (fits && (p.waiting.empty() || q.grant >= bytes)) {
    if (q.grant) q.used_grant = true;
    q.grant -= std::min(q.grant, bytes);
    return true;
  }
  if (q.unasked && q.bytes) return true;  // one packet more, asking for the ACK (would_wait)
  // Full, or others were first: wait in line, at the back. Woken QPs that found the window full
  // before sending anything (one woken before them took more than one packet) go back to the
  // head, in the order they were woken.
  if (q.grant && !q.used_grant)
    p.waiting.insert(p.waiting.begin() + long(std::min(p.returned++, p.waiting.size())), qpn);
  else p.waiting.push_back(qpn);
  q.queued = true;
  q.grant = 0;
  ++waits_;
  return false;
}

bool CongestionControl::would_wait(uint32_t qpn, uint32_t peer_ip, uint64_t bytes) const {
  auto pit = peers_.find(peer_ip);
  auto qit = qps_.find(qpn);
  if (pit == peers_.end() || qit == qps_.end()) return false;
  const PeerWindow& p = pit->second;
  if (p.in_flight + 2 * bytes > p.cwnd) return true;       // the next does not fit
  return !p.waiting.empty() && qit->second.grant < bytes;  // others are first
}

void CongestionControl::note_ack_req(uint32_t qpn, bool asked) {
  auto it = qps_.find(qpn);
  if (it != qps_.end()) it->second.unasked = !asked;
}

void CongestionControl::release(QpCharge& q, uint64_t bytes, bool rewound) {
  PeerWindow& p = peer(q.peer_ip);
  bytes = std::min(bytes, q.bytes);
  q.bytes -= bytes;
  p.in_flight -= std::min(bytes, p.in_flight);
  if (!rewound) grow(p, bytes);
  if (!p.waiting.empty()) freed_peers_.push_back(q.peer_ip);
}

void CongestionControl::grow(PeerWindow& p, uint64_t acked) {
  p.acked_since_cut += acked;
  if (p.cwnd >= config_.cap_bytes || p.cwnd == 0) return;
  const uint64_t step = std::max<uint64_t>(1, acked * kIncreasePerWindow / p.cwnd);
  p.cwnd = std::min(config_.cap_bytes, p.cwnd + step);
}

void CongestionControl::set_charge(uint32_t qpn, uint32_t peer_ip, uint64_t bytes, bool rewound) {
  auto it = qps_.find(qpn);
  if (it == qps_.end()) {
    if (bytes == 0) return;
    it = qps_.try_emplace(qpn).first;
    it->second.peer_ip = peer_ip;
  }
  QpCharge& q = it->second;
  if (q.peer_ip != peer_ip) {  // connected elsewhere since (RESET, then RTR to a new peer)
    release(q, q.bytes, true);
    q.peer_ip = peer_ip;
  }
  if (bytes < q.bytes) {
    release(q, q.bytes - bytes, rewound);
    return;
  }
  peer(peer_ip).in_flight += bytes - q.bytes;
  q.bytes = bytes;
}

void CongestionControl::forget(uint32_t qpn) {
  auto it = qps_.find(qpn);
  if (it == qps_.end()) return;
  QpCharge& q = it->second;
  release(q, q.bytes, true);
  if (q.queued) {
    auto& w = peer(q.peer_ip).waiting;
    w.erase(std::remove(w.begin(), w.end(), qpn), w.end());
  }
  PeerWindow& p = peer(q.peer_ip);
  if (!p.waiting.empty()) freed_peers_.push_back(q.peer_ip);
  qps_.erase(it);
}

void CongestionControl::on_loss(uint32_t peer_ip) {
  PeerWindow& p = peer(peer_ip);
  if (p.acked_since_cut < p.cwnd) return;  // one cut per window: this loss is the same event
  const uint64_t floor = std::min(config_.floor_bytes, config_.cap_bytes / 4);
  p.cwnd = std::max(floor, p.cwnd / 2);
  p.acked_since_cut = 0;
  ++cuts_;
}

std::vector<uint32_t> CongestionControl::take_wakeups() {
  std::vector<uint32_t> out;
  std::sort(freed_peers_.begin(), freed_peers_.end());
  freed_peers_.erase(std::unique(freed_peers_.begin(), freed_peers_.end()), freed_peers_.end());
  for (uint32_t ip : freed_peers_) {
    PeerWindow& p = peer(ip);
    p.returned = 0;
    uint64_t reserved = 0;  // granted to those woken so far
    while (!p.waiting.empty()) {
      const uint32_t qpn = p.waiting.front();
      QpCharge& q = qps_[qpn];
      const uint64_t after = p.in_flight + reserved;
      if (after != 0 && after + q.quantum > p.cwnd) break;
      p.waiting.pop_front();
      q.queued = false;
      q.grant = std::max(q.quantum, std::min(kMaxGrant, p.cwnd > after ? p.cwnd - after : 0));
      q.used_grant = false;
      reserved += q.grant;
      out.push_back(qpn);
      ++wakeups_;
    }
  }
  freed_peers_.clear();
  return out;
}

void CongestionControl::end_turn(uint32_t qpn) {
  auto it = qps_.find(qpn);
  if (it == qps_.end()) return;
  it->second.grant = 0;
  // A woken QP that sent nothing leaves credit unused: give the next in line its chance.
  PeerWindow& p = peer(it->second.peer_ip);
  if (!p.waiting.empty() && (p.in_flight == 0 || p.in_flight < p.cwnd)) freed_peers_.push_back(it->second.peer_ip);
}

uint64_t CongestionControl::in_flight(uint32_t peer_ip) const {
  auto it = peers_.find(peer_ip);
  return it == peers_.end() ? 0 : it->second.in_flight;
}

uint64_t CongestionControl::window(uint32_t peer_ip) const {
  auto it = peers_.find(peer_ip);
  return it == peers_.end() ? config_.cap_bytes : it->second.cwnd;
}

uint64_t CongestionControl::charge(uint32_t qpn) const {
  auto it = qps_.find(qpn);
  return it == qps_.end() ? 0 : it->second.bytes;
}

bool CongestionControl::queued(uint32_t qpn) const {
  auto it = qps_.find(qpn);
  return it != qps_.end() && it->second.queued;
}

CongestionStats CongestionControl::stats() const {
  CongestionStats s;
  s.waits = waits_;
  s.wakeups = wakeups_;
  s.cuts = cuts_;
  s.peers = peers_.size();
  for (const auto& [ip, p] : peers_) {
    s.in_flight += p.in_flight;
    s.waiting += p.waiting.size();
    if (!s.min_cwnd || p.cwnd < s.min_cwnd) s.min_cwnd = p.cwnd;
  }
  return s;
}

}  // namespace simnic::core
