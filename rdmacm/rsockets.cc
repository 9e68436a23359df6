// rsockets (rsocket, rconnect, rsend, ... used by rstream, riostream, rcopy) are not part of
// simnic: every call fails with ENOSYS and says so once on stderr, so a program reports "not
// supported" rather than a misleading errno from a half-working socket layer.
#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cerrno>
#include <cstdio>

namespace {

std::atomic<bool> g_said{false};

int unsupported(const char* call) {
  if (!g_said.exchange(true))
    std::fprintf(stderr, "simnic: rsockets are not supported by simnic (%s failed with ENOSYS); use the "
                         "rdma_cm and verbs APIs\n", call);
  errno = ENOSYS;
  return -1;
}

}  // namespace

#define RS_FAIL(call) return unsupported(#call)

extern "C" {

int rsocket(int, int, int) { RS_FAIL(rsocket); }
int rbind(int, const struct sockaddr*, socklen_t) { RS_FAIL(rbind); }
int rlisten(int, int) { RS_FAIL(rlisten); }
int raccept(int, struct sockaddr*, socklen_t*) { RS_FAIL(raccept); }
int rconnect(int, const struct sockaddr*, socklen_t) { RS_FAIL(rconnect); }
int rshutdown(int, int) { RS_FAIL(rshutdown); }
int rclose(int) { RS_FAIL(rclose); }
ssize_t rrecv(int, void*, size_t, int) { RS_FAIL(rrecv); }
ssize_t rrecvfrom(int, void*, size_t, int, struct sockaddr*, socklen_t*) { RS_FAIL(rrecvfrom); }
ssize_t rrecvmsg(int, struct msghdr*, int) { RS_FAIL(rrecvmsg); }
ssize_t rsend(int, const void*, size_t, int) { RS_FAIL(rsend); }
ssize_t rsendto(int, const void*, size_t, int, const struct sockaddr*, socklen_t) { RS_FAIL(rsendto); }
ssize_t rsendmsg(int, const struct msghdr*, int) { RS_FAIL(rsendmsg); }
ssize_t rread(int, void*, size_t) { RS_FAIL(rread); }
ssize_t rreadv(int, const struct iovec*, int) { RS_FAIL(rreadv); }
ssize_t rwrite(int, const void*, size_t) { RS_FAIL(rwrite); }
ssize_t rwritev(int, const struct iovec*, int) { RS_FAIL(rwritev); }
int rpoll(struct pollfd*, nfds_t, int) { RS_FAIL(rpoll); }
int rselect(int, fd_set*, fd_set*, fd_set*, struct timeval*) { RS_FAIL(rselect); }
int rgetpeername(int, struct sockaddr*, socklen_t*) { RS_FAIL(rgetpeername); }
int rgetsockname(int, struct sockaddr*, socklen_t*) { RS_FAIL(rgetsockname); }
int rsetsockopt(int, int, int, const void*, socklen_t) { RS_FAIL(rsetsockopt); }
int rgetsockopt(int, int, int, void*, socklen_t*) { RS_FAIL(rgetsockopt); }
int rfcntl(int, int, ...) { RS_FAIL(rfcntl); }
off_t riomap(int, void*, size_t, int, int, off_t) {
  unsupported("riomap");
  return -1;
}
int riounmap(int, void*, size_t) { RS_FAIL(riounmap); }
size_t riowrite(int, const void*, size_t, off_t, int) {
  unsupported("riowrite");
  return 0;
}

}  // extern "C"
