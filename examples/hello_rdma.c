/* hello_rdma: the smallest complete verbs program. Two RC queue pairs on one NIC are connected
 * to each other; one SENDs "hello, RDMA" and the other RECEIVEs it.
 *
 *   cc -o hello_rdma hello_rdma.c $(pkg-config --cflags --libs libibverbs)
 *   simnic up 1 && simnic run -- ./hello_rdma        # on simnic
 *   ./hello_rdma mlx5_0 3                             # on a real RoCE NIC: device, GID index
 *
 * Every step a real program takes is here, in order: open a device, a protection domain, a
 * memory region, a completion queue, two queue pairs; walk each QP through INIT, RTR and RTS
 * (RTR names the peer: its QPN, its GID and the PSN it starts at); post a receive before the
 * send; poll for both completions. Two processes on two machines do the same, exchanging the
 * QPN, PSN and GID over a socket instead of reading them from a local struct. */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSG "hello, RDMA"
#define BUF_SIZE 64

static void die(const char *what) {
  perror(what);
  exit(1);
}

static struct ibv_context *open_device(const char *name) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    fprintf(stderr, "no RDMA device found: start simnic (simnic up 1) and run this under `simnic run`\n");
    exit(1);
  }
  struct ibv_context *ctx = NULL;
  for (int i = 0; i < n && !ctx; ++i)
    if (!name || strcmp(ibv_get_device_name(list[i]), name) == 0) ctx = ibv_open_device(list[i]);
  ibv_free_device_list(list);
  if (!ctx) {
    fprintf(stderr, "device %s not found or not openable\n", name ? name : "(first)");
    exit(1);
  }
  return ctx;
}

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_cq *cq) {
  struct ibv_qp_init_attr init = {.send_cq = cq,
                                  .recv_cq = cq,
                                  .qp_type = IBV_QPT_RC,
                                  .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp *qp = ibv_create_qp(pd, &init);
  if (!qp) die("ibv_create_qp");
  return qp;
}

/* RESET -> INIT -> RTR -> RTS, connected to the QP `peer_qpn` at `peer_gid`. */
static void connect_qp(struct ibv_qp *qp, uint32_t peer_qpn, union ibv_gid peer_gid, int gid_index) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = 0};
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    die("ibv_modify_qp to INIT");

  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer_qpn;
  a.rq_psn = 0; /* the PSN the peer's first packet will carry */
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1; /* RoCE: peers are addressed by GID */
  a.ah_attr.grh.dgid = peer_gid;
  a.ah_attr.grh.sgid_index = gid_index;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    die("ibv_modify_qp to RTR");

  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_MAX_QP_RD_ATOMIC))
    die("ibv_modify_qp to RTS");
}

static struct ibv_wc wait_one(struct ibv_cq *cq) {
  struct ibv_wc wc;
  int n;
  for (long spins = 0; (n = ibv_poll_cq(cq, 1, &wc)) == 0; ++spins)
    if (spins > 2000000000L) {
      fprintf(stderr, "no completion\n");
      exit(1);
    }
  if (n < 0) die("ibv_poll_cq");
  if (wc.status != IBV_WC_SUCCESS) {
    fprintf(stderr, "work request %llu failed: %s\n", (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
    exit(1);
  }
  return wc;
}

int main(int argc, char **argv) {
  const char *device = argc > 1 ? argv[1] : NULL;
  int gid_index = argc > 2 ? atoi(argv[2]) : 0;

  struct ibv_context *ctx = open_device(device);
  struct ibv_pd *pd = ibv_alloc_pd(ctx);
  if (!pd) die("ibv_alloc_pd");
  static char send_buf[BUF_SIZE], recv_buf[BUF_SIZE];
  struct ibv_mr *send_mr = ibv_reg_mr(pd, send_buf, BUF_SIZE, 0);
  struct ibv_mr *recv_mr = ibv_reg_mr(pd, recv_buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
  if (!send_mr || !recv_mr) die("ibv_reg_mr");
  struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
  if (!cq) die("ibv_create_cq");
  struct ibv_qp *sender = create_qp(pd, cq), *receiver = create_qp(pd, cq);

  union ibv_gid gid;
  if (ibv_query_gid(ctx, 1, gid_index, &gid)) die("ibv_query_gid");
  connect_qp(sender, receiver->qp_num, gid, gid_index);
  connect_qp(receiver, sender->qp_num, gid, gid_index);

  /* A receive must be posted before the SEND arrives, or the sender hears "receiver not ready". */
  struct ibv_sge rsge = {.addr = (uintptr_t)recv_buf, .length = BUF_SIZE, .lkey = recv_mr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 2, .sg_list = &rsge, .num_sge = 1}, *bad_rwr;
  if (ibv_post_recv(receiver, &rwr, &bad_rwr)) die("ibv_post_recv");

  strcpy(send_buf, MSG);
  struct ibv_sge ssge = {.addr = (uintptr_t)send_buf, .length = sizeof MSG, .lkey = send_mr->lkey};
  struct ibv_send_wr swr = {.wr_id = 1,
                            .sg_list = &ssge,
                            .num_sge = 1,
                            .opcode = IBV_WR_SEND,
                            .send_flags = IBV_SEND_SIGNALED},
                     *bad_swr;
  if (ibv_post_send(sender, &swr, &bad_swr)) die("ibv_post_send");

  for (int done = 0; done < 2; ++done) {
    struct ibv_wc wc = wait_one(cq);
    if (wc.opcode == IBV_WC_RECV)
      printf("QP 0x%x received %u bytes from QP 0x%x: \"%s\"\n", receiver->qp_num, wc.byte_len, sender->qp_num,
             recv_buf);
  }

  ibv_destroy_qp(sender);
  ibv_destroy_qp(receiver);
  ibv_destroy_cq(cq);
  ibv_dereg_mr(send_mr);
  ibv_dereg_mr(recv_mr);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  return strcmp(recv_buf, MSG) == 0 ? 0 : 1;
}
