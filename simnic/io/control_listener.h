// The listening end of the control socket (the uverbs-like slow path): a SOCK_SEQPACKET Unix
// socket only this user may connect to. It accepts in turns, so a connect storm takes turns
// with packets and other clients; out of descriptors it waits and tries again instead of
// spinning; a peer of another user (SO_PEERCRED) is refused. What a connection then says is
// NicServer's business.
#pragma once
#include <sys/resource.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <string>

#include "simnic/core/env.h"

namespace simnic::io {

// Control connections one user (uid) may hold on a NIC at once (issue 29): every connection
// takes simnicd's descriptors (a context about four: the connection, its doorbell, its event
// socket, the pidfd of its process), and at `ulimit -n 1024` 1,007 connections once left
// none for anybody else. One user gets 3/4 of what the descriptor limit `nofile` allows after
// a reserve for the NIC's own files and sockets, never fewer than kMinSessionsPerUser.
struct SessionShares {
  static constexpr rlim_t kReservedFds = 64;
  static constexpr rlim_t kFdsPerSession = 4;
  static constexpr size_t kMinSessionsPerUser = 8;
  // A user over its share whose connections wait for their refusal: beyond these, closed at once.
  static constexpr size_t kMaxRefusalsPending = 16;
  static size_t per_user(rlim_t nofile);
};

class ControlListener {
 public:
  // Called for each accepted connection of this NIC's user: a non-blocking descriptor, and its peer.
  using OnConnection = std::function<void(int fd, const ucred& peer)>;

  ControlListener(boost::asio::io_context& io, core::Logger& logger) : io_(io), logger_(logger), backoff_(io) {}
  ~ControlListener() { close(); }

  // Binds `path` (a stale socket there is removed) and starts accepting. False with *error set.
  bool open(const std::string& path, std::string* error, OnConnection on_connection);
  // Stops accepting and removes the socket file.
  void close();

 private:
  void accept_next();
  void accept_pending();
  void pause_accepting(int err);
  void admit(int fd);

  boost::asio::io_context& io_;
  core::Logger& logger_;
  std::string path_;
  OnConnection on_connection_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> listener_;
  boost::asio::steady_timer backoff_;  // out of descriptors: accept again later
  bool fd_exhaustion_logged_ = false;
};

}  // namespace simnic::io
