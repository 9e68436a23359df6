// Where trace events go: a JSON-lines file (--trace) and every subscriber of the telemetry
// socket <dir>/<nic>.trace. A subscriber that stops reading is dropped, never waited for.
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cstdio>
#include <functional>
#include <list>
#include <memory>
#include <string>

#include "simnic/core/trace.h"

namespace simnic::io {

class TraceHub final : public core::TraceSink {
 public:
  explicit TraceHub(boost::asio::io_context& io) : io_(io) {}
  ~TraceHub() override;

  bool open_file(const std::string& path, std::string* error);
  // Listens on `path`; `on_subscribe` runs for each new subscriber (to send it a snapshot).
  bool listen(const std::string& path, std::string* error, std::function<void()> on_subscribe);
  void close();
  bool active() const { return file_ || !subscribers_.empty(); }
  void write_line(const std::string& line) override;
  // While a snapshot is sent, lines go to the newest subscriber only.
  void begin_snapshot() { snapshot_only_ = true; }
  void end_snapshot() { snapshot_only_ = false; }
  size_t subscribers() const { return subscribers_.size(); }

 private:
  struct Subscriber {
    int fd;
    std::string pending;  // bytes the socket did not take yet
  };
  void accept_next();
  bool flush(Subscriber& s);

  boost::asio::io_context& io_;
  std::FILE* file_ = nullptr;
  std::string socket_path_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> listener_;
  std::list<Subscriber> subscribers_;
  std::function<void()> on_subscribe_;
  bool snapshot_only_ = false;
};

}  // namespace simnic::io
