#include "viz/model/timeline_merge.h"

#include <cstdlib>

namespace simnic::viz {

PacketKey packet_key(const Event& e) { return {e.s("src"), e.s("dst"), e.u("opcode_num"), e.u("psn"), e.u("dest_qp")}; }

bool is_multicast_packet(const Event& e) {
  const std::string dst = e.s("dst");
  const int first = std::atoi(dst.c_str());
  return first >= 224 && first <= 239;
}

void TimelineMerge::push(Event e, uint64_t arrival_ns) {
  auto it = streams_.try_emplace(e.nic).first;
  Stream& s = it->second;
  // nic_up moves the stream's clock: its queued head (if any) is re-sorted under the new time.
  const bool had_head = !s.q.empty();
  if (had_head && e.kind == "nic_up") forget_head(it->first, s);
  if (e.kind == "nic_up") {
    if (uint64_t w = e.u("wall_ns")) s.wall_offset = int64_t(w) - int64_t(e.t_ns);
    s.addr = e.s("addr");
    nic_by_addr_[s.addr] = e.nic;
  }
  const bool moved_clock = e.kind == "nic_up";
  s.q.push_back({std::move(e), arrival_ns});
  if (!had_head) ++streams_with_input_;
  if (!had_head || moved_clock) add_head(it->first, s);
}

void TimelineMerge::forget_head(const std::string& nic, const Stream& s) {
  Head h = head_of(nic, s);
  ready_.erase(h);
  blocked_.erase(h);  // its waiting_ entry goes stale: unblock_waiting_for checks blocked_
}

void TimelineMerge::add_head(const std::string& nic, const Stream& s) { ready_.insert(head_of(nic, s)); }

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

// The earliest ready head that may go now. Heads found waiting for their transmission move to
// blocked_ on the way (they come back when it is released), so each is passed over once.
std::optional<TimelineMerge::Head> TimelineMerge::pick_ready(bool all_in, uint64_t now_ns,
                                                             bool every_stream_has_input) {
  for (auto it = ready_.begin(); it != ready_.end();) {
    ++heads_examined_;
    const Queued& h = streams_.at(it->second).q.front();
    // Live, a stream that has nothing queued may still send something older: wait for it,
    // unless the candidate has waited long enough.
    bool ripe = all_in || every_stream_has_input || now_ns >= h.arrival_ns + hold_ns_;
    if (!ripe) {
      ++it;
      continue;
    }
    bool late_enough = !all_in && now_ns >= h.arrival_ns + 5 * hold_ns_;
    if (!blocked(h.e) || late_enough) return *it;
    waiting_.emplace(packet_key(h.e), *it);
    blocked_.insert(*it);
    it = ready_.erase(it);
  }
  return std::nullopt;
}

// Live only: the earliest blocked head whose sender is late beyond the bound goes anyway.
// (A live viewer watches a handful of NICs, so this pass stays short.)
std::optional<TimelineMerge::Head> TimelineMerge::pick_late_blocked(uint64_t now_ns) {
  for (const Head& b : blocked_) {
    ++heads_examined_;
    if (now_ns >= streams_.at(b.second).q.front().arrival_ns + 5 * hold_ns_) return b;
  }
  return std::nullopt;
}

void TimelineMerge::unblock_waiting_for(const PacketKey& key) {
  auto [first, last] = waiting_.equal_range(key);
  for (auto it = first; it != last; ++it)
    if (blocked_.erase(it->second)) ready_.insert(it->second);
  waiting_.erase(first, last);
}

void TimelineMerge::release_head(const Head& head, std::vector<Event>* out) {
  ready_.erase(head);
  blocked_.erase(head);
  Stream& s = streams_.at(head.second);
  Event e = std::move(s.q.front().e);
  s.q.pop_front();
  if (!s.q.empty()) add_head(head.second, s);
  else --streams_with_input_;
  released(e);
  if (e.kind == "pkt_tx") unblock_waiting_for(packet_key(e));
  out->push_back(std::move(e));
}

std::vector<Event> TimelineMerge::drain(bool all_in, uint64_t now_ns) {
  std::vector<Event> out;
  for (;;) {
    bool every_stream_has_input = streams_with_input_ == streams_.size();
    std::optional<Head> best = pick_ready(all_in, now_ns, every_stream_has_input);
    if (!all_in)
      if (auto late = pick_late_blocked(now_ns); late && (!best || *late < *best)) best = late;
    // Everything left is a reception without its transmission (e.g. a duplicate the fault
    // injector made, or a sender whose trace started late): let it through in time order.
    if (!best && all_in && !blocked_.empty()) best = *blocked_.begin();
    if (!best) break;
    release_head(*best, &out);
  }
  return out;
}

}  // namespace simnic::viz
