// Creates N RC QPs with WR-deep queues on the first device, reports how many it got, and exits
// without destroying them: the NIC must clean up after a process as the kernel does.
// With HOLD_S, it keeps them that many seconds after reporting (the test reads `simnic status`).
// Usage: simnic-many-qps N WR [HOLD_S]
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "check_util.h"

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: simnic-many-qps N WR [HOLD_S]\n");
    return 2;
  }
  const int n = std::atoi(argv[1]);
  const uint32_t wr = uint32_t(std::atoi(argv[2]));
  ibv_context* ctx = check::open_dev(nullptr);
  if (!ctx) {
    std::fprintf(stderr, "no RDMA device found\n");
    return 1;
  }
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  if (!pd || !cq) {
    std::perror("setup");
    return 1;
  }
  int made = 0;
  for (; made < n; ++made) {
    if (!check::create_qp(pd, cq, IBV_QPT_RC, wr, 1)) {
      std::perror("ibv_create_qp");
      break;
    }
  }
  std::printf("made %d QPs\n", made);
  std::fflush(stdout);
  if (argc == 4) ::sleep(unsigned(std::atoi(argv[3])));
  return 0;
}
