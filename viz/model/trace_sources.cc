#include "viz/model/trace_sources.h"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace simnic::viz {

uint64_t monotonic_now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

bool load_trace_files(const std::vector<std::string>& paths, Timeline* timeline, std::string* error,
                      size_t* skipped) {
  TimelineMerge merge;
  size_t bad = 0;
  for (const auto& path : paths) {
    std::ifstream in(path);
    if (!in) {
      *error = "cannot read " + path + ": " + std::strerror(errno);
      return false;
    }
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      if (auto e = parse_event_line(line)) merge.push(std::move(*e));
      else ++bad;
    }
  }
  timeline->append(merge.drain(/*all_in=*/true));
  if (skipped) *skipped = bad;
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
  for (auto& c : conns_) {
    if (c.fd < 0) continue;
    for (;;) {
      ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        c.partial.append(buf, size_t(n));
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        ::close(c.fd);  // the NIC went down
        c.fd = -1;
      }
      break;
    }
    size_t start = 0;
    for (size_t nl; (nl = c.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
      if (auto e = parse_event_line(c.partial.substr(start, nl - start))) merge_.push(std::move(*e), now);
      else ++malformed_;
    }
    c.partial.erase(0, start);
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

std::vector<std::string> LiveFeed::nics() const {
  std::vector<std::string> out;
  for (auto& c : conns_) out.push_back(c.nic);
  return out;
}

}  // namespace simnic::viz
