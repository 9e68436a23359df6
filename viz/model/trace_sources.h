// Where events come from: recorded JSON-lines files (replay) or the live telemetry sockets
// <simnic dir>/<nic>.trace of running NICs. Plain POSIX I/O, no drawing.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "viz/model/timeline.h"
#include "viz/model/timeline_merge.h"

namespace simnic::viz {

// Loads recorded traces (one file per NIC, or one file holding several) into `timeline`.
// Returns false with *error set when a file cannot be read; malformed lines are skipped and
// counted in *skipped.
bool load_trace_files(const std::vector<std::string>& paths, Timeline* timeline, std::string* error,
                      size_t* skipped = nullptr);

// Live subscriptions to running NICs' telemetry sockets.
class LiveFeed {
 public:
  ~LiveFeed();
  // Connects to <dir>/<nic>.trace. The NIC first sends a snapshot of what exists.
  bool attach(const std::string& dir, const std::string& nic, std::string* error);
  // Reads whatever arrived (never blocks) and appends what is safe to order to `timeline`.
  // Returns the number of events appended.
  size_t poll(Timeline* timeline);
  bool any_connected() const;
  std::vector<std::string> nics() const;
  size_t malformed() const { return malformed_; }

 private:
  struct Conn {
    std::string nic;
    int fd = -1;
    std::string partial;
  };
  std::vector<Conn> conns_;
  TimelineMerge merge_;
  size_t malformed_ = 0;
};

uint64_t monotonic_now_ns();

}  // namespace simnic::viz
