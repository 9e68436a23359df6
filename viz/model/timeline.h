// The merged trace of all watched NICs as one walkable timeline: events by position, the
// packets in flight between them (pkt_tx matched to pkt_rx), and the NICs' state at any
// position (rebuilt from the nearest checkpoint, so scrubbing back and forth stays cheap).
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "viz/model/event.h"
#include "viz/model/nic_state.h"
#include "viz/model/timeline_merge.h"

namespace simnic::viz {

using World = std::map<std::string, NicState>;  // by NIC name

// One packet's trip: sent at tx_pos, received at rx_pos (none if it was lost).
struct Flight {
  size_t tx_pos = 0;
  static constexpr size_t kNever = ~size_t(0);
  size_t rx_pos = kNever;
  std::string from_nic, to_nic;  // to_nic "" when the receiver is not watched
  bool dropped = false;          // the fault injector dropped it
  bool retransmission = false;   // a request sent again (its PSN was already sent)
};

class Timeline {
 public:
  // Appends events already in merged order (from TimelineMerge::drain).
  void append(std::vector<Event> events);
  // Positions are absolute; with trimming the first kept one is first_pos().
  size_t first_pos() const { return base_; }
  size_t end_pos() const { return base_ + events_.size(); }
  bool empty() const { return events_.empty(); }
  const Event& at(size_t pos) const { return events_[pos - base_]; }
  // The state after applying every event before `pos` (pos == end_pos(): everything).
  World state_at(size_t pos) const;
  // Flights whose tx happened before `pos` and that are still travelling (or just dropped,
  // within `linger` positions), each with its progress 0..1 at fractional position `p`.
  struct FlightView {
    const Flight* flight;
    double progress;
  };
  std::vector<FlightView> flights_at(double p, double linger = 3.0) const;
  const std::vector<Flight>& flights() const { return flights_; }
  // Position of the event with (nic, seq), or end_pos() if it is not (or no longer) here.
  size_t find(const std::string& nic, uint64_t seq) const;
  // Keeps memory bounded for long live sessions: drops the oldest events beyond `max_events`.
  void trim(size_t max_events);
  std::vector<std::string> nics() const;
  // NIC states copied into checkpoints so far (what the hostile-trace test bounds).
  uint64_t nic_states_copied() const { return nic_states_copied_; }

 private:
  // A checkpoint copies every NIC's state, so one is taken every max(1024, NICs) events: the
  // copying costs at most one NIC state per event however many NICs a trace names, and
  // replaying from a checkpoint costs no more than the World copy state_at returns anyway.
  static constexpr size_t kCheckpointEvery = 1024;
  void checkpoint_if_due(size_t pos);
  size_t next_checkpoint_ = 0;
  uint64_t nic_states_copied_ = 0;
  std::deque<Event> events_;
  size_t base_ = 0;
  World base_state_;                                         // the state at base_
  std::map<size_t, World> checkpoints_;                      // position -> state before it
  World live_;                                               // the state at end_pos(), kept up to date
  std::vector<Flight> flights_;                              // ordered by tx_pos
  std::map<PacketKey, std::deque<size_t>> awaiting_rx_;      // key -> indices into flights_
  std::map<std::string, std::map<uint64_t, size_t>> index_;  // nic -> seq -> pos
  std::map<std::string, std::string> nic_by_addr_;
  std::map<std::pair<std::string, uint64_t>, uint64_t> highest_request_psn_;  // (nic, qp) -> PSN
};

}  // namespace simnic::viz
