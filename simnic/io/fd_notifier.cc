#include "simnic/io/fd_notifier.h"

#include <sys/socket.h>
#include <unistd.h>

#include "simnic/abi/control.h"

namespace simnic::io {

void FdNotifier::completion_event(int channel_fd, uint32_t cq_handle) {
  abi::CqEventMsg m{cq_handle, 0};
  // Non-blocking: a process that stopped reading its channel must not stall the NIC.
  if (::send(channel_fd, &m, sizeof m, MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof m) ++dropped_;
}

void FdNotifier::async_event(int async_fd, uint32_t event_type, uint32_t handle) {
  abi::AsyncEventMsg m{event_type, handle};
  if (::send(async_fd, &m, sizeof m, MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof m) ++dropped_;
}

void FdNotifier::release_fd(int fd) {
  if (fd >= 0) ::close(fd);
}

}  // namespace simnic::io
