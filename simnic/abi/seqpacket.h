// Message I/O on the control socket (SOCK_SEQPACKET): one message per call, with optional
// file descriptors as SCM_RIGHTS. Used by the shim, the `simnic` tool and simnicd.
#pragma once
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "simnic/abi/control.h"

namespace simnic::abi {

constexpr size_t kMaxFds = 4;

// Sends header + body as one message with `fds` attached. Returns 0 or an errno.
inline int send_message(int sock, const void* head, size_t head_len, const void* body, size_t body_len,
                        std::span<const int> fds = {}) {
  iovec iov[2] = {{const_cast<void*>(head), head_len}, {const_cast<void*>(body), body_len}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = body_len ? 2 : 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  if (!fds.empty()) {
    if (fds.size() > kMaxFds) return EINVAL;
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n >= 0) return 0;
    if (errno != EINTR) return errno;
  }
}

// Receives one message into `buf` (resized to what arrived); received fds are appended
// to `fds` (close-on-exec). Returns 0, an errno, or ECONNRESET when the peer closed.
// *fds_lost (if given) is set when the kernel could not hand over every descriptor sent
// (more than kMaxFds, or this process is out of descriptors: MSG_CTRUNC).
inline int recv_message(int sock, std::vector<uint8_t>& buf, std::vector<int>& fds, bool* fds_lost = nullptr) {
  buf.resize(kMaxMessage);
  iovec iov{buf.data(), buf.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  for (;;) {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n >= 0) break;
    if (errno != EINTR) return errno;
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.push_back(fd);
    }
  }
  if (fds_lost) *fds_lost = (msg.msg_flags & MSG_CTRUNC) != 0;
  if (n == 0) return ECONNRESET;
  if (msg.msg_flags & MSG_TRUNC) return EMSGSIZE;
  buf.resize(static_cast<size_t>(n));
  return 0;
}

// Connects to a control socket. Returns the fd, or -1 with errno set.
inline int connect_control(const std::string& path) {
  int s = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    ::close(s);
    errno = ENAMETOOLONG;
    return -1;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int e = errno;
    ::close(s);
    errno = e;
    return -1;
  }
  return s;
}

// A blocking request/reply round trip. On success returns the reply's status (0 or an
// errno from simnicd) and fills `reply` with the body and `fds_out` with received fds.
// A transport failure returns its errno (ECONNRESET when simnicd went away).
// The reason the NIC gave with the last refusal this thread received ("" if none): a refusal's
// body is text (control.h), which call_fixed would otherwise drop.
inline std::string& last_refusal() {
  thread_local std::string why;
  return why;
}

// The rest of a reply that came in pieces (kRespMore), appended to `reply`. Returns 0, a
// transport errno, EPROTO for a piece of another op or status, or EMSGSIZE past kMaxReplyBytes.
inline int recv_more_pieces(int sock, const RespHeader& first, std::vector<uint8_t>& reply) {
  uint32_t flags = first.flags;
  std::vector<uint8_t> buf;
  std::vector<int> fds;
  while (flags & kRespMore) {
    if (reply.size() > kMaxReplyBytes) return EMSGSIZE;
    if (int e = recv_message(sock, buf, fds)) return e;
    for (int fd : fds) ::close(fd);  // descriptors ride on the first piece only
    fds.clear();
    RespHeader rh;
    if (buf.size() < sizeof(rh)) return EPROTO;
    std::memcpy(&rh, buf.data(), sizeof(rh));
    if (rh.op != first.op || rh.status != first.status || rh.len != buf.size() - sizeof(rh)) return EPROTO;
    reply.insert(reply.end(), buf.begin() + sizeof(rh), buf.end());
    flags = rh.flags;
  }
  return 0;
}

inline int call(int sock, Op op, const void* req, size_t req_len, std::vector<uint8_t>& reply,
                std::span<const int> fds_in = {}, std::vector<int>* fds_out = nullptr) {
  ReqHeader h{static_cast<uint32_t>(op), static_cast<uint32_t>(req_len)};
  if (int e = send_message(sock, &h, sizeof(h), req, req_len, fds_in)) return e;
  std::vector<uint8_t> buf;
  std::vector<int> fds;
  if (int e = recv_message(sock, buf, fds)) return e;
  if (fds_out) {
    *fds_out = std::move(fds);
  } else {
    for (int fd : fds) ::close(fd);
  }
  if (buf.size() < sizeof(RespHeader)) return EPROTO;
  RespHeader rh;
  std::memcpy(&rh, buf.data(), sizeof(rh));
  if (rh.op != h.op || rh.len != buf.size() - sizeof(RespHeader)) return EPROTO;
  reply.assign(buf.begin() + sizeof(RespHeader), buf.end());
  if (int e = recv_more_pieces(sock, rh, reply)) return e;
  if (rh.status != 0) last_refusal().assign(reply.begin(), reply.end());
  else last_refusal().clear();
  return rh.status;
}

// call() for a fixed-size reply struct. A reply of the wrong size is EPROTO.
template <class Req, class Reply>
int call_fixed(int sock, Op op, const Req& req, Reply* out, std::span<const int> fds_in = {},
               std::vector<int>* fds_out = nullptr) {
  std::vector<uint8_t> body;
  int st = call(sock, op, &req, sizeof(req), body, fds_in, fds_out);
  if (st != 0) return st;
  if (out) {
    if (body.size() != sizeof(Reply)) return EPROTO;
    std::memcpy(out, body.data(), sizeof(Reply));
  }
  return 0;
}

}  // namespace simnic::abi
