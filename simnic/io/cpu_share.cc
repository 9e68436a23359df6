#include "simnic/io/cpu_share.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

namespace simnic::io {

CpuShare::CpuShare() : loadavg_fd_(::open("/proc/loadavg", O_RDONLY | O_CLOEXEC)) {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  cpus_ = n > 0 ? n : 1;
}

CpuShare::~CpuShare() {
  if (loadavg_fd_ >= 0) ::close(loadavg_fd_);
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
