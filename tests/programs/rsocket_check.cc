// The rsocket API called directly, in one process and one thread (non-blocking calls and
// rpoll), between two NICs' addresses: simnic-rsocket-check SERVER_ADDR CLIENT_ADDR PORT.
// Linked against the system librdmacm; under `simnic run` it gets simnic's. Prints one "ok"
// line per check and exits 0, or names the first check that failed and exits 1.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

#define CHECK(cond, what)                                                                                   \
  do {                                                                                                      \
    if (!(cond)) {                                                                                          \
      std::printf("FAIL %s (%s:%d, errno %d %s)\n", what, __FILE__, __LINE__, errno, std::strerror(errno)); \
      std::exit(1);                                                                                         \
    }                                                                                                       \
  } while (0)

sockaddr_in addr_of(const char* ip, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

// Waits (bounded) with rpoll until fd has `events`; returns its revents.
short wait_rs(int fd, short events, int extra_fd = -1) {
  pollfd p[2] = {{fd, events, 0}, {extra_fd, POLLIN, 0}};
  int n = rpoll(p, extra_fd >= 0 ? 2 : 1, 10000);
  CHECK(n > 0, "rpoll returns before its timeout");
  return p[0].revents;
}

int make_listener(const char* ip, int port) {
  int l = rsocket(AF_INET, SOCK_STREAM, 0);
  CHECK(l >= 0, "rsocket");
  int one = 1;
  CHECK(rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0, "SO_REUSEADDR");
  sockaddr_in a = addr_of(ip, port);
  CHECK(rbind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0, "rbind");
  CHECK(rlisten(l, 4) == 0, "rlisten");
  CHECK(rfcntl(l, F_SETFL, O_NONBLOCK) == 0, "rfcntl O_NONBLOCK on the listener");
  sockaddr_in got{};
  socklen_t len = sizeof got;
  CHECK(rgetsockname(l, reinterpret_cast<sockaddr*>(&got), &len) == 0 && got.sin_port == htons(uint16_t(port)),
        "rgetsockname gives the bound port");
  return l;
}

void check_refused(const char* server, const char* client, int port) {
  int s = rsocket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in src = addr_of(client, 0), dst = addr_of(server, port + 1);
  CHECK(rbind(s, reinterpret_cast<sockaddr*>(&src), sizeof src) == 0, "rbind the client");
  CHECK(rconnect(s, reinterpret_cast<sockaddr*>(&dst), sizeof dst) == -1 && errno == ECONNREFUSED,
        "a blocking rconnect to a port nobody listens on fails with ECONNREFUSED");
  rclose(s);
  std::printf("ok refused\n");
}

// A non-blocking connect, accepted after rpoll says the listener is readable.
void connect_pair(int l, const char* server, const char* client, int port, int* c, int* a) {
  *c = rsocket(AF_INET, SOCK_STREAM, 0);
  CHECK(*c >= 0, "rsocket client");
  sockaddr_in src = addr_of(client, 0), dst = addr_of(server, port);
  CHECK(rbind(*c, reinterpret_cast<sockaddr*>(&src), sizeof src) == 0, "rbind the client");
  int iomaps = 2;  // the client accepts two of the server's mappings; the server (default) none
  CHECK(rsetsockopt(*c, SOL_RDMA, RDMA_IOMAPSIZE, &iomaps, sizeof iomaps) == 0, "RDMA_IOMAPSIZE");
  CHECK(rfcntl(*c, F_SETFL, O_NONBLOCK) == 0 && (rfcntl(*c, F_GETFL) & O_NONBLOCK), "rfcntl F_SETFL/F_GETFL");
  int r = rconnect(*c, reinterpret_cast<sockaddr*>(&dst), sizeof dst);
  CHECK(r == 0 || errno == EINPROGRESS, "a non-blocking rconnect returns EINPROGRESS");
  *a = -1;
  for (int i = 0; i < 100 && *a < 0; i++) {
    pollfd p[2] = {{l, POLLIN, 0}, {*c, POLLOUT, 0}};
    CHECK(rpoll(p, 2, 10000) > 0, "rpoll on a listener and a connecting socket");
    if (p[0].revents & POLLIN) *a = raccept(l, nullptr, nullptr);
  }
  CHECK(*a >= 0, "raccept after rpoll POLLIN");
  CHECK(wait_rs(*c, POLLOUT) & POLLOUT, "the connecting socket becomes writable");
  int err = -1;
  socklen_t len = sizeof err;
  CHECK(rgetsockopt(*c, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0, "SO_ERROR is 0 once connected");
  sockaddr_in peer{}, self{};
  len = sizeof peer;
  CHECK(rgetpeername(*a, reinterpret_cast<sockaddr*>(&peer), &len) == 0 && peer.sin_addr.s_addr == src.sin_addr.s_addr,
        "rgetpeername on the accepted socket gives the client's address");
  len = sizeof self;
  CHECK(rgetsockname(*c, reinterpret_cast<sockaddr*>(&self), &len) == 0 &&
            self.sin_addr.s_addr == src.sin_addr.s_addr && self.sin_port != 0,
        "rgetsockname on the client gives its address and a port");
  std::printf("ok connect\n");
}

void check_data(int c, int a) {
  int pipefd[2];
  CHECK(pipe(pipefd) == 0, "pipe");
  char buf[64];
  CHECK(rrecv(c, buf, sizeof buf, 0) == -1 && errno == EAGAIN, "rrecv with nothing there: EAGAIN");
  // rpoll over an rsocket and an ordinary fd: the pipe is the one that is ready.
  CHECK(write(pipefd[1], "p", 1) == 1, "write pipe");
  pollfd p[2] = {{c, POLLIN, 0}, {pipefd[0], POLLIN, 0}};
  CHECK(rpoll(p, 2, 5000) == 1 && p[0].revents == 0 && (p[1].revents & POLLIN), "rpoll reports the ordinary fd only");
  const char msg[] = "hello over rsockets";
  iovec out[2] = {{const_cast<char*>(msg), 5}, {const_cast<char*>(msg + 5), sizeof msg - 5}};
  CHECK(read(pipefd[0], buf, 1) == 1, "read pipe");
  CHECK(rwritev(c, out, 2) == ssize_t(sizeof msg), "rwritev");
  CHECK(wait_rs(a, POLLIN, pipefd[0]) & POLLIN, "the peer becomes readable");
  CHECK(rrecv(a, buf, 5, MSG_PEEK) == 5 && std::memcmp(buf, msg, 5) == 0, "MSG_PEEK");
  char x[8], y[64];
  iovec in[2] = {{x, sizeof x}, {y, sizeof y}};
  ssize_t n = rreadv(a, in, 2);
  CHECK(n == ssize_t(sizeof msg) && std::memcmp(x, msg, 8) == 0 && std::memcmp(y, msg + 8, sizeof msg - 8) == 0,
        "rreadv gets what rwritev sent, byte for byte");
  // rselect sees the rsocket readable.
  CHECK(rsend(a, "r", 1, 0) == 1, "rsend");
  fd_set rd;
  FD_ZERO(&rd);
  FD_SET(c, &rd);
  timeval tv{10, 0};
  CHECK(rselect(c + 1, &rd, nullptr, nullptr, &tv) == 1 && FD_ISSET(c, &rd), "rselect reports the rsocket readable");
  CHECK(rrecv(c, buf, sizeof buf, 0) == 1 && buf[0] == 'r', "rrecv after rselect");
  close(pipefd[0]);
  close(pipefd[1]);
  std::printf("ok data\n");
}

// Blocks (bounded) until `fd` has one stream byte, and returns it.
char recv_byte(int fd) {
  char b = 0;
  for (int i = 0; i < 100; i++) {
    CHECK(wait_rs(fd, POLLIN) & POLLIN, "the peer becomes readable");
    ssize_t n = rrecv(fd, &b, 1, MSG_DONTWAIT);
    if (n == 1) return b;
    CHECK(n < 0 && errno == EAGAIN, "rrecv one byte");
  }
  CHECK(false, "a stream byte arrives");
  return 0;
}

// All of `n` bytes into the peer's mapping at `offset` (the client is non-blocking).
void riowrite_all(int c, const void* buf, size_t n, off_t offset) {
  size_t done = 0;
  while (done < n) {
    size_t r = riowrite(c, static_cast<const char*>(buf) + done, n - done, offset + off_t(done), 0);
    if (r != size_t(-1)) {
      done += r;
      continue;
    }
    CHECK(errno == EAGAIN, "riowrite");
    CHECK(wait_rs(c, POLLOUT) & POLLOUT, "riowrite room");
  }
}

// riomap on the accepting side, riowrite from the client: the bytes land in the mapped buffer
// before the stream byte sent after them is received; riounmap withdraws the mapping.
void check_iomap(int c, int a) {
  const size_t size = 64 << 10;
  const off_t at = 0x10000;
  std::vector<char> mapped(size, 0), picked(4096, 0), extra(4096, 0), local(4096, 0);
  CHECK(riomap(a, mapped.data(), size, PROT_READ, 0, 0) == -1 && errno == EINVAL, "riomap PROT_READ: EINVAL");
  CHECK(riomap(a, mapped.data(), size, PROT_WRITE, 0, at) == at, "riomap PROT_WRITE at a chosen offset");
  off_t any = riomap(a, picked.data(), picked.size(), PROT_WRITE, 0, -1);
  CHECK(any != -1 && (any + off_t(picked.size()) <= at || any >= at + off_t(size)),
        "riomap offset -1 picks a free offset");
  CHECK(riomap(a, extra.data(), extra.size(), PROT_WRITE, 0, -1) == -1 && errno == ENOMEM,
        "a third PROT_WRITE mapping: ENOMEM (the client's RDMA_IOMAPSIZE is 2)");
  CHECK(riomap(c, local.data(), local.size(), PROT_WRITE, 0, -1) == -1 && errno == ENOMEM,
        "riomap PROT_WRITE towards a peer that accepts no mappings (default RDMA_IOMAPSIZE 0): ENOMEM");
  const off_t local_off = riomap(a, local.data(), local.size(), 0 /* PROT_NONE */, 0, 0x900000);
  CHECK(local_off == 0x900000, "riomap PROT_NONE (local only)");
  // The mappings are available once the client received data sent after riomap.
  CHECK(rsend(a, "m", 1, 0) == 1 && recv_byte(c) == 'm', "a stream byte after riomap");

  std::vector<char> pattern(40000);
  for (size_t i = 0; i < pattern.size(); i++) pattern[i] = char(i * 13 + i / 977 + 1);
  riowrite_all(c, pattern.data(), pattern.size(), at + 100);  // 3 slots' worth
  riowrite_all(c, "PICKED", 6, any + 10);
  CHECK(rsend(c, "d", 1, 0) == 1, "a stream byte after riowrite");
  CHECK(recv_byte(a) == 'd', "the stream byte after riowrite arrives");
  CHECK(std::memcmp(mapped.data() + 100, pattern.data(), pattern.size()) == 0,
        "riowrite's 40000 bytes are in the mapped buffer when the later stream byte is read");
  CHECK(std::all_of(mapped.begin(), mapped.begin() + 100, [](char x) { return x == 0; }) &&
            std::all_of(mapped.begin() + 100 + pattern.size(), mapped.end(), [](char x) { return x == 0; }),
        "riowrite touched nothing outside its range");
  CHECK(std::memcmp(picked.data() + 10, "PICKED", 6) == 0, "riowrite into the mapping at the picked offset");

  char tail[100];
  std::memset(tail, 'T', sizeof tail);
  size_t r = riowrite(c, tail, sizeof tail, at + off_t(size) - 10, 0);
  CHECK(r == 10, "riowrite stops at the end of the peer's mapping (a partial count)");
  CHECK(riowrite(c, tail, 10, 0x900000, 0) == size_t(-1) && errno == EINVAL, "riowrite to a PROT_NONE mapping: EINVAL");
  CHECK(riowrite(c, tail, 10, 0x5000000, 0) == size_t(-1) && errno == EINVAL, "riowrite to no mapping: EINVAL");
  CHECK(rsend(c, "t", 1, 0) == 1 && recv_byte(a) == 't', "a stream byte after the partial riowrite");
  CHECK(std::memcmp(mapped.data() + size - 10, tail, 10) == 0, "the partial riowrite landed");

  CHECK(riounmap(a, mapped.data(), size) == 0, "riounmap");
  CHECK(riounmap(a, mapped.data(), size) == -1 && errno == EINVAL, "riounmap twice: EINVAL");
  CHECK(riounmap(a, local.data(), local.size()) == 0, "riounmap a PROT_NONE mapping");
  CHECK(rsend(a, "u", 1, 0) == 1 && recv_byte(c) == 'u', "a stream byte after riounmap");
  CHECK(riowrite(c, tail, 10, at, 0) == size_t(-1) && errno == EINVAL, "riowrite after the peer's riounmap: EINVAL");
  riowrite_all(c, "STILL", 5, any);  // the other mapping is untouched by the unmap
  CHECK(rsend(c, "e", 1, 0) == 1 && recv_byte(a) == 'e', "the stream still works");
  CHECK(std::memcmp(picked.data(), "STILL", 5) == 0, "the other mapping still takes riowrite");
  CHECK(riounmap(a, picked.data(), picked.size()) == 0, "riounmap the second mapping");
  CHECK(rsend(a, "v", 1, 0) == 1 && recv_byte(c) == 'v', "a stream byte after the second riounmap");
  CHECK(riowrite(c, tail, 10, any, 0) == size_t(-1) && errno == EINVAL, "riowrite after the second riounmap: EINVAL");
  std::printf("ok iomap\n");
}

// Sends on `fd` (non-blocking) until the peer's receive buffer is full: no credit left.
size_t fill_peer(int fd) {
  std::vector<char> fill(1 << 20, 'f');
  size_t filled = 0;
  for (;;) {
    ssize_t n = rsend(fd, fill.data(), fill.size(), MSG_DONTWAIT);
    if (n < 0) break;
    filled += size_t(n);
    CHECK(filled < (64u << 20), "the peer's receive buffer fills up");
  }
  CHECK(errno == EAGAIN && filled > 0, "rsend until EAGAIN: no credit left");
  return filled;
}

// Reads `n` filler bytes (and then, if `eof`, the end of stream) from `fd`.
void drain_fill(int fd, size_t n, bool eof) {
  size_t got = 0;
  char buf[65536];
  while (got < n || eof) {
    ssize_t r = rrecv(fd, buf, got < n ? std::min(sizeof buf, n - got) : sizeof buf, MSG_DONTWAIT);
    if (r == 0) break;
    if (r < 0) {
      CHECK(errno == EAGAIN, "rrecv the filled data");
      CHECK(wait_rs(fd, POLLIN) & POLLIN, "more data");
      continue;
    }
    CHECK(std::all_of(buf, buf + r, [](char x) { return x == 'f'; }), "the filled bytes");
    got += size_t(r);
  }
  CHECK(got == n, "every filled byte arrives");
}

// riowrite needs no credit: a blocking riowrite larger than the send slots completes while
// the peer's receive buffer is full. riounmap reaches the peer even while the mapping side has
// no credit left (the peer has not read its stream): the withdrawal is a control message,
// ordered before our end of stream.
void check_iomap_without_credits(int c, int a) {
  std::vector<char> mapped(1 << 20, 0);
  const off_t off = riomap(a, mapped.data(), mapped.size(), PROT_WRITE, 0, -1);
  CHECK(off != -1, "riomap");
  CHECK(rsend(a, "m", 1, 0) == 1 && recv_byte(c) == 'm', "a stream byte after riomap");
  riowrite_all(c, "BEFORE", 6, off + 1);
  CHECK(rsend(c, "w", 1, 0) == 1 && recv_byte(a) == 'w' && std::memcmp(mapped.data() + 1, "BEFORE", 6) == 0,
        "riowrite lands");

  const size_t c_filled = fill_peer(c);
  std::vector<char> big(mapped.size() - 8);
  for (size_t i = 0; i < big.size(); i++) big[i] = char(i * 31 + i / 65536);
  CHECK(rfcntl(c, F_SETFL, 0) == 0, "rfcntl blocking");
  CHECK(riowrite(c, big.data(), big.size(), off + 8, 0) == big.size(), "a blocking 1 MiB riowrite without credits");
  CHECK(rfcntl(c, F_SETFL, O_NONBLOCK) == 0, "rfcntl O_NONBLOCK");
  drain_fill(a, c_filled, false);  // gives c its credits back
  CHECK(wait_rs(c, POLLOUT) & POLLOUT, "the credits come back");
  CHECK(rsend(c, "x", 1, 0) == 1 && recv_byte(a) == 'x', "a stream byte after the big riowrite");
  CHECK(std::memcmp(mapped.data() + 8, big.data(), big.size()) == 0, "the 1 MiB riowrite is in the mapped buffer");

  const size_t filled = fill_peer(a);
  CHECK(riounmap(a, mapped.data(), mapped.size()) == 0, "riounmap without credits");
  CHECK(rshutdown(a, SHUT_WR) == 0, "rshutdown SHUT_WR after riounmap");
  pollfd p = {c, POLLRDHUP, 0};
  CHECK(rpoll(&p, 1, 10000) == 1 && (p.revents & POLLRDHUP), "the end of stream arrives without reading the data");
  CHECK(riowrite(c, "AFTER", 5, off + 1, 0) == size_t(-1) && errno == EINVAL,
        "riowrite after a riounmap sent without credits: EINVAL");
  drain_fill(c, filled, true);
  CHECK(std::memcmp(mapped.data() + 1, "BEFORE", 6) == 0, "nothing written after riounmap");
  rclose(c);
  rclose(a);
  std::printf("ok iomap without credits\n");
}

// More than the receive buffer in flight: the sender blocks on credits (EAGAIN) until the
// receiver reads, and every byte arrives in order.
void check_flow_control(int c, int a) {
  const size_t total = 4 << 20;
  std::string out(total, 0), in;
  for (size_t i = 0; i < total; i++) out[i] = char(i * 7 + i / 4096);
  size_t sent = 0;
  bool saw_eagain = false;
  char buf[70000];
  while (in.size() < total) {
    if (sent < total) {
      ssize_t n = rsend(c, out.data() + sent, total - sent, 0);
      if (n > 0) sent += size_t(n);
      else if (errno == EAGAIN) saw_eagain = true;
      else CHECK(false, "rsend");
    }
    if (saw_eagain || sent == total) {
      pollfd p[2] = {{a, POLLIN, 0}, {c, POLLOUT, 0}};
      CHECK(rpoll(p, sent < total ? 2 : 1, 10000) > 0, "rpoll while streaming");
      ssize_t n = rrecv(a, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) in.append(buf, size_t(n));
      else CHECK(errno == EAGAIN, "rrecv while streaming");
    }
  }
  CHECK(saw_eagain, "a non-blocking sender sees EAGAIN when the peer's buffer is full");
  CHECK(in == out, "4 MiB arrive in order, byte for byte");
  std::printf("ok flow control\n");
}

// Half close: after rshutdown(SHUT_WR) the peer reads end of stream, and can still send back.
void check_half_close(int c, int a) {
  CHECK(rshutdown(c, SHUT_WR) == 0, "rshutdown SHUT_WR");
  char buf[8];
  CHECK(wait_rs(a, POLLIN) & POLLIN, "end of stream makes the peer readable");
  CHECK(rrecv(a, buf, sizeof buf, 0) == 0, "rrecv returns 0 at end of stream");
  CHECK(rsend(c, "z", 1, 0) == -1 && errno == EPIPE, "rsend after SHUT_WR fails with EPIPE");
  CHECK(rsend(a, "back", 4, 0) == 4, "the other direction still works");
  CHECK(wait_rs(c, POLLIN) & POLLIN, "the half-closed side is readable");
  CHECK(rrecv(c, buf, sizeof buf, 0) == 4 && std::memcmp(buf, "back", 4) == 0, "rrecv on the half-closed side");
  CHECK(rclose(a) == 0, "rclose");
  short ev = wait_rs(c, POLLIN);
  CHECK(ev & (POLLIN | POLLHUP), "the peer's rclose wakes rpoll");
  CHECK(rrecv(c, buf, sizeof buf, 0) == 0, "rrecv after the peer's rclose: end of stream");
  CHECK(rclose(c) == 0, "rclose");
  std::printf("ok close\n");
}

void check_options() {
  int s = rsocket(AF_INET, SOCK_STREAM, 0);
  int v = 1 << 20, got = 0;
  socklen_t len = sizeof got;
  CHECK(rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof v) == 0 &&
            rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &got, &len) == 0 && got == v,
        "SO_RCVBUF");
  v = 1;
  CHECK(rsetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v) == 0, "TCP_NODELAY");
  CHECK(rsetsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof v) == 0, "SO_KEEPALIVE");
  v = 64;
  CHECK(rsetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, sizeof v) == 0 &&
            rsetsockopt(s, SOL_RDMA, RDMA_INLINE, &v, sizeof v) == 0,
        "RDMA_SQSIZE, RDMA_INLINE");
  linger lg{1, 3}, lg2{};
  len = sizeof lg2;
  CHECK(rsetsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0 &&
            rgetsockopt(s, SOL_SOCKET, SO_LINGER, &lg2, &len) == 0 && lg2.l_onoff == 1 && lg2.l_linger == 3,
        "SO_LINGER");
  CHECK(rsetsockopt(s, SOL_SOCKET, SO_BROADCAST, &v, sizeof v) == -1 && errno == ENOPROTOOPT,
        "an unknown option: ENOPROTOOPT");
  CHECK(rsocket(AF_UNIX, SOCK_STREAM, 0) == -1 && errno == EAFNOSUPPORT, "AF_UNIX: EAFNOSUPPORT");
  CHECK(rsocket(AF_INET, SOCK_DGRAM, 0) == -1, "SOCK_DGRAM is not supported");
  rclose(s);
  std::printf("ok options\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s SERVER_ADDR CLIENT_ADDR PORT\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* server = argv[1];
  const char* client = argv[2];
  const int port = std::atoi(argv[3]);
  check_options();
  int l = make_listener(server, port);
  check_refused(server, client, port);
  int c = -1, a = -1;
  connect_pair(l, server, client, port, &c, &a);
  check_data(c, a);
  check_iomap(c, a);
  check_flow_control(c, a);
  check_half_close(c, a);
  connect_pair(l, server, client, port, &c, &a);
  check_iomap_without_credits(c, a);
  rclose(l);
  std::printf("all rsocket checks passed\n");
  return 0;
}
