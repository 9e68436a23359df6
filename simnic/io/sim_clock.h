// Simulated time: the monotonic clock minus the time spent paused in step mode, so that a
// user who pauses the NIC does not make its ACK timers fire.
#pragma once
#include <cstdint>

namespace simnic::io {

class SimClock {
 public:
  explicit SimClock(uint64_t real_now) : origin_(real_now) {}
  uint64_t now(uint64_t real_now) const {
    uint64_t held = paused_ ? real_now - pause_start_ : 0;
    return real_now - origin_ - paused_total_ - held;
  }
  bool paused() const { return paused_; }
  void pause(uint64_t real_now) {
    if (!paused_) paused_ = true, pause_start_ = real_now;
  }
  void resume(uint64_t real_now) {
    if (paused_) paused_ = false, paused_total_ += real_now - pause_start_;
  }
  // While paused: move simulated time forward to `sim_t` (to fire a due timer on a step).
  void advance_to(uint64_t sim_t, uint64_t real_now) {
    uint64_t cur = now(real_now);
    if (sim_t > cur) paused_total_ -= (sim_t - cur);
  }
  // The real (monotonic) time at which simulated time reaches `sim_t`, if not paused.
  uint64_t real_time_of(uint64_t sim_t) const { return sim_t + origin_ + paused_total_; }

 private:
  uint64_t origin_;
  uint64_t paused_total_ = 0;
  uint64_t pause_start_ = 0;
  bool paused_ = false;
};

}  // namespace simnic::io
