// Where trace events go: a JSON-lines file (--trace) and every subscriber of the telemetry
// socket <dir>/<nic>.trace. A subscriber that stops reading is dropped, never waited for.
// The hub also keeps the NIC's recent history (a bounded ring of the latest events), so that a
// viewer attaching after a short program ran, or mid-run, still sees what happened: a new
// subscriber gets the history first (the original lines, oldest first), then a snapshot of
// what exists now (each line marked "snapshot":true), then every new event.
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdio>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <string>

#include "simnic/core/observe/trace.h"
#include "simnic/io/output_file.h"

namespace simnic::io {

class TraceHub final : public core::TraceSink {
 public:
  explicit TraceHub(boost::asio::io_context& io) : io_(io), accept_backoff_(io) {}
  ~TraceHub() override;

  // The JSON-lines file (an OutputFile: exclusive, bounded by `max_bytes`, whole lines only).
  bool open_file(const std::string& path, std::string* error) {
    return open_file(path, kDefaultOutputMaxBytes, nullptr, error);
  }
  bool open_file(const std::string& path, uint64_t max_bytes, core::Logger* log, std::string* error);
  // Listens on `path`; `on_subscribe` runs for each new subscriber (to send it a snapshot).
  bool listen(const std::string& path, std::string* error, std::function<void()> on_subscribe);
  void close();
  // While listening with the history on, every event is kept in it, so tracing is on: that
  // costs the data path (ib_write_bw ~20% on a 2-vCPU machine); --no-history saves it.
  bool active() const { return file_.is_open() || !subscribers_.empty() || (listener_ != nullptr && history_on_); }
  void set_history(bool on) { history_on_ = on; }
  void write_line(const std::string& line) override;
  // The history keeps events in the tracer's compact form; the JSON is made only for the file,
  // subscribers, and the history when a viewer attaches (docs/performance.md, "Tracing's cost").
  void write_event(std::string_view event) override;
  void flush_file() { file_.flush(); }
  const OutputFile& file() const { return file_; }
  // While a snapshot is sent, lines go to the newest subscriber only.
  void begin_snapshot() { snapshot_only_ = true; }
  void end_snapshot() { snapshot_only_ = false; }
  size_t subscribers() const { return subscribers_.size(); }
  // The history's bounds: the newest lines up to this many, and up to this many bytes.
  static constexpr size_t kHistoryLines = 100'000;
  static constexpr size_t kHistoryBytes = 16 << 20;
  size_t history_lines() const { return history_.size(); }

 private:
  struct Subscriber {
    std::unique_ptr<boost::asio::posix::stream_descriptor> sd;
    std::string pending;   // bytes the socket did not take yet
    bool waiting = false;  // a wait for writability is armed
    bool dead = false;
    size_t max_pending = 0;  // the backlog allowed before it is cut off (its history fits)
  };
  using SubscriberPtr = std::shared_ptr<Subscriber>;
  void accept_next();
  bool flush(Subscriber& s);
  // The rest of `pending` goes out when the socket can take it, even if no event follows
  // (a paused NIC emits nothing more, but its subscriber must still see every line).
  void send_later(const SubscriberPtr& s);
  void drop(const SubscriberPtr& s);
  // A line to the file and every subscriber (or only to the newest during a snapshot).
  void deliver(const std::string& line);
  // History entries: a tag, then a JSON line (kJsonEntry) or a compact event (kEventEntry).
  static constexpr char kJsonEntry = 'J', kEventEntry = 'E';
  void remember(char tag, std::string_view body, bool nic_up);
  // A viewer may attach later, and this line is not a snapshot's (those are not history).
  bool keeps_history() const { return !snapshot_only_ && listener_ && history_on_; }
  static void append_entry(std::string& out, const std::string& entry);
  void replay_history(Subscriber& s);

  boost::asio::io_context& io_;
  OutputFile file_;
  std::string socket_path_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> listener_;
  boost::asio::steady_timer accept_backoff_;  // out of descriptors: accept again later, not at once
  std::list<SubscriberPtr> subscribers_;
  std::function<void()> on_subscribe_;
  bool snapshot_only_ = false;
  std::deque<std::string> history_;  // the newest events, oldest first
  size_t history_bytes_ = 0;
  bool history_on_ = true;
  std::string first_nic_up_;  // the NIC's own nic_up (its clock), kept when the ring drops it
  std::string json_;          // write_event's line, reused
};

}  // namespace simnic::io
