// Puts the events of several NICs into one order a viewer can walk. Each NIC numbers and
// times its own events; across NICs the order follows wall-clock time (nic_up's wall_ns), with
// one hard rule on top: a packet is never received before it was sent. A pkt_rx whose pkt_tx
// has not been released yet waits (unless the sender is not being watched, or, live, the
// sender's line is late beyond a bound).
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "viz/model/event.h"

namespace simnic::viz {

// What identifies a packet on the wire between a pkt_tx and its pkt_rx.
using PacketKey = std::tuple<std::string, std::string, uint64_t, uint64_t, uint64_t>;  // src, dst, opcode, psn, dest_qp
PacketKey packet_key(const Event& e);
// A packet to an IP multicast group (224.0.0.0/4): one pkt_tx, one pkt_rx per member NIC.
bool is_multicast_packet(const Event& e);

class TimelineMerge {
 public:
  // Live: events that arrived `hold_ns` ago may be released before every stream has spoken.
  explicit TimelineMerge(uint64_t hold_ns = 40'000'000) : hold_ns_(hold_ns) {}

  void push(Event e, uint64_t arrival_ns = 0);
  // Releases events in merged order. `all_in`: no more input will come (replay), so every
  // queued event goes out. Otherwise only those that are safe or old enough (live).
  std::vector<Event> drain(bool all_in, uint64_t now_ns = 0);
  size_t queued() const;
  // Queue heads looked at by drain so far: a few per released event, whatever the number of
  // NICs (what the hostile-trace test counts instead of timing).
  uint64_t heads_examined() const { return heads_examined_; }

 private:
  struct Queued {
    Event e;
    uint64_t arrival_ns;
  };
  struct Stream {
    std::deque<Queued> q;
    int64_t wall_offset = 0;  // wall_ns - t_ns, from nic_up
    std::string addr;
  };
  uint64_t abs_time(const Stream& s, const Event& e) const { return uint64_t(int64_t(e.t_ns) + s.wall_offset); }
  bool blocked(const Event& e) const;
  void released(const Event& e);

  // Each stream's first queued event, by (time, NIC name): the order drain releases them in,
  // so picking the next one costs a few set operations, not a pass over every stream (with
  // 20,000 NICs that pass made a trace take minutes to load).
  using Head = std::pair<uint64_t, std::string>;
  Head head_of(const std::string& nic, const Stream& s) const { return {abs_time(s, s.q.front().e), nic}; }
  void forget_head(const std::string& nic, const Stream& s);
  void add_head(const std::string& nic, const Stream& s);
  std::optional<Head> pick_ready(bool all_in, uint64_t now_ns, bool every_stream_has_input);
  std::optional<Head> pick_late_blocked(uint64_t now_ns);
  void release_head(const Head& h, std::vector<Event>* out);
  void unblock_waiting_for(const PacketKey& key);

  uint64_t hold_ns_;
  std::map<std::string, Stream> streams_;
  std::map<std::string, std::string> nic_by_addr_;
  std::map<PacketKey, int> credits_;  // packets sent and not received yet
  // Multicast packets sent: their receptions (any number) need only the send before them.
  // The oldest are forgotten beyond kMaxMulticastSent, so a long live session stays bounded.
  static constexpr size_t kMaxMulticastSent = 4096;
  std::deque<PacketKey> multicast_sent_;
  std::set<Head> ready_;                    // heads not known to wait for their transmission
  std::set<Head> blocked_;                  // receptions waiting for their transmission's release
  std::multimap<PacketKey, Head> waiting_;  // blocked_ heads by the packet they wait for
  size_t streams_with_input_ = 0;           // streams with something queued
  uint64_t heads_examined_ = 0;
};

}  // namespace simnic::viz
