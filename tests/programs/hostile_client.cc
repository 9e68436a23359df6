// simnic-hostile-client: a verbs program that misuses what the shim hands simnicd, to show the
// NIC cannot be stalled or made to keep a dead process' context. Run with `simnic run`.
//
//   simnic-hostile-client block-doorbell DEV    clear O_NONBLOCK on the context's doorbell,
//                                               ring it, then sleep (the test kills it)
//   simnic-hostile-client ctl-as-event-fd DEV   pass the control connection itself (and a
//                                               socket carrying it in flight) as event fds,
//                                               then exit without closing anything
//   simnic-hostile-client bad-fds DEV           pass descriptors of the wrong type
//
// Each attempt prints "<what>: <strerror of simnicd's answer>".
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check_util.h"
#include "simnic/abi/paths.h"
#include "simnic/abi/seqpacket.h"

namespace abi = simnic::abi;

namespace {

ibv_context* open_device(const char* name) {
  ibv_context* ctx = check::open_dev(name);
  if (!ctx) std::fprintf(stderr, "cannot open %s\n", name);
  return ctx;
}

// The shim's doorbell is the only eventfd this program has.
int find_eventfd() {
  for (int fd = 3; fd < 1024; ++fd) {
    char link[64] = {};
    std::string p = "/proc/self/fd/" + std::to_string(fd);
    if (::readlink(p.c_str(), link, sizeof link - 1) > 0 && std::string(link) == "anon_inode:[eventfd]") return fd;
  }
  return -1;
}

void report(const char* what, int status) {
  std::printf("%s: %s\n", what, status ? std::strerror(status) : "accepted");
  std::fflush(stdout);
}

int hello(int sock, std::vector<int> fds) {
  abi::HelloReply rep{};
  return abi::call_fixed(sock, abi::Op::Hello, abi::HelloReq{abi::kAbiVersion, 0}, &rep, fds);
}

int create_channel(int sock, int fd) {
  abi::HandleReply rep{};
  return abi::call_fixed(sock, abi::Op::CreateCompChannel, abi::HandleReq{}, &rep, std::vector<int>{fd});
}

std::string socket_path(const char* dev) { return abi::control_socket_path(abi::simnic_dir(), dev); }

int block_doorbell(const char* dev) {
  ibv_context* ctx = open_device(dev);
  int efd = find_eventfd();
  if (!ctx || efd < 0) return 1;
  ::fcntl(efd, F_SETFL, ::fcntl(efd, F_GETFL) & ~O_NONBLOCK);
  uint64_t one = 1;
  if (::write(efd, &one, sizeof one) != sizeof one) return 1;
  std::printf("rang doorbell fd %d without O_NONBLOCK\n", efd);
  std::fflush(stdout);
  ::sleep(30);
  return 0;
}

int ctl_as_event_fd(const char* dev) {
  ibv_context* ctx = open_device(dev);
  if (!ctx) return 1;
  // 1. The context's own control socket as its completion channel.
  report("channel=control", create_channel(ctx->cmd_fd, ctx->cmd_fd));
  // 2. A second context whose async-event socket is its own control connection.
  int raw = abi::connect_control(socket_path(dev));
  int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  report("async=control", hello(raw, {efd, raw}));
  // 3. A socket of our own (the right type) with the control connection in flight in it.
  int sv[2];
  ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv);
  int ctl = ctx->cmd_fd;
  abi::send_message(sv[0], "x", 1, nullptr, 0, std::span<const int>(&ctl, 1));
  report("channel=carrying-control", create_channel(ctx->cmd_fd, sv[1]));
  return 0;  // exit with everything open: the NIC must clean up on its own
}

int bad_fds(const char* dev) {
  const std::string path = socket_path(dev);
  int sv[2], st[2];
  ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv);
  ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, st);
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  int sem = ::eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
  int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  report("doorbell=/dev/null", hello(abi::connect_control(path), {devnull, sv[1]}));
  report("doorbell=semaphore", hello(abi::connect_control(path), {sem, sv[1]}));
  report("doorbell=socket", hello(abi::connect_control(path), {sv[1], sv[1]}));
  report("async=stream", hello(abi::connect_control(path), {efd, st[1]}));
  report("async=/dev/null", hello(abi::connect_control(path), {efd, devnull}));
  int good = abi::connect_control(path);
  report("good", hello(good, {efd, sv[1]}));
  report("channel=eventfd", create_channel(good, efd));
  report("channel=stream", create_channel(good, st[1]));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s block-doorbell|ctl-as-event-fd|bad-fds DEV\n", argv[0]);
    return 2;
  }
  std::string mode = argv[1];
  if (mode == "block-doorbell") return block_doorbell(argv[2]);
  if (mode == "ctl-as-event-fd") return ctl_as_event_fd(argv[2]);
  if (mode == "bad-fds") return bad_fds(argv[2]);
  std::fprintf(stderr, "unknown mode %s\n", argv[1]);
  return 2;
}
