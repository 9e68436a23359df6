#include "viz/model/timeline.h"

#include <algorithm>

#include "viz/model/packet_class.h"

namespace simnic::viz {

void Timeline::append(std::vector<Event> events) {
  for (Event& e : events) {
    size_t pos = end_pos();
    checkpoint_if_due(pos);
    if (e.kind == "nic_up") nic_by_addr_[e.s("addr")] = e.nic;
    if (e.kind == "pkt_tx") {
      Flight f;
      f.tx_pos = pos;
      f.from_nic = e.nic;
      auto to = nic_by_addr_.find(e.s("dst"));
      f.to_nic = to == nic_by_addr_.end() ? "" : to->second;
      f.dropped = e.s("fault") == "drop";
      // A request whose PSN is not beyond the highest this QP already sent is a retransmission
      // (24-bit PSN arithmetic: "not beyond" = within half the space behind).
      PacketClass cls = classify_packet(e);
      if (cls == PacketClass::kSend || cls == PacketClass::kWrite || cls == PacketClass::kReadRequest ||
          (cls == PacketClass::kAtomic && !e.has("aeth"))) {
        auto [it, fresh] = highest_request_psn_.try_emplace({e.nic, e.u("qp")}, e.u("psn"));
        uint64_t behind = (it->second - e.u("psn")) & 0xFFFFFF;
        if (!fresh && behind < (1u << 23)) f.retransmission = true;
        else it->second = e.u("psn");
      }
      flights_.push_back(f);
      if (!f.dropped) {
        auto& waiting = awaiting_rx_[packet_key(e)];
        waiting.push_back(flights_.size() - 1);
        if (e.s("fault") == "dup") waiting.push_back(flights_.size() - 1);
      }
    } else if (e.kind == "pkt_rx") {
      auto it = awaiting_rx_.find(packet_key(e));
      if (it != awaiting_rx_.end() && !it->second.empty()) {
        Flight& f = flights_[it->second.front()];
        if (f.rx_pos == Flight::kNever) f.rx_pos = pos;  // a duplicate's second copy keeps the first
        // Multicast: the group is no NIC; the flight is drawn to the first member that got it.
        if (f.to_nic.empty()) f.to_nic = e.nic;
        it->second.pop_front();
        if (it->second.empty()) awaiting_rx_.erase(it);
      }
    }
    index_[e.nic][e.seq] = pos;
    live_[e.nic].name = e.nic;
    live_[e.nic].apply(e, pos);
    events_.push_back(std::move(e));
  }
}

void Timeline::checkpoint_if_due(size_t pos) {
  if (pos < next_checkpoint_) return;
  checkpoints_[pos] = live_;
  nic_states_copied_ += live_.size();
  next_checkpoint_ = pos + std::max(kCheckpointEvery, live_.size());
}

World Timeline::state_at(size_t pos) const {
  pos = std::clamp(pos, base_, end_pos());
  if (pos == end_pos()) return live_;
  World w = base_state_;
  size_t from = base_;
  auto cp = checkpoints_.upper_bound(pos);
  if (cp != checkpoints_.begin()) {
    --cp;
    if (cp->first >= base_) w = cp->second, from = cp->first;
  }
  for (size_t p = from; p < pos; ++p) {
    const Event& e = at(p);
    NicState& n = w[e.nic];
    n.name = e.nic;
    n.apply(e, p);
  }
  return w;
}

std::vector<Timeline::FlightView> Timeline::flights_at(double p, double linger) const {
  // `p` events are applied: a packet is on the wire once its pkt_tx is applied (p > tx_pos)
  // and until its pkt_rx is (p > rx_pos).
  std::vector<FlightView> out;
  auto first = std::lower_bound(flights_.begin(), flights_.end(), size_t(std::max(0.0, p - 4096.0)),
                                [](const Flight& f, size_t v) { return f.tx_pos < v; });
  for (auto it = first; it != flights_.end() && double(it->tx_pos) < p; ++it) {
    const Flight& f = *it;
    double since = p - double(f.tx_pos + 1);  // >= -1: how far past the send the playhead is
    if (f.rx_pos != Flight::kNever) {
      if (p > double(f.rx_pos)) continue;
      double span = double(f.rx_pos - f.tx_pos);
      out.push_back({&f, std::clamp((since + 1) / std::max(1.0, span), 0.0, 1.0)});
    } else if (f.dropped || f.to_nic.empty()) {
      if (since > linger) continue;
      out.push_back({&f, std::clamp((since + 1) / (linger + 1), 0.0, 1.0)});
    } else if (since <= linger * 4) {
      // Sent, not received yet (live: still travelling): stays before mid-wire.
      out.push_back({&f, std::clamp((since + 1) / (linger * 8), 0.0, 0.5)});
    }
  }
  return out;
}

size_t Timeline::find(const std::string& nic, uint64_t seq) const {
  auto n = index_.find(nic);
  if (n == index_.end()) return end_pos();
  auto s = n->second.find(seq);
  return s == n->second.end() || s->second < base_ ? end_pos() : s->second;
}

void Timeline::trim(size_t max_events) {
  if (events_.size() <= max_events) return;
  size_t new_base = end_pos() - max_events / 2;
  base_state_ = state_at(new_base);
  events_.erase(events_.begin(), events_.begin() + (new_base - base_));
  base_ = new_base;
  checkpoints_.erase(checkpoints_.begin(), checkpoints_.lower_bound(base_));
  auto keep = std::find_if(flights_.begin(), flights_.end(), [&](const Flight& f) { return f.tx_pos >= base_; });
  size_t dropped = size_t(keep - flights_.begin());
  flights_.erase(flights_.begin(), keep);
  for (auto it = awaiting_rx_.begin(); it != awaiting_rx_.end();) {
    auto& q = it->second;
    std::deque<size_t> kept;
    for (size_t i : q)
      if (i >= dropped) kept.push_back(i - dropped);
    q.swap(kept);
    it = q.empty() ? awaiting_rx_.erase(it) : std::next(it);
  }
  for (auto& [nic, m] : index_) std::erase_if(m, [&](const auto& kv) { return kv.second < base_; });
}

std::vector<std::string> Timeline::nics() const {
  std::vector<std::string> out;
  for (auto& [name, s] : live_) out.push_back(name);
  return out;
}

}  // namespace simnic::viz
