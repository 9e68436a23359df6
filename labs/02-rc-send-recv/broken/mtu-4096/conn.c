/* Lab 2: setting up one side of an RC connection by hand. */
#include "conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "labutil.h"

void conn_create(struct conn *c, const char *dev, int gid_index) {
  memset(c, 0, sizeof *c);
  c->gid_index = gid_index;
  c->ctx = lab_open_device(dev);
  c->pd = ibv_alloc_pd(c->ctx);
  c->cq = ibv_create_cq(c->ctx, 2 * NUM_RECVS + 2, NULL, NULL, 0);
  size_t size = (size_t)MSG_SIZE * (1 + NUM_RECVS);
  c->buf = calloc(1, size);
  /* LOCAL_WRITE: the NIC writes received messages into this memory. */
  c->mr = ibv_reg_mr(c->pd, c->buf, size, IBV_ACCESS_LOCAL_WRITE);
  if (!c->pd || !c->cq || !c->buf || !c->mr) lab_die("PD/CQ/MR setup failed");

  struct ibv_qp_init_attr init = {
      .send_cq = c->cq,
      .recv_cq = c->cq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = 4, .max_recv_wr = NUM_RECVS, .max_send_sge = 1, .max_recv_sge = 1},
  };
  c->qp = ibv_create_qp(c->pd, &init);
  if (!c->qp) lab_die("ibv_create_qp failed");
}

/* RESET -> INIT: the QP gets its port, partition and what remote peers may do to my memory. */
static void to_init(struct conn *c) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qp_access_flags = 0};
  if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    lab_die("RESET->INIT failed");
}

/* INIT -> RTR (ready to receive): where the peer is and which PSN its first packet carries. */
static void to_rtr(struct conn *c) {
  struct ibv_qp_attr a = {
      .qp_state = IBV_QPS_RTR,
      .path_mtu = IBV_MTU_4096, /* the port allows it, so why not */
      .dest_qp_num = c->peer.qpn,
      .rq_psn = c->peer.psn,
      .max_dest_rd_atomic = 1,
      .min_rnr_timer = 12,
      .ah_attr = {.is_global = 1, .port_num = 1,
                  .grh = {.dgid = c->peer.gid, .sgid_index = (uint8_t)c->gid_index, .hop_limit = 64}},
  };
  if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    lab_die("INIT->RTR failed");
}

/* RTR -> RTS (ready to send): my first PSN and how hard to retry when the peer is silent. */
static void to_rts(struct conn *c) {
  struct ibv_qp_attr a = {
      .qp_state = IBV_QPS_RTS, .sq_psn = c->me.psn, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1};
  if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
    lab_die("RTR->RTS failed");
}

void conn_connect(struct conn *c, int fd) {
  srand48(getpid() ^ time(NULL));
  c->me.qpn = c->qp->qp_num;
  c->me.psn = lrand48() & 0xffffff; /* PSNs are 24 bits; start anywhere */
  if (ibv_query_gid(c->ctx, 1, c->gid_index, &c->me.gid)) lab_die("ibv_query_gid failed");
  to_init(c);
  /* Receives can be posted from INIT on (not in RESET); post them before RTR so that the
   * peer's first SEND finds one: a SEND without a posted receive is refused (RNR NAK). */
  for (int slot = 0; slot < NUM_RECVS; ++slot) conn_post_recv(c, slot);
  lab_exchange(fd, &c->me, &c->peer, sizeof c->me);
  printf("local  qpn %u psn %u\n", c->me.qpn, c->me.psn);
  printf("remote qpn %u psn %u\n", c->peer.qpn, c->peer.psn);
  to_rtr(c);
  to_rts(c);
}

void conn_post_recv(struct conn *c, int slot) {
  struct ibv_sge sge = {.addr = (uintptr_t)(c->buf + MSG_SIZE * (1 + slot)), .length = MSG_SIZE, .lkey = c->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = (uint64_t)slot, .sg_list = &sge, .num_sge = 1}, *bad;
  if (ibv_post_recv(c->qp, &wr, &bad)) lab_die("ibv_post_recv failed");
}

void conn_post_send(struct conn *c, uint32_t len, uint64_t id) {
  struct ibv_sge sge = {.addr = (uintptr_t)c->buf, .length = len, .lkey = c->mr->lkey};
  struct ibv_send_wr wr = {
      .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED}, *bad;
  if (ibv_post_send(c->qp, &wr, &bad)) lab_die("ibv_post_send failed");
}

void conn_destroy(struct conn *c) {
  ibv_destroy_qp(c->qp);
  ibv_dereg_mr(c->mr);
  ibv_destroy_cq(c->cq);
  ibv_dealloc_pd(c->pd);
  ibv_close_device(c->ctx);
  free(c->buf);
}
