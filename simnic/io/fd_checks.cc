#include "simnic/io/fd_checks.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <string>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // Linux 6.5; older headers lack it
#endif

namespace simnic::io {

namespace {

std::string fd_link(int fd) {
  char buf[64];
  std::string p = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, size_t(n));
}

// EFD_SEMAPHORE makes every read take 1 off the counter: a counter of 2^64-2 would keep us
// reading. fdinfo says so on kernels that show the flag.
bool is_semaphore(int fd) {
  std::ifstream in("/proc/self/fdinfo/" + std::to_string(fd));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("eventfd-semaphore:", 0) == 0) return line.find('1') != std::string::npos;
  return false;
}

int int_sockopt(int fd, int name) {
  int v = -1;
  socklen_t len = sizeof v;
  if (::getsockopt(fd, SOL_SOCKET, name, &v, &len) != 0) return -1;
  return v;
}

// An AF_UNIX socket of `type` the client process made itself (its peer credentials name the
// client, not simnicd): see fd_checks.h for why.
int check_client_socket(int fd, int type, pid_t client_pid) {
  if (int_sockopt(fd, SO_DOMAIN) != AF_UNIX || int_sockopt(fd, SO_TYPE) != type) return EINVAL;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return EINVAL;
  return cred.pid == client_pid && cred.pid != ::getpid() ? 0 : EINVAL;
}

}  // namespace

int check_doorbell_fd(int fd) {
  if (fd_link(fd) != "anon_inode:[eventfd]" || is_semaphore(fd)) return EINVAL;
  return 0;
}

int check_cm_channel_socket(int fd, pid_t client_pid) { return check_client_socket(fd, SOCK_STREAM, client_pid); }

int check_event_socket(int fd, pid_t client_pid) { return check_client_socket(fd, SOCK_SEQPACKET, client_pid); }

uint64_t drain_doorbell(int fd) {
  uint64_t v = 0;
  iovec iov{&v, sizeof v};
  for (;;) {
    ssize_t n = ::preadv2(fd, &iov, 1, -1, RWF_NOWAIT);
    if (n == ssize_t(sizeof v)) return v;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EOPNOTSUPP || errno == EINVAL)) break;  // a kernel before 5.12
    return 0;
  }
  // Fallback: only read what poll just saw. (A client racing us with its own read could still
  // empty it in between; kernels since 5.12 take the path above.)
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) != 1 || !(p.revents & POLLIN)) return 0;
  return ::read(fd, &v, sizeof v) == ssize_t(sizeof v) ? v : 0;
}

int peer_pidfd(int sock, pid_t pid) {
  int pidfd = -1;
  socklen_t len = sizeof pidfd;
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0) return pidfd;
  if (pid <= 0) return -1;
  return int(::syscall(SYS_pidfd_open, pid, 0));
}

}  // namespace simnic::io
