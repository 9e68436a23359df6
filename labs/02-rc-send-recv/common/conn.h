/* One side of an RC connection: the verbs objects it needs, and the few numbers the peer
 * must know to reach it (sent over TCP, because the QP cannot talk before it is connected). */
#ifndef LAB2_CONN_H
#define LAB2_CONN_H
#include <infiniband/verbs.h>
#include <stdint.h>

#define MSG_SIZE 4000 /* bytes per message: 4 packets at the 1024-byte path MTU */
#define NUM_RECVS 8   /* receive WQEs kept posted */

/* What each side tells the other over TCP before the QPs can talk. */
struct endpoint {
  uint32_t qpn;       /* my QP number: the peer's dest_qp_num */
  uint32_t psn;       /* the first PSN I will send: the peer's rq_psn */
  union ibv_gid gid;  /* my port's GID (RoCE: my IP address): the peer's destination address */
};

struct conn {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  struct ibv_mr *mr;
  char *buf; /* [0, MSG_SIZE): what I send; then NUM_RECVS receive slots of MSG_SIZE */
  int gid_index;
  struct endpoint me, peer;
};

/* Opens `dev` and creates the PD, CQ, MR and an RC QP (in RESET). */
void conn_create(struct conn *c, const char *dev, int gid_index);
/* Walks the QP RESET->INIT, posts the receives, swaps endpoints with the peer over the TCP
 * socket `fd`, then walks INIT->RTR->RTS. */
void conn_connect(struct conn *c, int fd);
/* Posts receive slot `slot` (wr_id = slot). */
void conn_post_recv(struct conn *c, int slot);
/* Sends `len` bytes from the start of buf (wr_id = id), signalled. */
void conn_post_send(struct conn *c, uint32_t len, uint64_t id);
/* Frees everything conn_create made. */
void conn_destroy(struct conn *c);
#endif
