// What the NIC tells people: its log (with the limits that keep a storm of complaints off the
// disk), the drop table's count-log-trace of one dropped packet, the notices a program fetches
// about its QPs, and why the last verb was refused. Reaches only the logger, the counters, the
// tracer, the clock and the QP table.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "simnic/core/env.h"
#include "simnic/core/objects/tables.h"
#include "simnic/core/observe/counters.h"
#include "simnic/core/observe/drop_reasons.h"
#include "simnic/core/observe/log_limiter.h"
#include "simnic/core/observe/trace.h"

namespace simnic::core {

class Journal {
 public:
  // now: the time of the event being handled (the owner's clock, read at each call).
  Journal(Logger& logger, DeviceCounters& counters, Tracer& tracer, const uint64_t& now, ObjectTables& tables)
      : logger_(logger), counters_(counters), tracer_(tracer), now_(now), tables_(tables) {}
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  void log(LogLevel level, const std::string& line) { logger_.log(level, line); }
  // A complaint that may repeat in a storm: written the first time, then at most once a second
  // per `what` and QP, with the count held back. `line` is built only when written.
  // Past that, all such lines share a budget per `what` and one for all (LogBudget), so a
  // sweep of QPNs cannot fill the disk; a summary says how many were suppressed.
  template <class MakeLine>
  void log_limited(LogLevel level, const char* what, uint32_t qpn, MakeLine&& line) {
    log_budget_summary();
    if (!log_budget_.has_room(what, now_)) return log_budget_.suppressed(what);
    uint64_t held = 0;
    if (!log_limiter_.allow(std::string(what) + ":" + std::to_string(qpn), now_, &held)) return;
    log_budget_.spend(what);
    std::string text = line();
    notice(qpn, text);
    if (held) text += " (" + std::to_string(held) + " more like this since the last report)";
    log(level, text);
  }
  // Counts, logs (if its row says so) and traces one dropped packet by its row of the drop
  // table (drop_reasons.h); `line` says what was wrong with this packet, built only when it is
  // logged or traced. Returns the pkt_drop event, for the caller to add fields to.
  template <class MakeLine>
  TraceEvent drop(Drop why, uint32_t qpn, MakeLine&& line) {
    const DropReason& r = drop_reason(why);
    if (r.counter) ++(counters_.*r.counter);
    if (r.logged) log_limited(r.level, r.name, qpn, line);
    return trace_drop(tracer_, why, qpn, tracer_.on() ? line() : std::string());
  }
  void log_budget_summary();  // the LogBudget's summary line, when one is due

  // The program that owns QP `qpn` is told too, when it next asks (a bounded queue).
  void notice(uint32_t qpn, const std::string& text);
  // What the NIC noticed about ctx's QPs since the last call, one per line; clears it.
  std::string take_notices(Context* ctx);

  // Refuses a verb with `err`, keeping `why` for the application (take_refusal).
  int refuse(int err, std::string why) {
    refusal_ = std::move(why);
    return err;
  }
  // Why the last refused verb was refused ("" if it gave no reason); taking it clears it.
  std::string take_refusal() { return std::exchange(refusal_, {}); }

 private:
  Logger& logger_;
  DeviceCounters& counters_;
  Tracer& tracer_;
  const uint64_t& now_;
  ObjectTables& tables_;  // notices go to the context owning the QP
  std::string refusal_;   // see take_refusal
  LogLimiter log_limiter_;
  LogBudget log_budget_;  // all log_limited lines together
};

}  // namespace simnic::core
