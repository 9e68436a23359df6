// simnic-nic-loss-watch: busy-polls a CQ the way ibv_rc_pingpong does, and reports what the
// verbs say once the NIC underneath is gone (the test SIGKILLs simnicd):
//   poll_cq: <return value>            a negative value is rdma-core's "the CQ failed"
//   post_recv: <strerror>  post_send: <strerror>
//   async_event: <ibv_event_type_str>  IBV_EVENT_DEVICE_FATAL expected
// Exits 0 when all four say the device is gone, 1 otherwise, 3 if polling never failed.
//
//   simnic-nic-loss-watch DEV
//
// With PID (simnicd's): waits, without touching the verbs, until that process has exited (a
// pidfd), then posts 100 receives and 100 sends; every one must fail with EIO at once, with
// *bad_wr at the WR (docs/shim.md "When the NIC goes away"):
//   posts_after_death: recv_eio=N send_eio=N of 100
//
//   simnic-nic-loss-watch DEV PID
//
// With `linger` after PID: then prints "lingering" and keeps its context open for up to 30 s
// (an orphan program that outlived its NIC), for the test to check the NIC's address is free.
//
//   simnic-nic-loss-watch DEV PID linger
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "check_util.h"

namespace {

ibv_qp* create_init_qp(ibv_pd* pd, ibv_cq* cq) {
  ibv_qp* qp = check::create_qp(pd, cq, IBV_QPT_RC, 4, 1);
  if (!qp) return nullptr;
  return check::to_init(qp, check::Path{.access = IBV_ACCESS_LOCAL_WRITE}) == 0 ? qp : nullptr;
}

// Blocks until process `pid` has exited (its pidfd turns readable), at most 30 s.
bool wait_for_exit(pid_t pid) {
  int fd = int(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return false;
  pollfd p{fd, POLLIN, 0};
  bool gone = ::poll(&p, 1, 30000) == 1;
  ::close(fd);
  return gone;
}

// Every post after simnicd's death fails with EIO, the first as the hundredth.
int posts_after_death(ibv_qp* qp, ibv_recv_wr& rwr, ibv_sge& sge) {
  ibv_send_wr swr{};
  swr.sg_list = &sge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  int recv_eio = 0, send_eio = 0;
  for (int i = 0; i < 100; ++i) {
    ibv_recv_wr* bad_r = nullptr;
    ibv_send_wr* bad_s = nullptr;
    recv_eio += ibv_post_recv(qp, &rwr, &bad_r) == EIO && bad_r == &rwr;
    send_eio += ibv_post_send(qp, &swr, &bad_s) == EIO && bad_s == &swr;
  }
  std::printf("posts_after_death: recv_eio=%d send_eio=%d of 100\n", recv_eio, send_eio);
  return recv_eio == 100 && send_eio == 100 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4 || (argc == 4 && std::strcmp(argv[3], "linger") != 0)) {
    std::fprintf(stderr, "usage: %s DEV [SIMNICD_PID [linger]]\n", argv[0]);
    return 2;
  }
  ibv_context* ctx = check::open_dev(argv[1]);
  ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
  ibv_cq* cq = ctx ? ibv_create_cq(ctx, 16, nullptr, nullptr, 0) : nullptr;
  static char buf[64];
  ibv_mr* mr = pd ? ibv_reg_mr(pd, buf, sizeof buf, int(IBV_ACCESS_LOCAL_WRITE)) : nullptr;
  ibv_qp* qp = pd && cq ? create_init_qp(pd, cq) : nullptr;
  if (!mr || !qp) {
    std::fprintf(stderr, "setup failed on %s\n", argv[1]);
    return 2;
  }
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), sizeof buf, mr->lkey};
  ibv_recv_wr rwr{};
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  if (ibv_post_recv(qp, &rwr, &bad_r)) return 2;
  std::printf("ready\n");
  std::fflush(stdout);
  if (argc >= 3) {
    if (!wait_for_exit(pid_t(std::atoi(argv[2])))) return std::printf("simnicd did not exit\n"), 2;
    const int verdict = posts_after_death(qp, rwr, sge);
    if (argc == 4) {
      std::printf("lingering\n");
      std::fflush(stdout);
      ::sleep(30);
    }
    return verdict;
  }

  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  ibv_wc wc{};
  int ne = 0;
  while ((ne = ibv_poll_cq(cq, 1, &wc)) == 0 && std::chrono::steady_clock::now() < deadline) {
  }
  std::printf("poll_cq: %d\n", ne);
  if (ne >= 0) return 3;
  int r = ibv_post_recv(qp, &rwr, &bad_r);
  std::printf("post_recv: %s\n", r ? std::strerror(r) : "ok");
  ibv_send_wr swr{};
  swr.sg_list = &sge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  ibv_send_wr* bad_s = nullptr;
  int s = ibv_post_send(qp, &swr, &bad_s);
  std::printf("post_send: %s\n", s ? std::strerror(s) : "ok");
  pollfd p{ctx->async_fd, POLLIN, 0};
  ibv_async_event ev{};
  bool fatal = false;
  if (::poll(&p, 1, 5000) == 1 && ibv_get_async_event(ctx, &ev) == 0) {
    std::printf("async_event: %s\n", ibv_event_type_str(ev.event_type));
    fatal = ev.event_type == IBV_EVENT_DEVICE_FATAL;
    ibv_ack_async_event(&ev);
  } else {
    std::printf("async_event: none\n");
  }
  std::fflush(stdout);
  return r == EIO && s == EIO && fatal && bad_r == &rwr && bad_s == &swr ? 0 : 1;
}
