// Trace events: emitted where the engines change state (docs/trace-format.md). Building an
// event costs nothing when no one listens; when someone does, each event is one JSON line.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "simnic/core/observe/trace_kinds.h"

namespace simnic::core {

std::string json_escape(const std::string& s);

// An event in the tracer's compact form (what TraceEvent builds: numbers as they are, no
// JSON), turned into its JSON line (docs/trace-format.md).
std::string trace_json(std::string_view event);
void append_trace_json(std::string& out, std::string_view event);
// Whether the event (compact form) is of `kind`.
bool trace_event_is(std::string_view event, TraceKind kind);

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void write_line(const std::string& json_line) = 0;
  // One event as the tracer built it. A sink that keeps events nobody reads yet (a viewer's
  // history) overrides it and makes the JSON only when someone reads them: with the history
  // on, every packet makes several events.
  virtual void write_event(std::string_view event) { write_line(trace_json(event)); }
};

class Tracer;

// One event under construction, in the compact form (trace_json); emitted when it goes out of
// scope.
class TraceEvent {
 public:
  TraceEvent(Tracer* t, TraceKind kind);  // t == nullptr: a no-op event
  ~TraceEvent();
  TraceEvent(const TraceEvent&) = delete;
  TraceEvent& operator=(const TraceEvent&) = delete;
  // Moved out of a helper that starts the event for its caller to finish (Device::drop).
  TraceEvent(TraceEvent&& o) noexcept : t_(o.t_), line_(std::move(o.line_)) { o.t_ = nullptr; }
  TraceEvent& operator=(TraceEvent&&) = delete;

  TraceEvent& u(const char* key, uint64_t v);
  TraceEvent& i(const char* key, int64_t v);
  TraceEvent& b(const char* key, bool v);
  TraceEvent& s(const char* key, std::string_view v);
  TraceEvent& ip(const char* key, uint32_t ipv4);             // "127.0.0.2" (host order), made only as JSON
  TraceEvent& hex(const char* key, uint64_t v);               // "0x..." string (addresses)
  TraceEvent& raw(const char* key, const std::string& json);  // a pre-built object
  bool on() const { return t_ != nullptr; }

 private:
  void key(const char* k);
  Tracer* t_;
  std::string line_;
};

class Tracer {
 public:
  void set_sink(TraceSink* sink) { sink_ = sink; }
  void set_nic(const std::string& name) { nic_json_ = json_escape(name); }
  void set_time(uint64_t t_ns) { t_ns_ = t_ns; }
  // Wall-clock time (CLOCK_REALTIME, ns) matching the current t_ns, so that a viewer can line
  // up the traces of several NICs. Set by the I/O layer; the core has no clock.
  void set_wall_ns(uint64_t w) { wall_ns_ = w; }
  uint64_t wall_ns() const { return wall_ns_; }
  bool on() const { return sink_ != nullptr; }
  // The engines' steps (engine_steps events, one per packet) are traced only when asked
  // (simnicd --trace-steps): a viewer's history would otherwise pay for them on every packet.
  void set_engine_steps(bool on) { steps_ = on; }
  bool engine_steps_on() const { return sink_ != nullptr && steps_; }
  uint64_t next_seq() const { return seq_ + 1; }
  // Usage: tracer.event(TraceKind::kQpState).u("qp", qpn).s("from", "INIT");
  TraceEvent event(TraceKind kind) { return TraceEvent(on() ? this : nullptr, kind); }

 private:
  friend class TraceEvent;
  TraceSink* sink_ = nullptr;
  std::string nic_json_;  // the NIC's name, escaped once
  std::string spare_;     // the last event's buffer, kept for the next: no allocation per event
  uint64_t seq_ = 0;
  uint64_t t_ns_ = 0;
  uint64_t wall_ns_ = 0;
  bool steps_ = false;
};

}  // namespace simnic::core
