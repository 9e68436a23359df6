// Where trace events go: a JSON-lines file (--trace) and every subscriber of the telemetry
// socket <dir>/<nic>.trace. A subscriber that stops reading is dropped, never waited for.
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdio>
#include <functional>
#include <list>
#include <memory>
#include <string>

#include "simnic/core/trace.h"

namespace simnic::io {

class TraceHub final : public core::TraceSink {
 public:
  explicit TraceHub(boost::asio::io_context& io) : io_(io), accept_backoff_(io) {}
  ~TraceHub() override;

  bool open_file(const std::string& path, std::string* error);
  // Listens on `path`; `on_subscribe` runs for each new subscriber (to send it a snapshot).
  bool listen(const std::string& path, std::string* error, std::function<void()> on_subscribe);
  void close();
  bool active() const { return file_ || !subscribers_.empty(); }
  void write_line(const std::string& line) override;
  void flush_file() {
    if (file_) std::fflush(file_);
  }
  // While a snapshot is sent, lines go to the newest subscriber only.
  void begin_snapshot() { snapshot_only_ = true; }
  void end_snapshot() { snapshot_only_ = false; }
  size_t subscribers() const { return subscribers_.size(); }

 private:
  struct Subscriber {
    std::unique_ptr<boost::asio::posix::stream_descriptor> sd;
    std::string pending;  // bytes the socket did not take yet
    bool waiting = false; // a wait for writability is armed
    bool dead = false;
  };
  using SubscriberPtr = std::shared_ptr<Subscriber>;
  void accept_next();
  bool flush(Subscriber& s);
  // The rest of `pending` goes out when the socket can take it, even if no event follows
  // (a paused NIC emits nothing more, but its subscriber must still see every line).
  void send_later(const SubscriberPtr& s);
  void drop(const SubscriberPtr& s);

  boost::asio::io_context& io_;
  std::FILE* file_ = nullptr;
  std::string socket_path_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> listener_;
  boost::asio::steady_timer accept_backoff_;  // out of descriptors: accept again later, not at once
  std::list<SubscriberPtr> subscribers_;
  std::function<void()> on_subscribe_;
  bool snapshot_only_ = false;
};

}  // namespace simnic::io
