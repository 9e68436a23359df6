// Step mode (`simnic step NAME on|off|next [N]|status`): while the NIC is paused it holds every
// input (packets, doorbells, continuing engine work) in arrival order and simulated time
// stands still; each step performs one held input, or, with none held, fires the next due
// timer. NicServer feeds it the inputs that arrive while paused and asks it what to report.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "simnic/core/device.h"
#include "simnic/io/sim_clock.h"

namespace simnic::io {

class StepController {
 public:
  // What the server does for the controller: ring a context's doorbell (found by id: the
  // session may have gone), re-arm the transport timer and continue work after an input, and
  // stop the transport timer when the NIC pauses.
  struct Hooks {
    std::function<void(uint32_t context_id, uint64_t now)> ring_doorbell;
    std::function<void()> after_event;
    std::function<void()> cancel_timer;
    std::function<void()> flush_trace;  // someone stepping may be reading the trace file
  };

  StepController(core::Device& device, SimClock& clock, std::string nic_name, Hooks hooks)
      : device_(device), clock_(clock), nic_name_(std::move(nic_name)), hooks_(std::move(hooks)) {}

  bool paused() const { return clock_.paused(); }
  void hold_packet(uint32_t src_ip, uint16_t src_port, std::span<const uint8_t> bytes, uint32_t dst_ip,
                   uint8_t tos = 0);
  // One held doorbell per context in a row: a second ring before the first is performed adds nothing.
  void hold_doorbell(uint32_t context_id);
  void hold_pending_work();
  // The context closed: its held doorbells go with it.
  void forget_context(uint32_t context_id);
  // Runs one `simnic step` command; returns the status lines (or the error, with *status set).
  std::string command(const std::string& cmd, int* status);

 private:
  // An input held back while the NIC is paused.
  struct HeldInput {
    enum Kind { kPacket, kDoorbell, kPending } kind;
    uint32_t src_ip = 0;
    uint16_t src_port = 0;
    std::vector<uint8_t> bytes;
    uint32_t context_id = 0;
    uint32_t dst_ip = 0;  // a packet's destination: 0 (this NIC) or a multicast group
    uint8_t tos = 0;      // a packet's IPv4 TOS (its GRH traffic class)
  };

  uint64_t now() const;
  void pause();
  void resume();
  std::string step(int count, int* status);
  void perform_next();
  std::string report() const;

  core::Device& device_;
  SimClock& clock_;
  std::string nic_name_;
  Hooks hooks_;
  std::deque<HeldInput> held_;
  bool pending_held_ = false;
};

}  // namespace simnic::io
