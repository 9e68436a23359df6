/* labutil.h: the plumbing every lab program needs and no lab is about: opening a device by
 * name (with a clear message when there is none), a TCP side channel to swap a few bytes with
 * the peer, waiting for one completion with a timeout, and test messages that check. Plain C and plain sockets; read it,
 * there is no RDMA magic here. `simnic lab start` copies it next to your code. */
#ifndef SIMNIC_LABUTIL_H
#define SIMNIC_LABUTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Prints "PROGRAM: message" on stderr and exits with status 1. */
static inline void lab_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

/* Opens the RDMA device called `name` (NULL: the first one). Exits with a clean message when
 * the machine has no RDMA device, e.g. when the program was started without `simnic run`. */
static inline struct ibv_context *lab_open_device(const char *name) {
  /* Line-buffered output: a grader that has to stop a stuck program still sees what it said. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n == 0)
    lab_die("no RDMA device found: on simnic, start NICs with `simnic up` and run this program with "
            "`simnic run -- ...`; on real hardware, check that the RDMA driver is loaded (ibv_devices)");
  struct ibv_context *ctx = NULL;
  for (int i = 0; i < n && !ctx; ++i)
    if (!name || strcmp(ibv_get_device_name(list[i]), name) == 0) {
      ctx = ibv_open_device(list[i]);
      if (!ctx) lab_die("ibv_open_device(%s): %s", ibv_get_device_name(list[i]), strerror(errno));
    }
  ibv_free_device_list(list);
  if (!ctx) lab_die("no RDMA device named %s (ibv_devices lists them)", name);
  return ctx;
}

/* The default TCP port of the side channel (-p): 18515 plus your uid (`id -u`) mod 10000. It
 * is per user so that on a shared machine your client, started without -p, reaches your own
 * server and never a classmate's, whose server listens on their own port. */
static inline int lab_default_port(void) { return 18515 + (int)(getuid() % 10000); }

/* Listens on TCP `port` and returns the listening socket (for servers with several clients:
 * call accept() on it once per client). */
static inline int lab_tcp_listen(int port) {
  int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 16) != 0)
    lab_die("cannot listen on TCP port %d: %s", port, strerror(errno));
  return ls;
}

/* TCP server side for one client: listens on `port` and returns the first connection. */
static inline int lab_tcp_accept(int port) {
  int ls = lab_tcp_listen(port), one = 1;
  int fd = accept(ls, NULL, NULL);
  if (fd < 0) lab_die("accept: %s", strerror(errno));
  close(ls);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

/* TCP client side: connects to host:port, retrying for a few seconds while the server starts. */
static inline int lab_tcp_connect(const char *host, int port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) lab_die("not an IPv4 address: %s", host);
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    close(fd);
    usleep(50 * 1000);
  }
  lab_die("cannot connect to %s:%d: %s", host, port, strerror(errno));
  return -1;
}

/* Writes all `len` bytes, or dies. */
static inline void lab_write_all(int fd, const void *buf, size_t len) {
  const char *p = (const char *)buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n <= 0) lab_die("TCP write: %s", n < 0 ? strerror(errno) : "connection closed");
    p += n;
    len -= (size_t)n;
  }
}

/* Reads exactly `len` bytes, or dies. */
static inline void lab_read_all(int fd, void *buf, size_t len) {
  char *p = (char *)buf;
  while (len > 0) {
    ssize_t n = read(fd, p, len);
    if (n <= 0) lab_die("TCP read: %s", n < 0 ? strerror(errno) : "the peer closed the connection");
    p += n;
    len -= (size_t)n;
  }
}

/* Sends `mine` and receives the peer's struct of the same size: the side channel of every
 * connected lab. Both sides call it; both write first, which cannot deadlock for a few bytes. */
static inline void lab_exchange(int fd, const void *mine, void *theirs, size_t len) {
  lab_write_all(fd, mine, len);
  lab_read_all(fd, theirs, len);
}

/* One byte each way over TCP: neither side goes on before the other reached this point. */
static inline void lab_sync(int fd) {
  char mine = 's', theirs;
  lab_exchange(fd, &mine, &theirs, 1);
}

/* Waits for one completion on `cq` (busy polling) for at most `timeout_ms`. Returns 1 with
 * *wc filled, 0 on timeout; dies when ibv_poll_cq itself fails. */
static inline int lab_poll_one(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms) {
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n < 0) lab_die("ibv_poll_cq failed (%d)", n);
    if (n == 1) return 1;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
    if (ms > timeout_ms) return 0;
  }
}

/* Like lab_poll_one, but dies on a timeout or an error completion, naming `what`. */
static inline void lab_wait_ok(struct ibv_cq *cq, struct ibv_wc *wc, const char *what) {
  if (!lab_poll_one(cq, wc, 10000)) lab_die("%s: no completion within 10 s", what);
  if (wc->status != IBV_WC_SUCCESS)
    lab_die("%s: completion with status %s (wr_id %llu)", what, ibv_wc_status_str(wc->status),
            (unsigned long long)wc->wr_id);
}

/* A test message of `size` bytes: "message 3" (or "reply 3", ...), then a pattern that depends
 * on the number, so that a message cut short, shifted or mixed up with another never checks. */
static inline void lab_message_fill(char *buf, size_t size, const char *what, int i) {
  int n = snprintf(buf, size, "%s %d", what, i) + 1;
  for (int j = n; j < (int)size; ++j) buf[j] = (char)('a' + (i + j) % 26);
}

static inline int lab_message_ok(const char *buf, size_t size, const char *what, int i) {
  char head[64];
  int n = snprintf(head, sizeof head, "%s %d", what, i) + 1;
  if (n > (int)size || memcmp(buf, head, (size_t)n) != 0) return 0;
  for (int j = n; j < (int)size; ++j)
    if (buf[j] != (char)('a' + (i + j) % 26)) return 0;
  return 1;
}

/* Receive slots: slot s at slots + s * size, its receive WR posted with wr_id = s. Takes the
 * receive completion `wc`, which must carry `what` number `i` (lab_message_fill), or dies;
 * returns its slot, to be posted again. */
static inline int lab_message_received(const struct ibv_wc *wc, const char *slots, size_t size, const char *what,
                                       int i) {
  if (wc->opcode != IBV_WC_RECV) lab_die("expected a receive completion, got opcode %d", wc->opcode);
  if (wc->byte_len != size || !lab_message_ok(slots + size * wc->wr_id, size, what, i))
    lab_die("%s %d is wrong", what, i);
  return (int)wc->wr_id;
}

/* After posting the SEND of message `i`: waits for its completion and for the receive of the
 * reply to it (`what` number `i`), in either order. Returns the reply's slot (see above). */
static inline int lab_wait_reply(struct ibv_cq *cq, const char *slots, size_t size, const char *what, int i) {
  int slot = -1;
  for (int done = 0; done < 2; ++done) {
    struct ibv_wc wc;
    lab_wait_ok(cq, &wc, "waiting for the send and the reply");
    if (wc.opcode == IBV_WC_RECV) slot = lab_message_received(&wc, slots, size, what, i);
  }
  if (slot < 0) lab_die("no reply to message %d", i);
  return slot;
}

/* A GID as ibv_devinfo prints it: eight groups of four hex digits. */
static inline void lab_gid_str(const union ibv_gid *gid, char out[40]) {
  const uint8_t *r = gid->raw;
  snprintf(out, 40, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", r[0], r[1], r[2],
           r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]);
}

#endif
