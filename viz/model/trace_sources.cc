#include "viz/model/trace_sources.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>

namespace simnic::viz {

uint64_t monotonic_now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

void TraceLineReader::feed(std::string_view bytes, const OnLine& on_line) {
  for (size_t nl; (nl = bytes.find('\n')) != std::string_view::npos; bytes.remove_prefix(nl + 1))
    take(bytes.substr(0, nl), /*ends_line=*/true, on_line);
  take(bytes, /*ends_line=*/false, on_line);
}

void TraceLineReader::take(std::string_view piece, bool ends_line, const OnLine& on_line) {
  if (!skipping_ && partial_.size() + piece.size() > kMaxLineBytes) {
    ++oversized_;
    skipping_ = true;
    partial_.clear();
  }
  if (!skipping_) {
    if (ends_line && partial_.empty()) {
      on_line(piece);  // the common case: a whole line within one piece, not copied
    } else {
      partial_.append(piece);
      if (ends_line) on_line(partial_), partial_.clear();
    }
  }
  if (ends_line) skipping_ = false;
}

void TraceLineReader::feed_from(std::istream& in, const OnLine& on_line) {
  std::string buf(size_t(1) << 16, '\0');
  while (in.read(buf.data(), std::streamsize(buf.size())) || in.gcount() > 0)
    feed(std::string_view(buf.data(), size_t(in.gcount())), on_line);
}

void TraceLineReader::finish(const OnLine& on_line) {
  if (!skipping_ && !partial_.empty()) on_line(partial_);
  partial_.clear();
  skipping_ = false;
}

bool load_trace_files(const std::vector<std::string>& paths, Timeline* timeline, std::string* error, size_t* skipped,
                      size_t* oversized) {
  TimelineMerge merge;
  size_t bad = 0, too_long = 0;
  auto on_line = [&](std::string_view line) {
    if (line.empty()) return;
    if (auto e = parse_event_line(std::string(line))) merge.push(std::move(*e));
    else ++bad;
  };
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      *error = "cannot read " + path + ": " + std::strerror(errno);
      return false;
    }
    TraceLineReader reader;
    reader.feed_from(in, on_line);
    reader.finish(on_line);
    too_long += reader.oversized();
  }
  timeline->append(merge.drain(/*all_in=*/true));
  if (skipped) *skipped = bad + too_long;
  if (oversized) *oversized = too_long;
  return true;
}

LiveFeed::~LiveFeed() {
  for (auto& c : conns_)
    if (c.fd >= 0) ::close(c.fd);
}

bool LiveFeed::attach(const std::string& dir, const std::string& nic, std::string* error) {
  std::string path = dir + "/" + nic + ".trace";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    *error = path + ": path too long";
    return false;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *error = "cannot attach to " + nic + " (" + path + "): " + std::strerror(errno) + " (is it up? `simnic status`)";
    if (fd >= 0) ::close(fd);
    return false;
  }
  conns_.push_back({nic, fd, {}});
  return true;
}

size_t LiveFeed::poll(Timeline* timeline) {
  uint64_t now = monotonic_now_ns();
  char buf[65536];
  auto on_line = [&](std::string_view line) {
    if (auto e = parse_event_line(std::string(line))) merge_.push(std::move(*e), now);
    else ++malformed_;
  };
  for (auto& c : conns_) {
    if (c.fd < 0) continue;
    for (;;) {
      ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        c.lines.feed(std::string_view(buf, size_t(n)), on_line);
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        ::close(c.fd);  // the NIC went down
        c.fd = -1;
      }
      break;
    }
  }
  auto ready = merge_.drain(/*all_in=*/!any_connected(), now);
  size_t n = ready.size();
  timeline->append(std::move(ready));
  return n;
}

bool LiveFeed::any_connected() const {
  for (auto& c : conns_)
    if (c.fd >= 0) return true;
  return false;
}

size_t LiveFeed::malformed() const {
  size_t n = malformed_;
  for (auto& c : conns_) n += c.lines.oversized();
  return n;
}

std::vector<std::string> LiveFeed::nics() const {
  std::vector<std::string> out;
  for (auto& c : conns_) out.push_back(c.nic);
  return out;
}

}  // namespace simnic::viz
