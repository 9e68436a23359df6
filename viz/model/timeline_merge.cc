#include "viz/model/timeline_merge.h"

#include <cstdlib>

namespace simnic::viz {

PacketKey packet_key(const Event& e) {
  return {e.s("src"), e.s("dst"), e.u("opcode_num"), e.u("psn"), e.u("dest_qp")};
}

bool is_multicast_packet(const Event& e) {
  const std::string dst = e.s("dst");
  const int first = std::atoi(dst.c_str());
  return first >= 224 && first <= 239;
}

void TimelineMerge::push(Event e, uint64_t arrival_ns) {
  Stream& s = streams_[e.nic];
  if (e.kind == "nic_up") {
    if (uint64_t w = e.u("wall_ns")) s.wall_offset = int64_t(w) - int64_t(e.t_ns);
    s.addr = e.s("addr");
    nic_by_addr_[s.addr] = e.nic;
  }
  s.q.push_back({std::move(e), arrival_ns});
}

size_t TimelineMerge::queued() const {
  size_t n = 0;
  for (auto& [name, s] : streams_) n += s.q.size();
  return n;
}

// A reception waits for its transmission, when the sender is one of ours.
bool TimelineMerge::blocked(const Event& e) const {
  if (e.kind != "pkt_rx") return false;
  if (!nic_by_addr_.count(e.s("src"))) return false;
  auto it = credits_.find(packet_key(e));
  return it == credits_.end() || it->second <= 0;
}

void TimelineMerge::released(const Event& e) {
  if (is_multicast_packet(e)) {  // each member's reception may follow; none uses the credit up
    if (e.kind == "pkt_tx" && e.s("fault") != "drop" && credits_[packet_key(e)]++ == 0) {
      multicast_sent_.push_back(packet_key(e));
      if (multicast_sent_.size() > kMaxMulticastSent) {
        credits_.erase(multicast_sent_.front());
        multicast_sent_.pop_front();
      }
    }
    return;
  }
  if (e.kind == "pkt_tx") {
    std::string fault = e.s("fault");
    int copies = fault == "drop" ? 0 : fault == "dup" ? 2 : 1;
    if (copies) credits_[packet_key(e)] += copies;
  } else if (e.kind == "pkt_rx") {
    auto it = credits_.find(packet_key(e));
    if (it != credits_.end() && --it->second <= 0) credits_.erase(it);
  }
}

std::vector<Event> TimelineMerge::drain(bool all_in, uint64_t now_ns) {
  std::vector<Event> out;
  for (;;) {
    // Live, a stream that has nothing queued may still send something older: wait for it,
    // unless the candidate has waited long enough.
    bool every_stream_has_input = true;
    for (auto& [name, s] : streams_)
      if (s.q.empty()) every_stream_has_input = false;

    Stream* best = nullptr;
    Stream* best_blocked = nullptr;
    uint64_t best_t = 0, best_blocked_t = 0;
    for (auto& [name, s] : streams_) {
      if (s.q.empty()) continue;
      const Queued& h = s.q.front();
      bool ripe = all_in || every_stream_has_input || now_ns >= h.arrival_ns + hold_ns_;
      if (!ripe) continue;
      uint64_t t = abs_time(s, h.e);
      bool late_enough = !all_in && now_ns >= h.arrival_ns + 5 * hold_ns_;
      if (blocked(h.e) && !late_enough) {
        if (!best_blocked || t < best_blocked_t) best_blocked = &s, best_blocked_t = t;
        continue;
      }
      if (!best || t < best_t) best = &s, best_t = t;
    }
    // Everything left is a reception without its transmission (e.g. a duplicate the fault
    // injector made, or a sender whose trace started late): let it through in time order.
    if (!best && all_in) best = best_blocked;
    if (!best) break;
    Event e = std::move(best->q.front().e);
    best->q.pop_front();
    released(e);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace simnic::viz
