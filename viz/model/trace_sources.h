// Where events come from: recorded JSON-lines files (replay) or the live telemetry sockets
// <simnic dir>/<nic>.trace of running NICs. Plain POSIX I/O, no drawing.
#pragma once
#include <cstdint>
#include <functional>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "viz/model/timeline.h"
#include "viz/model/timeline_merge.h"

namespace simnic::viz {

// Cuts a byte stream into lines of at most kMaxLineBytes. A longer line (simnicd's longest is
// a few KiB: only a damaged or hostile file has one) is read through, counted and dropped, and
// never held whole: reading a trace takes memory bounded by the limit, whatever its lines.
class TraceLineReader {
 public:
  static constexpr size_t kMaxLineBytes = size_t(1) << 20;
  using OnLine = std::function<void(std::string_view)>;
  // Calls on_line for each complete line in `bytes` (without its newline).
  void feed(std::string_view bytes, const OnLine& on_line);
  // Feeds everything `in` holds, in 64 KiB pieces.
  void feed_from(std::istream& in, const OnLine& on_line);
  // The end of the input: a last line without a newline is a line too.
  void finish(const OnLine& on_line);
  size_t oversized() const { return oversized_; }
  size_t buffered_capacity() const { return partial_.capacity(); }

 private:
  void take(std::string_view piece, bool ends_line, const OnLine& on_line);
  std::string partial_;    // the current line so far (at most kMaxLineBytes)
  bool skipping_ = false;  // inside a line already over the limit
  size_t oversized_ = 0;
};

// Loads recorded traces (one file per NIC, or one file holding several) into `timeline`.
// Returns false with *error set when a file cannot be read; malformed lines are skipped and
// counted in *skipped, lines over TraceLineReader::kMaxLineBytes too (and also in *oversized).
bool load_trace_files(const std::vector<std::string>& paths, Timeline* timeline, std::string* error,
                      size_t* skipped = nullptr, size_t* oversized = nullptr);

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
  size_t malformed() const;  // lines that did not parse, or were over the line limit

 private:
  struct Conn {
    std::string nic;
    int fd = -1;
    TraceLineReader lines;
  };
  std::vector<Conn> conns_;
  TimelineMerge merge_;
  size_t malformed_ = 0;
};

uint64_t monotonic_now_ns();

}  // namespace simnic::viz
