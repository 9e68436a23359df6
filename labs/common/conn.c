/* Labs 3 and 4: connecting one side of an RC QP (as in lab 2). */
#include "conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "labutil.h"

static void make_qp(struct conn *c) {
  c->cq = ibv_create_cq(c->ctx, 16, NULL, NULL, 0);
  struct ibv_qp_init_attr init = {
      .send_cq = c->cq, .recv_cq = c->cq, .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
  c->qp = c->cq ? ibv_create_qp(c->pd, &init) : NULL;
  if (!c->qp) lab_die("CQ/QP setup failed");
}

void conn_open(struct conn *c, const char *dev, int gid_index) {
  memset(c, 0, sizeof *c);
  c->gid_index = gid_index;
  c->ctx = lab_open_device(dev);
  c->pd = ibv_alloc_pd(c->ctx);
  if (!c->pd) lab_die("ibv_alloc_pd failed");
  make_qp(c);
}

void conn_share(struct conn *c, const struct conn *first) {
  memset(c, 0, sizeof *c);
  c->gid_index = first->gid_index;
  c->ctx = first->ctx;
  c->pd = first->pd;
  make_qp(c);
}

static void modify(struct conn *c, struct ibv_qp_attr *a, int mask, const char *what) {
  if (ibv_modify_qp(c->qp, a, mask)) lab_die("%s failed", what);
}

void conn_connect(struct conn *c, int fd, int remote_access) {
  /* The QPN in the seed: a server's QPs (lab 4) start at different PSNs even in one second. */
  srand48(getpid() ^ time(NULL) ^ (long)c->qp->qp_num);
  c->me.qpn = c->qp->qp_num;
  c->me.psn = lrand48() & 0xffffff;
  if (ibv_query_gid(c->ctx, 1, c->gid_index, &c->me.gid)) lab_die("ibv_query_gid failed");

  /* INIT: qp_access_flags say what the PEER may do through this QP: without REMOTE_WRITE /
   * REMOTE_READ (or REMOTE_ATOMIC) here, its NIC refuses them whatever the MR allows. */
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = (unsigned)remote_access};
  modify(c, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "RESET->INIT");

  lab_exchange(fd, &c->me, &c->peer, sizeof c->me);

  /* RTR: max_dest_rd_atomic is how many RDMA READs (and atomics, which count as READs here) the
   * peer may have outstanding at my NIC. */
  struct ibv_qp_attr r = {
      .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = c->peer.qpn, .rq_psn = c->peer.psn,
      .max_dest_rd_atomic = 4, .min_rnr_timer = 12,
      .ah_attr = {.is_global = 1, .port_num = 1,
                  .grh = {.dgid = c->peer.gid, .sgid_index = (uint8_t)c->gid_index, .hop_limit = 64}}};
  modify(c, &r, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, "INIT->RTR");

  /* RTS: max_rd_atomic is how many RDMA READs and atomics I may have outstanding at the peer. */
  struct ibv_qp_attr s = {.qp_state = IBV_QPS_RTS, .sq_psn = c->me.psn, .timeout = 14, .retry_cnt = 7,
                          .rnr_retry = 7, .max_rd_atomic = 4};
  modify(c, &s, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                    IBV_QP_MAX_QP_RD_ATOMIC, "RTR->RTS");
}

void conn_do(struct conn *c, struct ibv_send_wr *wr) {
  struct ibv_send_wr *bad;
  wr->send_flags |= IBV_SEND_SIGNALED;
  if (ibv_post_send(c->qp, wr, &bad)) lab_die("ibv_post_send failed");
  struct ibv_wc wc;
  lab_wait_ok(c->cq, &wc, "work request");
}

void conn_close(struct conn *c, int last) {
  ibv_destroy_qp(c->qp);
  ibv_destroy_cq(c->cq);
  if (!last) return;
  ibv_dealloc_pd(c->pd);
  ibv_close_device(c->ctx);
}
