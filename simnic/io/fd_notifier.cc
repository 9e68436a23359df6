#include "simnic/io/fd_notifier.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "simnic/abi/control.h"
#include "simnic/abi/shared_word.h"

namespace simnic::io {

void FdNotifier::completion_event(int channel_fd, uint32_t cq_handle) {
  abi::CqEventMsg m{cq_handle, 0};
  // Non-blocking: a process that stopped reading its channel must not stall the NIC.
  if (::send(channel_fd, &m, sizeof m, MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof m) count_drop("completion");
}

void FdNotifier::async_event(int async_fd, uint32_t event_type, uint32_t handle) {
  abi::AsyncEventMsg m{event_type, handle};
  // Same: a full async socket loses the event (counted), it never stalls the NIC.
  if (::send(async_fd, &m, sizeof m, MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof m) count_drop("async");
}

void FdNotifier::wake_sleepers(std::atomic<uint32_t>* word) { abi::wake_all(word); }

// Counted always (event_drops in `simnic status`); logged the first time and every 1000th,
// so a process that never reads its events cannot flood the log either.
void FdNotifier::count_drop(const char* what) {
  int err = errno;
  if (logger_ && dropped_ % 1000 == 0)
    logger_->log(core::LogLevel::kWarn, std::string("dropped a ") + what + " event: " + std::strerror(err) +
                                            " (the application does not read its events; " +
                                            std::to_string(dropped_ + 1) + " dropped so far)");
  ++dropped_;
}

bool FdNotifier::send_event(int fd, const void* msg, size_t len) {
  // Non-blocking like the others: an rdma_cm event is lost (counted) rather than stall the NIC.
  // The channel is a stream shared by every NIC the program uses: an event goes whole or not at
  // all, so one that does not fit in the send buffer is not started.
  int queued = 0;
  int sndbuf = 0;
  socklen_t sl = sizeof sndbuf;
  if (::ioctl(fd, SIOCOUTQ, &queued) == 0 && ::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &sl) == 0 &&
      size_t(sndbuf) < size_t(queued) + 2 * len) {
    errno = ENOBUFS;
    count_drop("rdma_cm");
    return false;
  }
  if (::send(fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL) == ssize_t(len)) return true;
  count_drop("rdma_cm");
  return false;
}

void FdNotifier::release_fd(int fd) {
  if (fd >= 0) ::close(fd);
}

}  // namespace simnic::io
