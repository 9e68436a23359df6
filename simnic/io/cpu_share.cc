#include "simnic/io/cpu_share.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include <cstring>

namespace simnic::io {

CpuShare::CpuShare()
    : loadavg_fd_(::open("/proc/loadavg", O_RDONLY | O_CLOEXEC)),
      pressure_fd_(::open("/proc/pressure/cpu", O_RDONLY | O_CLOEXEC)) {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  cpus_ = n > 0 ? n : 1;
}

CpuShare::~CpuShare() {
  if (loadavg_fd_ >= 0) ::close(loadavg_fd_);
  if (pressure_fd_ >= 0) ::close(pressure_fd_);
}

uint64_t CpuShare::cpu_wait_total_ns() const {
  if (pressure_fd_ < 0) return 0;
  char text[256];
  const ssize_t n = ::pread(pressure_fd_, text, sizeof text - 1, 0);
  if (n <= 0) return 0;
  text[n] = '\0';
  return some_total_in_pressure(text) * 1000;
}

uint64_t some_total_in_pressure(const char* text) {
  if (std::strncmp(text, "some ", 5) != 0) return 0;
  const char* total = std::strstr(text, "total=");
  const char* eol = std::strchr(text, '\n');
  if (!total || (eol && total > eol)) return 0;
  return std::strtoull(total + 6, nullptr, 10);
}

// The kernel's nr_running() at the moment of the read (the fourth field's numerator), about a
// microsecond: cheap enough to ask every few microseconds of a busy poll.
bool CpuShare::nobody_waits() const {
  if (loadavg_fd_ < 0) return false;
  char line[128];
  const ssize_t n = ::pread(loadavg_fd_, line, sizeof line - 1, 0);
  if (n <= 0) return false;
  line[n] = '\0';
  const long running = runnable_in_loadavg(line);
  return running > 0 && running <= cpus_;
}

long runnable_in_loadavg(const char* line) {
  const char* p = line;
  for (int field = 0; field < 3; ++field) {  // skip the three load averages
    while (*p == ' ') ++p;
    while (*p && *p != ' ') ++p;
  }
  while (*p == ' ') ++p;
  char* end = nullptr;
  const long running = std::strtol(p, &end, 10);
  return end != p && *end == '/' ? running : -1;
}

}  // namespace simnic::io
