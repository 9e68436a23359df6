// The connection manager's log for complaints a flood repeats (forged or malformed requests,
// requests refused or evicted): owns the rate limiter; calls Logger.
#pragma once
#include <string>

#include "simnic/core/env.h"
#include "simnic/core/observe/log_limiter.h"

namespace simnic::core {

class CmFloodLog {
 public:
  explicit CmFloodLog(Logger& logger) : logger_(logger) {}

  // Written the first time, then at most once a second per `what`, with the count held back.
  // `line` is built only when written.
  template <class MakeLine>
  void log(LogLevel level, const char* what, uint64_t now, MakeLine&& line) {
    uint64_t held = 0;
    if (!limiter_.allow(what, now, &held)) return;
    std::string text = line();
    if (held) text += " (" + std::to_string(held) + " more like this since the last report)";
    logger_.log(level, text);
  }

 private:
  Logger& logger_;
  LogLimiter limiter_;
};

}  // namespace simnic::core
