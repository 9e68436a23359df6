// rsockets (rsocket(7)): the socket calls librspreload.so, rstream and rcopy use, as SOCK_STREAM
// sockets over an RC QP of a simnic NIC (rsocket.h has the design); riomap, riounmap and
// riowrite are in rsocket_iomap.cc. SOCK_DGRAM rsockets are not implemented: EPROTONOSUPPORT
// (librspreload then makes an ordinary kernel socket, as it does on a host without RDMA).
#include <fcntl.h>
#include <netinet/tcp.h>
#include <rdma/rsocket.h>
#include <unistd.h>

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <unordered_map>

#include "rdmacm/cma.h"
#include "rdmacm/rsocket.h"

namespace simnic::rdmacm::rs {
namespace {

std::mutex g_mu;
std::unordered_map<int, Rs*> g_socks;

Rs* unregister(int fd) {
  std::lock_guard lk(g_mu);
  auto it = g_socks.find(fd);
  if (it == g_socks.end()) return nullptr;
  Rs* rs = it->second;
  g_socks.erase(it);
  return rs;
}

// The address as the socket's family shows it: AF_INET6 sockets see IPv4-mapped addresses.
void copy_addr(const Rs* rs, const sockaddr_in& sin, sockaddr* addr, socklen_t* len) {
  if (!len) return;
  sockaddr_storage out{};
  socklen_t size = sizeof(sockaddr_in);
  if (rs->domain == AF_INET6) {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(&out);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = sin.sin_port;
    if (sin.sin_addr.s_addr) {
      s6->sin6_addr.s6_addr[10] = s6->sin6_addr.s6_addr[11] = 0xff;
      std::memcpy(s6->sin6_addr.s6_addr + 12, &sin.sin_addr.s_addr, 4);
    }
    size = sizeof(sockaddr_in6);
  } else {
    std::memcpy(&out, &sin, sizeof sin);
    reinterpret_cast<sockaddr_in*>(&out)->sin_family = AF_INET;
  }
  if (addr) std::memcpy(addr, &out, std::min(*len, size));
  *len = size;
}

bool addr_ok(const Rs* rs, const sockaddr* addr, socklen_t len) {
  if (!addr) return false;
  if (addr->sa_family == AF_INET) return len >= sizeof(sockaddr_in);
  return rs->domain == AF_INET6 && addr->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6);
}

void destroy(Rs* rs) {
  for (Pending& p : rs->pending) {
    rdma_reject(p.id, nullptr, 0);
    rdma_destroy_id(p.id);
  }
  rs->pending.clear();
  free_connection(rs);
  if (rs->id) rdma_destroy_id(rs->id);
  if (rs->ch) rdma_destroy_event_channel(rs->ch);
  delete rs;
}

// An orderly close: end of stream, our data and the marker delivered (bounded), disconnect.
void close_stream(Rs* rs) {
  if (rs->state != State::kConnected) return;
  process_cm_events(rs);
  send_fin(rs);
  int ms = rs->lng.l_onoff ? std::min(rs->lng.l_linger * 1000, kCloseDrainMs) : kCloseDrainMs;
  drain_sends(rs, ms);
  disconnect(rs);
}

int int_opt(const void* v, socklen_t len) {
  int x = 0;
  std::memcpy(&x, v, std::min<size_t>(len, sizeof x));
  return x;
}

int* sock_opt(Rs* rs, int level, int name) {
  if (level == SOL_SOCKET) {
    switch (name) {
      case SO_REUSEADDR: return &rs->reuseaddr;
      case SO_KEEPALIVE: return &rs->keepalive;
      case SO_RCVBUF: return &rs->rcvbuf;
      case SO_SNDBUF: return &rs->sndbuf;
    }
  } else if (level == IPPROTO_TCP) {
    switch (name) {
      case TCP_NODELAY: return &rs->nodelay;
      case TCP_KEEPIDLE: return &rs->keepidle;
      case TCP_KEEPINTVL: return &rs->keepintvl;
      case TCP_KEEPCNT: return &rs->keepcnt;
    }
  } else if (level == SOL_RDMA) {
    switch (name) {
      case RDMA_SQSIZE: return &rs->sq_size;
      case RDMA_RQSIZE: return &rs->rq_size;
      case RDMA_INLINE: return &rs->inline_size;
      case RDMA_IOMAPSIZE: return &rs->iomap_size;
    }
  }
  return nullptr;
}

// Options accepted and without effect here (one traffic class, no TCP segmentation).
bool ignored_opt(int level, int name) {
  return (level == SOL_SOCKET && (name == SO_OOBINLINE || name == SO_RCVLOWAT || name == SO_SNDLOWAT ||
                                  name == SO_RCVTIMEO || name == SO_SNDTIMEO || name == SO_PRIORITY)) ||
         (level == IPPROTO_TCP && (name == TCP_CORK || name == TCP_QUICKACK || name == TCP_MAXSEG)) ||
         (level == IPPROTO_IP && name == IP_TOS) || (level == IPPROTO_IPV6 && name == IPV6_V6ONLY) ||
         (level == SOL_RDMA && name == RDMA_ROUTE);
}

int get_special(Rs* rs, int level, int name, int* v) {
  if (level == SOL_SOCKET && name == SO_ERROR) {
    *v = rs->so_error;
    rs->so_error = 0;
  } else if (level == SOL_SOCKET && name == SO_TYPE) {
    *v = SOCK_STREAM;
  } else if (level == SOL_SOCKET && name == SO_DOMAIN) {
    *v = rs->domain;
  } else if (level == SOL_SOCKET && name == SO_ACCEPTCONN) {
    *v = rs->state == State::kListening;
  } else if (level == IPPROTO_TCP && name == TCP_MAXSEG) {
    *v = int(rs->peer_seg);
  } else if (ignored_opt(level, name)) {
    *v = 0;
  } else {
    return ENOPROTOOPT;
  }
  return 0;
}

struct Locked {  // an rsocket looked up and locked for one call
  Rs* rs;
  std::unique_lock<std::mutex> lk;
  explicit Locked(int fd) : rs(lookup(fd)) {
    if (rs) lk = std::unique_lock(rs->mu);
  }
};

ssize_t do_recv(int fd, const iovec* iov, int n, int flags) {
  Locked l(fd);
  if (!l.rs) return fail(EBADF);
  return recv_iov(l.rs, l.lk, iov, n, flags);
}

ssize_t do_send(int fd, const iovec* iov, int n, int flags) {
  Locked l(fd);
  if (!l.rs) return fail(EBADF);
  return send_iov(l.rs, l.lk, iov, n, flags);
}

int wait_connected(Rs* rs, std::unique_lock<std::mutex>& lk) {
  while (rs->state == State::kResolving || rs->state == State::kConnecting)
    if (int e = wait_for(rs, lk, POLLOUT)) return fail(e);
  if (rs->state == State::kConnected) return 0;
  rs->so_error = 0;
  return fail(rs->conn_error ? rs->conn_error : ECONNREFUSED);
}

}  // namespace

Rs* lookup(int fd) {
  std::lock_guard lk(g_mu);
  auto it = g_socks.find(fd);
  return it == g_socks.end() ? nullptr : it->second;
}

void register_rs(Rs* rs) {
  std::lock_guard lk(g_mu);
  g_socks[rs->fd] = rs;
}

}  // namespace simnic::rdmacm::rs

using namespace simnic::rdmacm::rs;

extern "C" {

int rsocket(int domain, int type, int protocol) {
  const int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (domain != AF_INET && domain != AF_INET6) return fail(EAFNOSUPPORT);
  if (base != SOCK_STREAM || (protocol && protocol != IPPROTO_TCP)) return fail(EPROTONOSUPPORT);
  if (simnic::rdmacm::all_nics().empty()) return fail(ENODEV);  // as rdma-core without RDMA devices
  auto* rs = new Rs;
  rs->domain = domain;
  rs->ch = make_channel();
  if (!rs->ch || rdma_create_id(rs->ch, &rs->id, rs, RDMA_PS_TCP)) {
    int e = errno ? errno : ENOMEM;
    if (rs->ch) rdma_destroy_event_channel(rs->ch);
    delete rs;
    return fail(e);
  }
  rs->fd = rs->ch->fd;
  if (type & SOCK_NONBLOCK) rs->fd_flags |= O_NONBLOCK;
  register_rs(rs);
  return rs->fd;
}

int rbind(int socket, const struct sockaddr* addr, socklen_t addrlen) {
  Locked l(socket);
  if (!l.rs) return fail(EBADF);
  if (!addr_ok(l.rs, addr, addrlen)) return fail(EINVAL);
  if (l.rs->state != State::kInit) return fail(EINVAL);
  if (rdma_bind_addr(l.rs->id, const_cast<sockaddr*>(addr))) return -1;
  l.rs->state = State::kBound;
  return 0;
}

int rlisten(int socket, int backlog) {
  Locked l(socket);
  if (!l.rs) return fail(EBADF);
  Rs* rs = l.rs;
  if (rs->state == State::kListening) return 0;
  if (rs->state == State::kInit) {  // as TCP: an unbound socket listens on an ephemeral port
    sockaddr_in any{};
    any.sin_family = AF_INET;
    if (rdma_bind_addr(rs->id, reinterpret_cast<sockaddr*>(&any))) return -1;
    rs->state = State::kBound;
  }
  if (rs->state != State::kBound) return fail(EINVAL);
  if (rdma_listen(rs->id, backlog > 0 ? backlog : 128)) return -1;
  rs->state = State::kListening;
  return 0;
}

int raccept(int socket, struct sockaddr* addr, socklen_t* addrlen) {
  Locked l(socket);
  if (!l.rs) return fail(EBADF);
  if (l.rs->state != State::kListening) return fail(EINVAL);
  for (;;) {
    Rs* out = nullptr;
    int e = accept_one(l.rs, &out);
    if (!e) {
      register_rs(out);
      copy_addr(out, out->id->route.addr.dst_sin, addr, addrlen);
      return out->fd;
    }
    if (e != EAGAIN) return fail(e);
    if (l.rs->fd_flags & O_NONBLOCK) return fail(EAGAIN);
    if (int w = wait_for(l.rs, l.lk, POLLIN)) return fail(w);
  }
}

int rconnect(int socket, const struct sockaddr* addr, socklen_t addrlen) {
  Locked l(socket);
  if (!l.rs) return fail(EBADF);
  Rs* rs = l.rs;
  switch (rs->state) {
    case State::kConnected: return fail(EISCONN);
    case State::kResolving:
    case State::kConnecting:
      if (rs->fd_flags & O_NONBLOCK) return fail(EALREADY);
      return wait_connected(rs, l.lk);
    case State::kListening:
    case State::kClosed: return fail(EINVAL);
    default: break;
  }
  if (!addr_ok(rs, addr, addrlen)) return fail(EINVAL);
  if (rs->conn_error) return fail(EINVAL);  // one connection attempt per rsocket
  if (int e = start_connect(rs, addr)) return fail(e);
  if (rs->fd_flags & O_NONBLOCK) {
    if (rs->state == State::kConnected) return 0;
    if (rs->state == State::kInit) return fail(rs->conn_error);
    return fail(EINPROGRESS);
  }
  return wait_connected(rs, l.lk);
}

int rshutdown(int socket, int how) {
  Locked l(socket);
  if (!l.rs) return fail(EBADF);
  if (l.rs->state != State::kConnected) return fail(ENOTCONN);
  if (how == SHUT_RD || how == SHUT_RDWR) l.rs->rd_shut = true;
  if (how == SHUT_WR || how == SHUT_RDWR) {
    if (int e = send_fin(l.rs)) return fail(e);
  }
  return 0;
}

int rclose(int socket) {
  Rs* rs = unregister(socket);
  if (!rs) return fail(EBADF);
  {
    std::lock_guard lk(rs->mu);
    close_stream(rs);
    rs->state = State::kClosed;
  }
  destroy(rs);
  return 0;
}

ssize_t rrecv(int socket, void* buf, size_t len, int flags) {
  iovec v{buf, len};
  return do_recv(socket, &v, 1, flags);
}

ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags, struct sockaddr* src_addr, socklen_t* addrlen) {
  ssize_t n = rrecv(socket, buf, len, flags);
  if (n >= 0 && src_addr) rgetpeername(socket, src_addr, addrlen);
  return n;
}

ssize_t rrecvmsg(int socket, struct msghdr* msg, int flags) {
  if (!msg) return fail(EINVAL);
  ssize_t n = do_recv(socket, msg->msg_iov, int(msg->msg_iovlen), flags);
  if (n < 0) return n;
  if (msg->msg_name) rgetpeername(socket, static_cast<sockaddr*>(msg->msg_name), &msg->msg_namelen);
  msg->msg_controllen = 0;
  msg->msg_flags = 0;
  return n;
}

ssize_t rread(int socket, void* buf, size_t count) { return rrecv(socket, buf, count, 0); }
ssize_t rreadv(int socket, const struct iovec* iov, int iovcnt) { return do_recv(socket, iov, iovcnt, 0); }

ssize_t rsend(int socket, const void* buf, size_t len, int flags) {
  iovec v{const_cast<void*>(buf), len};
  return do_send(socket, &v, 1, flags);
}

ssize_t rsendto(int socket, const void* buf, size_t len, int flags, const struct sockaddr*, socklen_t) {
  return rsend(socket, buf, len, flags);  // a connected stream: the address is ignored, as TCP's
}

ssize_t rsendmsg(int socket, const struct msghdr* msg, int flags) {
  if (!msg) return fail(EINVAL);
  return do_send(socket, msg->msg_iov, int(msg->msg_iovlen), flags);
}

ssize_t rwrite(int socket, const void* buf, size_t count) { return rsend(socket, buf, count, 0); }
ssize_t rwritev(int socket, const struct iovec* iov, int iovcnt) { return do_send(socket, iov, iovcnt, 0); }

int rgetpeername(int socket, struct sockaddr* addr, socklen_t* addrlen) {
  Locked l(socket);
  if (!l.rs) return fail(EBADF);
  if (l.rs->state != State::kConnected) return fail(ENOTCONN);
  copy_addr(l.rs, l.rs->id->route.addr.dst_sin, addr, addrlen);
  return 0;
}

int rgetsockname(int socket, struct sockaddr* addr, socklen_t* addrlen) {
  Locked l(socket);
  if (!l.rs) return fail(EBADF);
  copy_addr(l.rs, l.rs->id->route.addr.src_sin, addr, addrlen);
  return 0;
}

int rsetsockopt(int socket, int level, int optname, const void* optval, socklen_t optlen) {
  Locked l(socket);
  if (!l.rs) return fail(EBADF);
  if (!optval) return fail(EFAULT);
  if (level == SOL_SOCKET && optname == SO_LINGER) {
    if (optlen < sizeof(linger)) return fail(EINVAL);
    std::memcpy(&l.rs->lng, optval, sizeof(linger));
    return 0;
  }
  if (int* v = sock_opt(l.rs, level, optname)) {
    if (optlen < sizeof(int)) return fail(EINVAL);
    *v = int_opt(optval, optlen);
    if (v == &l.rs->iomap_size) *v = std::clamp(*v, 0, kMaxIomaps);  // a table entry each
    return 0;
  }
  return ignored_opt(level, optname) ? 0 : fail(ENOPROTOOPT);
}

int rgetsockopt(int socket, int level, int optname, void* optval, socklen_t* optlen) {
  Locked l(socket);
  if (!l.rs) return fail(EBADF);
  if (!optval || !optlen) return fail(EFAULT);
  if (level == SOL_SOCKET && optname == SO_LINGER) {
    std::memcpy(optval, &l.rs->lng, std::min<size_t>(*optlen, sizeof(linger)));
    *optlen = sizeof(linger);
    return 0;
  }
  int v = 0;
  if (int* p = sock_opt(l.rs, level, optname)) {
    v = *p;
  } else if (int e = get_special(l.rs, level, optname, &v)) {
    return fail(e);
  }
  std::memcpy(optval, &v, std::min<size_t>(*optlen, sizeof v));
  *optlen = sizeof v;
  return 0;
}

int rfcntl(int socket, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  long arg = (cmd == F_SETFL || cmd == F_SETFD) ? va_arg(ap, long) : 0;
  va_end(ap);
  Locked l(socket);
  if (!l.rs) return fail(EBADF);
  switch (cmd) {
    case F_GETFL: return O_RDWR | l.rs->fd_flags;
    case F_SETFL: l.rs->fd_flags = int(arg) & O_NONBLOCK; return 0;
    case F_GETFD: return ::fcntl(l.rs->fd, F_GETFD);
    case F_SETFD: return ::fcntl(l.rs->fd, F_SETFD, int(arg));
    default: return fail(ENOTSUP);
  }
}

}  // extern "C"
