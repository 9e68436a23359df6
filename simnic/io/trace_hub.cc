#include "simnic/io/trace_hub.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "simnic/io/output_file.h"
#include "simnic/io/unix_listen.h"

namespace simnic::io {

namespace {
constexpr size_t kMaxPending = 16 << 20;  // a subscriber this far behind is cut off

// A snapshot line says what exists now, not what just happened: marked so that a viewer that
// already rebuilt the object from the history keeps what it knows (docs/trace-format.md).
std::string mark_snapshot(const std::string& line) {
  if (line.empty() || line.back() != '}') return line;
  return line.substr(0, line.size() - 1) + ",\"snapshot\":true}";
}

constexpr uint8_t kNewlineByte[] = {'\n'};
constexpr std::span<const uint8_t> kNewline(kNewlineByte);

bool is_nic_up(const std::string& line) { return line.find("\"kind\":\"nic_up\"") != std::string::npos; }
}  // namespace

TraceHub::~TraceHub() { close(); }

bool TraceHub::open_file(const std::string& path, uint64_t max_bytes, core::Logger* log, std::string* error) {
  return file_.open(path, "trace", max_bytes, log, error);
}

bool TraceHub::listen(const std::string& path, std::string* error, std::function<void()> on_subscribe) {
  on_subscribe_ = std::move(on_subscribe);
  socket_path_ = path;
  int ls = listen_private_unix(path, SOCK_STREAM, 16, "telemetry", error);
  if (ls < 0) return false;
  listener_ = std::make_unique<boost::asio::posix::stream_descriptor>(io_, ls);
  accept_next();
  return true;
}

void TraceHub::accept_next() {
  listener_->async_wait(boost::asio::posix::descriptor_base::wait_read, [this](const boost::system::error_code& ec) {
    if (ec || !listener_) return;
    for (;;) {
      int fd = ::accept4(listener_->native_handle(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
        // The connection stays pending and readable: retrying now would spin the loop.
        accept_backoff_.expires_after(std::chrono::milliseconds(100));
        accept_backoff_.async_wait([this](const boost::system::error_code& e) {
          if (!e && listener_) accept_next();
        });
        return;
      }
      if (fd < 0) break;
      auto sub = std::make_shared<Subscriber>();
      sub->sd = std::make_unique<boost::asio::posix::stream_descriptor>(io_, fd);
      subscribers_.push_back(sub);
      // History first (what happened, in order), then the snapshot (what exists now).
      replay_history(*sub);
      if (on_subscribe_) {
        begin_snapshot();
        on_subscribe_();
        end_snapshot();
      }
    }
    accept_next();
  });
}

void TraceHub::close() {
  boost::system::error_code ec;
  accept_backoff_.cancel();
  if (listener_) {
    listener_->close(ec);
    listener_.reset();
    ::unlink(socket_path_.c_str());
  }
  for (auto& s : subscribers_) {
    s->dead = true;
    s->sd->close(ec);
  }
  subscribers_.clear();
  file_.close();
}

void TraceHub::remember(char tag, std::string_view body, bool nic_up) {
  // Full, the oldest entry's string takes the new one: no allocation per event (every packet
  // makes several while the history is on).
  std::string kept;
  if (history_.size() >= kHistoryLines) {
    history_bytes_ -= history_.front().size() + 1;
    kept = std::move(history_.front());
    history_.pop_front();
  }
  kept.assign(1, tag);
  kept.append(body);
  if (nic_up && first_nic_up_.empty()) first_nic_up_ = kept;
  history_bytes_ += kept.size() + 1;
  history_.push_back(std::move(kept));
  while (history_.size() > kHistoryLines || history_bytes_ > kHistoryBytes) {
    history_bytes_ -= history_.front().size() + 1;
    history_.pop_front();
  }
}

void TraceHub::append_entry(std::string& out, const std::string& entry) {
  const std::string_view body = std::string_view(entry).substr(1);
  if (entry[0] == kEventEntry) core::append_trace_json(out, body);
  else out += body;
  out += '\n';
}

// The ring's lines, oldest first; when the ring no longer holds the NIC's first nic_up, that
// line comes first anyway: it carries the NIC's address and clock (wall_ns) for the viewer.
void TraceHub::replay_history(Subscriber& s) {
  if (!first_nic_up_.empty() && (history_.empty() || history_.front() != first_nic_up_))
    append_entry(s.pending, first_nic_up_);
  for (const std::string& entry : history_) append_entry(s.pending, entry);
  s.max_pending = kMaxPending + s.pending.size();
}

// Returns false when the subscriber has gone away.
bool TraceHub::flush(Subscriber& s) {
  while (!s.pending.empty()) {
    ssize_t n = ::send(s.sd->native_handle(), s.pending.data(), s.pending.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    s.pending.erase(0, size_t(n));
  }
  return true;
}

void TraceHub::send_later(const SubscriberPtr& s) {
  if (s->waiting || s->pending.empty()) return;
  s->waiting = true;
  s->sd->async_wait(boost::asio::posix::descriptor_base::wait_write, [this, s](const boost::system::error_code& ec) {
    s->waiting = false;
    if (ec || s->dead) return;
    if (!flush(*s)) return drop(s);
    send_later(s);
  });
}

void TraceHub::drop(const SubscriberPtr& s) {
  boost::system::error_code ec;
  s->dead = true;
  s->sd->close(ec);
  subscribers_.remove(s);
}

void TraceHub::write_line(const std::string& line) {
  deliver(line);
  if (keeps_history()) remember(kJsonEntry, line, is_nic_up(line));
}

void TraceHub::write_event(std::string_view event) {
  if (snapshot_only_ || file_.is_open() || !subscribers_.empty()) {
    json_.clear();
    core::append_trace_json(json_, event);
    deliver(json_);
  }
  if (keeps_history()) remember(kEventEntry, event, core::trace_event_is(event, core::TraceKind::kNicUp));
}

void TraceHub::deliver(const std::string& line) {
  if (snapshot_only_) {
    if (subscribers_.empty()) return;
    SubscriberPtr s = subscribers_.back();
    s->pending += mark_snapshot(line);
    s->pending += '\n';
    if (!flush(*s)) return drop(s);
    send_later(s);
    return;
  }
  // A line is written whole or not at all (the size limit, a full disk: output_file.h).
  if (file_.is_open()) file_.append({std::span(reinterpret_cast<const uint8_t*>(line.data()), line.size()), kNewline});
  for (auto it = subscribers_.begin(); it != subscribers_.end();) {
    SubscriberPtr s = *it++;
    s->pending += line;
    s->pending += '\n';
    if (!flush(*s) || s->pending.size() > std::max(kMaxPending, s->max_pending)) drop(s);
    else send_later(s);
  }
}

}  // namespace simnic::io
