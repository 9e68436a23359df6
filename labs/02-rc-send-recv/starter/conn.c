/* Lab 2: setting up one side of an RC connection by hand. Fill in the TODOs in the order of
 * the README's steps; `simnic lab check 2` tells you what is still missing. */
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

  /* TODO(lab 2, step 1): create an RC QP (ibv_create_qp) whose send and receive completions go
   * to c->cq, with room for 4 send WRs and NUM_RECVS receive WRs of one SGE each. */
  if (!c->qp) lab_die("TODO(lab 2, step 1): create the QP in conn_create()");
}

/* RESET -> INIT: the QP gets its port, partition and what remote peers may do to my memory. */
static void to_init(struct conn *c) {
  (void)c;
  /* TODO(lab 2, step 2): ibv_modify_qp to IBV_QPS_INIT with pkey_index 0, port_num 1 and
   * qp_access_flags 0 (this lab only SENDs); the mask names every attribute you set. */
  lab_die("TODO(lab 2, step 2): move the QP to INIT in to_init()");
}

/* INIT -> RTR (ready to receive): where the peer is and which PSN its first packet carries. */
static void to_rtr(struct conn *c) {
  (void)c;
  /* TODO(lab 2, step 4): ibv_modify_qp to IBV_QPS_RTR with path_mtu IBV_MTU_1024, the peer's QPN
   * as dest_qp_num, the peer's PSN as rq_psn, max_dest_rd_atomic 1, min_rnr_timer 12, and an
   * address vector (ah_attr) with is_global = 1, port_num 1, grh.dgid = the peer's GID,
   * grh.sgid_index = c->gid_index, grh.hop_limit 64. */
  lab_die("TODO(lab 2, step 4): move the QP to RTR in to_rtr()");
}

/* RTR -> RTS (ready to send): my first PSN and how hard to retry when the peer is silent. */
static void to_rts(struct conn *c) {
  (void)c;
  /* TODO(lab 2, step 5): ibv_modify_qp to IBV_QPS_RTS with sq_psn = my PSN (c->me.psn),
   * timeout 14, retry_cnt 7, rnr_retry 7, max_rd_atomic 1. */
  lab_die("TODO(lab 2, step 5): move the QP to RTS in to_rts()");
}

void conn_connect(struct conn *c, int fd) {
  srand48(getpid() ^ time(NULL));
  /* TODO(lab 2, step 3): fill c->me: my QP number, a random 24-bit first PSN
   * (lrand48() & 0xffffff) and my GID (ibv_query_gid on port 1, index c->gid_index). */
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
  (void)c, (void)slot;
  /* TODO(lab 2, step 6): post one receive WR (ibv_post_recv) with wr_id = slot and one SGE:
   * MSG_SIZE bytes at c->buf + MSG_SIZE * (1 + slot), c->mr->lkey. */
  lab_die("TODO(lab 2, step 6): post a receive in conn_post_recv()");
}

void conn_post_send(struct conn *c, uint32_t len, uint64_t id) {
  (void)c, (void)len, (void)id;
  /* TODO(lab 2, step 7): post one signalled IBV_WR_SEND (ibv_post_send) with wr_id = id and one
   * SGE: len bytes at c->buf, c->mr->lkey. */
  lab_die("TODO(lab 2, step 7): post a SEND in conn_post_send()");
}

void conn_destroy(struct conn *c) {
  ibv_destroy_qp(c->qp);
  ibv_dereg_mr(c->mr);
  ibv_destroy_cq(c->cq);
  ibv_dealloc_pd(c->pd);
  ibv_close_device(c->ctx);
  free(c->buf);
}
