#include "simnic/io/control_listener.h"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "simnic/io/unix_listen.h"

namespace simnic::io {

namespace asio = boost::asio;

size_t SessionShares::per_user(rlim_t nofile) {
  const rlim_t usable = nofile > kReservedFds ? nofile - kReservedFds : 0;
  const size_t sessions = size_t(usable / kFdsPerSession);
  return std::max(kMinSessionsPerUser, sessions - sessions / 4);
}

namespace {
// Connections accepted per turn: a connect storm takes turns with everything else.
constexpr int kMaxAcceptsPerTurn = 16;
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);
}  // namespace

bool ControlListener::open(const std::string& path, std::string* error, OnConnection on_connection) {
  int ls = listen_private_unix(path, SOCK_SEQPACKET, 64, "control", error);
  if (ls < 0) return false;
  path_ = path;
  on_connection_ = std::move(on_connection);
  listener_ = std::make_unique<asio::posix::stream_descriptor>(io_, ls);
  accept_next();
  return true;
}

void ControlListener::close() {
  backoff_.cancel();
  if (!listener_) return;
  boost::system::error_code ec;
  listener_->close(ec);
  listener_.reset();
  ::unlink(path_.c_str());
}

void ControlListener::accept_next() {
  listener_->async_wait(asio::posix::descriptor_base::wait_read, [this](const boost::system::error_code& ec) {
    if (ec || !listener_) return;
    accept_pending();
  });
}

void ControlListener::accept_pending() {
  for (int accepted = 0;;) {
    if (accepted == kMaxAcceptsPerTurn) {
      asio::post(io_, [this] {
        if (listener_) accept_pending();
      });
      return;
    }
    int fd = ::accept4(listener_->native_handle(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      admit(fd);
      ++accepted;
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) return pause_accepting(errno);
    break;  // EAGAIN: all taken
  }
  fd_exhaustion_logged_ = false;
  accept_next();
}

// Out of descriptors, the pending connection stays readable and an immediate retry would spin
// the loop at 100% CPU. Leave it in the backlog and try again a little later.
void ControlListener::pause_accepting(int err) {
  if (!fd_exhaustion_logged_) {
    fd_exhaustion_logged_ = true;
    logger_.log(core::LogLevel::kWarn, std::string("cannot accept a control connection: ") + std::strerror(err) +
                                           "; new contexts wait until descriptors are freed (raise `ulimit -n`?)");
  }
  backoff_.expires_after(kAcceptBackoff);
  backoff_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !listener_) return;
    accept_pending();
  });
}

void ControlListener::admit(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || (cred.uid != ::geteuid() && cred.uid != 0)) {
    // The directory and the socket are ours alone, so this takes a leaked descriptor or root
    // changing modes: still, the NIC serves its own user only.
    logger_.log(core::LogLevel::kWarn, "refused a control connection from uid " + std::to_string(cred.uid) + " (pid " +
                                           std::to_string(cred.pid) + "): not this NIC's user");
    ::close(fd);
    return;
  }
  on_connection_(fd, cred);
}

}  // namespace simnic::io
