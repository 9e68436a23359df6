/* A plain TCP program (socket, bind, listen, accept, connect, send, recv, poll, select) with
 * no RDMA in it: the rsockets tests run it under LD_PRELOAD=librspreload.so so that its
 * sockets become rsockets, unmodified.
 *
 *   tcp_pingpong server ADDR PORT ROUNDS SIZE        echo ROUNDS messages of SIZE bytes, then expect EOF
 *   tcp_pingpong client ADDR PORT ROUNDS SIZE [SRC]  send them, compare each echo byte for byte
 *   tcp_pingpong sink   ADDR PORT                    receive until EOF, print bytes and checksum
 *   tcp_pingpong source ADDR PORT BYTES [SRC]        send BYTES of a pattern, print checksum, close
 *   tcp_pingpong hold   ADDR PORT                    accept, then report what recv says when the peer dies
 *   tcp_pingpong hang   ADDR PORT [SRC]              connect, send one byte, wait to be killed
 * Exit status 0 on success. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char* what) {
  fprintf(stderr, "tcp_pingpong: %s: %s\n", what, strerror(errno));
  exit(2);
}

static struct sockaddr_in addr_of(const char* ip, int port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
    fprintf(stderr, "tcp_pingpong: bad address %s\n", ip);
    exit(2);
  }
  return a;
}

/* Waits with poll() for `fd` together with an idle pipe: a mix of socket and ordinary fds. */
static void wait_fd(int fd, short events) {
  static int pipefd[2] = {-1, -1};
  if (pipefd[0] < 0 && pipe(pipefd)) die("pipe");
  struct pollfd p[2] = {{pipefd[0], POLLIN, 0}, {fd, events, 0}};
  int n = poll(p, 2, 30000);
  if (n < 0) die("poll");
  if (n == 0) {
    fprintf(stderr, "tcp_pingpong: poll timed out\n");
    exit(3);
  }
  if (p[0].revents) {
    fprintf(stderr, "tcp_pingpong: the idle pipe became ready\n");
    exit(3);
  }
}

static int listen_accept(const char* ip, int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) die("socket");
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = addr_of(ip, port);
  if (bind(s, (struct sockaddr*)&a, sizeof a)) die("bind");
  if (listen(s, 4)) die("listen");
  printf("listening\n");
  fflush(stdout);
  /* select() on the listener, as many servers wait for a connection */
  fd_set rd;
  FD_ZERO(&rd);
  FD_SET(s, &rd);
  struct timeval tv = {30, 0};
  if (select(s + 1, &rd, NULL, NULL, &tv) != 1 || !FD_ISSET(s, &rd)) die("select");
  struct sockaddr_in peer;
  socklen_t len = sizeof peer;
  int c = accept(s, (struct sockaddr*)&peer, &len);
  if (c < 0) die("accept");
  close(s);
  return c;
}

static int dial(const char* ip, int port, const char* src) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) die("socket");
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (src) {
    struct sockaddr_in b = addr_of(src, 0);
    if (bind(s, (struct sockaddr*)&b, sizeof b)) die("bind");
  }
  struct sockaddr_in a = addr_of(ip, port);
  for (int tries = 0;; tries++) { /* the server may not listen yet */
    if (connect(s, (struct sockaddr*)&a, sizeof a) == 0) break;
    if (tries > 50) die("connect");
    close(s);
    usleep(100000);
    s = socket(AF_INET, SOCK_STREAM, 0);
    if (src) {
      struct sockaddr_in b = addr_of(src, 0);
      if (bind(s, (struct sockaddr*)&b, sizeof b)) die("bind");
    }
  }
  return s;
}

static void send_all(int s, const unsigned char* buf, size_t n) {
  while (n) {
    wait_fd(s, POLLOUT);
    ssize_t k = send(s, buf, n, 0);
    if (k <= 0) die("send");
    buf += k;
    n -= (size_t)k;
  }
}

static void recv_all(int s, unsigned char* buf, size_t n) {
  while (n) {
    wait_fd(s, POLLIN);
    ssize_t k = recv(s, buf, n, 0);
    if (k < 0) die("recv");
    if (k == 0) {
      fprintf(stderr, "tcp_pingpong: unexpected end of stream\n");
      exit(3);
    }
    buf += k;
    n -= (size_t)k;
  }
}

static unsigned char pattern(uint64_t i) { return (unsigned char)((i * 2654435761u) >> 13); }

static int server(const char* ip, int port, int rounds, size_t size) {
  int c = listen_accept(ip, port);
  unsigned char* buf = malloc(size);
  for (int r = 0; r < rounds; r++) {
    recv_all(c, buf, size);
    send_all(c, buf, size);
  }
  char tail;
  ssize_t k = recv(c, &tail, 1, 0); /* the client closes: end of stream */
  if (k != 0) {
    fprintf(stderr, "tcp_pingpong: expected end of stream, recv returned %zd (%s)\n", k, strerror(errno));
    return 3;
  }
  printf("server: %d rounds of %zu bytes echoed, end of stream seen\n", rounds, size);
  close(c);
  free(buf);
  return 0;
}

static int client(const char* ip, int port, int rounds, size_t size, const char* src) {
  int s = dial(ip, port, src);
  unsigned char* out = malloc(size);
  unsigned char* in = malloc(size);
  for (int r = 0; r < rounds; r++) {
    for (size_t i = 0; i < size; i++) out[i] = pattern((uint64_t)r * size + i);
    send_all(s, out, size);
    recv_all(s, in, size);
    if (memcmp(in, out, size)) {
      fprintf(stderr, "tcp_pingpong: round %d: the echo differs\n", r);
      return 4;
    }
  }
  printf("client: %d rounds of %zu bytes OK\n", rounds, size);
  close(s);
  free(out);
  free(in);
  return 0;
}

static int sink(const char* ip, int port) {
  int c = listen_accept(ip, port);
  static unsigned char buf[65536];
  uint64_t total = 0, sum = 14695981039346656037ull;
  for (;;) {
    wait_fd(c, POLLIN);
    ssize_t k = read(c, buf, sizeof buf);
    if (k < 0) die("read");
    if (k == 0) break;
    for (ssize_t i = 0; i < k; i++) sum = (sum ^ buf[i]) * 1099511628211ull;
    total += (uint64_t)k;
  }
  printf("sink: %llu bytes checksum %016llx end of stream\n", (unsigned long long)total, (unsigned long long)sum);
  close(c);
  return 0;
}

static int source(const char* ip, int port, uint64_t bytes, const char* src) {
  int s = dial(ip, port, src);
  static unsigned char buf[100000];
  uint64_t sent = 0, sum = 14695981039346656037ull;
  while (sent < bytes) {
    size_t n = bytes - sent < sizeof buf ? (size_t)(bytes - sent) : sizeof buf;
    for (size_t i = 0; i < n; i++) {
      buf[i] = pattern(sent + i);
      sum = (sum ^ buf[i]) * 1099511628211ull;
    }
    size_t off = 0;
    while (off < n) { /* blocking write: no poll, the other way programs send */
      ssize_t k = write(s, buf + off, n - off);
      if (k <= 0) die("write");
      off += (size_t)k;
    }
    sent += n;
  }
  printf("source: %llu bytes checksum %016llx\n", (unsigned long long)sent, (unsigned long long)sum);
  if (shutdown(s, SHUT_WR)) die("shutdown");
  close(s);
  return 0;
}

static int hold(const char* ip, int port) {
  int c = listen_accept(ip, port);
  char b;
  if (recv(c, &b, 1, 0) != 1) die("recv first byte");
  printf("hold: connected\n");
  fflush(stdout);
  ssize_t k = recv(c, &b, 1, 0); /* blocks until the peer is killed */
  printf("hold: recv returned %zd errno %d (%s)\n", k, k < 0 ? errno : 0, k < 0 ? strerror(errno) : "end of stream");
  close(c);
  return k <= 0 ? 0 : 3;
}

__attribute__((noreturn)) static void hang(const char* ip, int port, const char* src) {
  int s = dial(ip, port, src);
  if (send(s, "x", 1, 0) != 1) die("send");
  printf("hang: connected\n");
  fflush(stdout);
  for (;;) pause();
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 4) {
    fprintf(stderr, "usage: see tcp_pingpong.c\n");
    return 2;
  }
  const char* mode = argv[1];
  const char* ip = argv[2];
  int port = atoi(argv[3]);
  if (!strcmp(mode, "server") && argc >= 6) return server(ip, port, atoi(argv[4]), (size_t)atol(argv[5]));
  if (!strcmp(mode, "client") && argc >= 6)
    return client(ip, port, atoi(argv[4]), (size_t)atol(argv[5]), argc > 6 ? argv[6] : NULL);
  if (!strcmp(mode, "sink")) return sink(ip, port);
  if (!strcmp(mode, "source") && argc >= 5)
    return source(ip, port, strtoull(argv[4], NULL, 10), argc > 5 ? argv[5] : NULL);
  if (!strcmp(mode, "hold")) return hold(ip, port);
  if (!strcmp(mode, "hang")) hang(ip, port, argc > 4 ? argv[4] : NULL);
  fprintf(stderr, "tcp_pingpong: unknown mode %s\n", mode);
  return 2;
}
