// The kernel baseline simnic is compared with: TCP over loopback on the same machine, in the
// same run. qperf's tcp_bw and tcp_lat when qperf is installed; otherwise our own socket test
// measuring the same two things the same way (a stream of SIZE-byte writes counted by the
// receiver; a SIZE-byte ping-pong whose round trip is halved).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <regex>
#include <set>

#include "simnic/cli/bench.h"

namespace simnic::cli::bench {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// "bw  =  1.19 GB/sec" -> MB/s; "latency  =  32.4 us" -> µs. qperf's prefixes are decimal.
double qperf_figure(const std::string& out, const std::string& test) {
  std::smatch m;
  const std::regex re(test + R"(:\s*\n\s*(bw|latency)\s*=\s*([0-9.]+)\s*(\S+))");
  if (!std::regex_search(out, m, re)) return NAN;
  const double v = std::stod(m[2].str());
  const std::string unit = m[3].str();
  static const std::pair<const char*, double> kUnits[] = {{"bytes/sec", 1e-6}, {"KB/sec", 1e-3}, {"MB/sec", 1},
                                                          {"GB/sec", 1e3},     {"TB/sec", 1e6},  {"ns", 1e-3},
                                                          {"us", 1},           {"ms", 1e3},      {"sec", 1e6}};
  for (const auto& [name, scale] : kUnits)
    if (unit == name) return v * scale;
  return NAN;
}

Figure baseline_figure(const std::string& test, uint64_t size, double value) {
  Figure f;
  f.test = test;
  f.kind = test == "tcp_bw" ? "bw" : "lat";
  f.size = size;
  f.value = value;
  if (!std::isfinite(value)) f.status = "failed: no figure (see the log)";
  return f;
}

// One qperf client run at `size` for the tests in `tests`.
void qperf_size(const BaselinePlan& plan, int listen_port, uint64_t size, const std::vector<std::string>& tests,
                std::vector<Figure>* out) {
  const std::string log = plan.log_dir + "/qperf-" + std::to_string(size) + ".log";
  std::vector<std::string> argv = {"qperf", plan.addr,
                                   "-lp",   std::to_string(listen_port),
                                   "-ip",   std::to_string(free_tcp_port()),
                                   "-t",    std::to_string(plan.seconds),
                                   "-m",    std::to_string(size)};
  argv.insert(argv.end(), tests.begin(), tests.end());
  run_logged(argv, log, std::chrono::seconds(30 + 4 * plan.seconds));
  const std::string text = read_file(log);
  for (const auto& t : tests) out->push_back(baseline_figure(t, size, qperf_figure(text, t)));
}

std::vector<Figure> measure_qperf(const BaselinePlan& plan, StepFn step) {
  std::vector<Figure> out;
  const int port = free_tcp_port();
  pid_t server = spawn({"qperf", "-lp", std::to_string(port)}, plan.log_dir + "/qperf-server.log");
  if (!wait_for_listener(port, 10s)) {
    std::fprintf(stderr, "simnic bench: the qperf server did not start (%s/qperf-server.log)\n", plan.log_dir.c_str());
    kill_and_reap(server);
    return out;
  }
  std::set<uint64_t> sizes(plan.bw_sizes.begin(), plan.bw_sizes.end());
  sizes.insert(plan.lat_sizes.begin(), plan.lat_sizes.end());
  for (uint64_t size : sizes) {
    if (interrupted()) break;
    std::vector<std::string> tests;
    auto has = [&](const std::vector<uint64_t>& v) { return std::count(v.begin(), v.end(), size) > 0; };
    if (has(plan.bw_sizes)) tests.push_back("tcp_bw");
    if (has(plan.lat_sizes)) tests.push_back("tcp_lat");
    step("qperf " + human_size(size));
    qperf_size(plan, port, size, tests, &out);
  }
  kill_and_reap(server);
  return out;
}

// ---- the built-in socket test ----

bool write_all(int fd, const char* p, size_t n) {
  while (n) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

bool read_all(int fd, char* p, size_t n) {
  while (n) {
    ssize_t r = ::read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

// The server side, in a forked child: sink (count bytes until EOF, then send the count back)
// or echo (answer every SIZE bytes with SIZE bytes).
[[noreturn]] void serve(int listener, bool echo, uint64_t size) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  int fd = ::accept(listener, nullptr, nullptr);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<char> buf(std::max<uint64_t>(size, 64 * 1024));
  uint64_t total = 0;
  if (echo) {
    while (read_all(fd, buf.data(), size) && write_all(fd, buf.data(), size)) {
    }
  } else {
    for (ssize_t r; (r = ::read(fd, buf.data(), buf.size())) > 0;) total += uint64_t(r);
    write_all(fd, reinterpret_cast<const char*>(&total), sizeof total);
  }
  ::_exit(0);
}

// Listens on addr:0, forks the server, connects to it. Returns the client fd (or -1) and the
// server's pid.
int connect_pair(const std::string& addr, bool echo, uint64_t size, pid_t* server) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, addr.c_str(), &a.sin_addr);
  socklen_t len = sizeof a;
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(listener);
    return -1;
  }
  *server = ::fork();
  if (*server == 0) serve(listener, echo, size);
  ::close(listener);
  track_pid(*server);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (*server < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// `measure` on a connection to a child that echoes (latency) or counts (bandwidth) what it
// gets, then the child is reaped. NAN when the pair could not be made.
double measure_over_tcp(const std::string& addr, bool echo, uint64_t size,
                        const std::function<double(int fd)>& measure) {
  pid_t server = -1;
  int fd = connect_pair(addr, echo, size, &server);
  double value = NAN;
  if (fd >= 0) {
    value = measure(fd);
    ::close(fd);
  }
  if (server > 0) wait_for(server, 5s);
  return value;
}

// One way = half a round trip, as qperf and perftest report. The mean is the whole time over
// the round trips (qperf's way), so it includes the loop's own cost as qperf's does.
LatencyStats one_way_stats(std::vector<int64_t> rtt_ns, double seconds) {
  std::sort(rtt_ns.begin(), rtt_ns.end());
  LatencyStats s;
  s.mean_us = seconds * 1e6 / double(rtt_ns.size()) / 2;
  s.p99_us = double(rtt_ns[rtt_ns.size() * 99 / 100]) / 2e3;
  return s;
}

// TCP's tails: qperf reports a mean only, so each tcp_lat figure gets its 99th percentile from
// the built-in ping-pong at the same size (run right after qperf's when qperf measured it).
void add_tcp_p99(const BaselinePlan& plan, StepFn step, std::vector<Figure>* figures) {
  for (Figure& f : *figures) {
    if (f.test != "tcp_lat" || interrupted()) continue;
    step("tcp_lat " + human_size(f.size) + " p99 (built-in ping-pong)");
    const LatencyStats stats = builtin_tcp_lat_stats(plan.addr, f.size, std::min(plan.seconds, 1));
    f.p99_us = stats.p99_us;
    f.avg_us = f.value;  // tcp_lat is itself a mean (qperf's, or the built-in's)
  }
}

}  // namespace

double builtin_tcp_bw(const std::string& addr, uint64_t size, double seconds) {
  return measure_over_tcp(addr, false, size, [&](int fd) {
    std::vector<char> buf(size, 'b');
    const auto t0 = Clock::now();
    bool ok = true;
    while (ok && seconds_since(t0) < seconds && !interrupted()) ok = write_all(fd, buf.data(), size);
    ::shutdown(fd, SHUT_WR);
    uint64_t received = 0;  // as the receiver counted it, once it has read everything
    if (ok && read_all(fd, reinterpret_cast<char*>(&received), sizeof received))
      return double(received) / seconds_since(t0) / 1e6;
    return double(NAN);
  });
}

LatencyStats builtin_tcp_lat_stats(const std::string& addr, uint64_t size, double seconds) {
  LatencyStats stats;
  measure_over_tcp(addr, true, size, [&](int fd) {
    std::vector<char> buf(size, 'l');
    std::vector<int64_t> rtt_ns;  // every round trip, for the percentiles
    const auto start = Clock::now();
    bool ok = true;
    while (ok && seconds_since(start) < seconds && !interrupted()) {
      const auto t0 = Clock::now();
      ok = write_all(fd, buf.data(), size) && read_all(fd, buf.data(), size);
      if (ok) rtt_ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
    }
    if (ok && !rtt_ns.empty()) stats = one_way_stats(std::move(rtt_ns), seconds_since(start));
    return 0.0;
  });
  return stats;
}

double builtin_tcp_lat(const std::string& addr, uint64_t size, double seconds) {
  return builtin_tcp_lat_stats(addr, size, seconds).mean_us;
}

std::vector<Figure> measure_baseline(const BaselinePlan& plan, StepFn step) {
  if (plan.tool == "qperf") {
    std::vector<Figure> out = measure_qperf(plan, step);
    add_tcp_p99(plan, step, &out);
    return out;
  }
  std::vector<Figure> out;
  for (uint64_t size : plan.bw_sizes) {
    if (interrupted()) break;
    step("tcp_bw " + human_size(size) + " (built-in)");
    out.push_back(baseline_figure("tcp_bw", size, builtin_tcp_bw(plan.addr, size, plan.seconds)));
  }
  for (uint64_t size : plan.lat_sizes) {
    if (interrupted()) break;
    step("tcp_lat " + human_size(size) + " (built-in)");
    const LatencyStats stats = builtin_tcp_lat_stats(plan.addr, size, plan.seconds);
    Figure f = baseline_figure("tcp_lat", size, stats.mean_us);
    f.avg_us = stats.mean_us, f.p99_us = stats.p99_us;  // the same ping-pong's tail
    out.push_back(f);
  }
  return out;
}

Figure tcp_message_rate(const std::vector<Figure>& baseline, const BaselinePlan& plan, uint64_t size) {
  double mb_s = NAN;
  for (const Figure& f : baseline)
    if (f.test == "tcp_bw" && f.size == size && f.ok()) mb_s = f.value;
  if (!std::isfinite(mb_s) && !interrupted()) mb_s = builtin_tcp_bw(plan.addr, size, plan.seconds);
  Figure f = baseline_figure("tcp_rate", size, mb_s * 1e6 / double(size));
  f.kind = "rate";
  return f;
}

}  // namespace simnic::cli::bench
