#include "simnic/io/step_controller.h"

#include <algorithm>
#include <cerrno>
#include <sstream>

#include "simnic/io/udp_port.h"

namespace simnic::io {

namespace {
constexpr size_t kMaxHeld = 200000;  // packets held while paused before we start dropping
}

uint64_t StepController::now() const { return clock_.now(monotonic_ns()); }

void StepController::hold_packet(uint32_t src_ip, uint16_t src_port, std::span<const uint8_t> bytes, uint32_t dst_ip,
                                 uint8_t tos) {
  if (held_.size() < kMaxHeld)
    held_.push_back({HeldInput::kPacket, src_ip, src_port, {bytes.begin(), bytes.end()}, 0, dst_ip, tos});
}

void StepController::hold_doorbell(uint32_t context_id) {
  if (held_.empty() || held_.back().kind != HeldInput::kDoorbell || held_.back().context_id != context_id)
    held_.push_back({HeldInput::kDoorbell, 0, 0, {}, context_id});
}

void StepController::hold_pending_work() {
  if (pending_held_) return;
  pending_held_ = true;
  held_.push_back({HeldInput::kPending, 0, 0, {}, 0});
}

void StepController::forget_context(uint32_t context_id) {
  std::erase_if(held_,
                [&](const HeldInput& a) { return a.kind == HeldInput::kDoorbell && a.context_id == context_id; });
}

void StepController::perform_next() {
  HeldInput a = std::move(held_.front());
  held_.pop_front();
  switch (a.kind) {
    case HeldInput::kPacket: device_.on_packet(a.src_ip, a.src_port, a.bytes, now(), a.dst_ip, a.tos); break;
    case HeldInput::kDoorbell: hooks_.ring_doorbell(a.context_id, now()); break;
    case HeldInput::kPending:
      pending_held_ = false;
      device_.run_pending(now());
      break;
  }
}

// "on": hold every input and stop simulated time; one input at a time from now on.
void StepController::pause() {
  if (clock_.paused()) return;
  clock_.pause(monotonic_ns());
  device_.set_burst(1);
  hooks_.cancel_timer();
  device_.tracer().event(core::TraceKind::kStep).b("paused", true);
  if (device_.has_pending_work()) hold_pending_work();
}

// "off": perform everything held, in order, and let time run again.
void StepController::resume() {
  if (!clock_.paused()) return;
  clock_.resume(monotonic_ns());
  device_.set_burst(64);
  device_.tracer().event(core::TraceKind::kStep).b("paused", false);
  while (!held_.empty()) perform_next();
  pending_held_ = false;
  hooks_.after_event();
}

// "next [N]": N held inputs, or, with none held, the next due timer.
std::string StepController::step(int count, int* status) {
  if (!clock_.paused()) {
    *status = EINVAL;
    return "not paused: turn step mode on first (simnic step " + nic_name_ + " on)";
  }
  for (int i = 0; i < std::max(1, count); ++i) {
    if (!held_.empty()) {
      perform_next();
    } else if (uint64_t due = device_.next_deadline()) {
      clock_.advance_to(due, monotonic_ns());  // nothing else to do: let the timer fire
      device_.on_timer(now());
    } else {
      break;
    }
    hooks_.after_event();
  }
  return {};
}

std::string StepController::command(const std::string& cmd, int* status) {
  std::istringstream in(cmd);
  std::string verb;
  in >> verb;
  if (verb == "on") {
    pause();
  } else if (verb == "off") {
    resume();
  } else if (verb == "next" || verb == "step") {
    int n = 1;
    in >> n;
    if (std::string error = step(n, status); !error.empty()) return error;
  } else if (verb != "status" && !verb.empty()) {
    *status = EINVAL;
    return "unknown step command '" + verb + "' (on, off, next [N], status)";
  }
  hooks_.flush_trace();
  return report();
}

std::string StepController::report() const {
  std::ostringstream out;
  out << "paused " << (clock_.paused() ? 1 : 0) << "\n";
  out << "held " << held_.size() << "\n";
  if (!held_.empty()) {
    const HeldInput& a = held_.front();
    out << "next "
        << (a.kind == HeldInput::kPacket     ? "packet"
            : a.kind == HeldInput::kDoorbell ? "doorbell"
                                             : "engine work")
        << "\n";
  }
  out << "next_timer_ns " << device_.next_deadline() << "\n";
  out << "sim_time_ns " << now() << "\n";
  out << "trace_seq " << device_.tracer().next_seq() - 1 << "\n";
  return out.str();
}

}  // namespace simnic::io
