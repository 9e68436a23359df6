/* One side of an RC connection (as in labs 2 and 3). The server has one per client, all on one
 * device and one protection domain, so that every client's QP may use the same memory region. */
#ifndef LAB4_CONN_H
#define LAB4_CONN_H
#include <infiniband/verbs.h>
#include <stdint.h>

struct endpoint {
  uint32_t qpn;       /* my QP number: the peer's dest_qp_num */
  uint32_t psn;       /* the first PSN I will send: the peer's rq_psn */
  union ibv_gid gid;  /* my port's GID: the peer's destination address */
  uint64_t addr;      /* the server's shared words (struct shared) and... */
  uint32_t rkey;      /* ...their key */
};

struct conn {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  int gid_index;
  struct endpoint me, peer;
};

/* Opens `dev`, allocates a PD, and creates a CQ and an RC QP. */
void conn_open(struct conn *c, const char *dev, int gid_index);
/* Another QP (with its own CQ) on `first`'s device and PD. */
void conn_share(struct conn *c, const struct conn *first);
/* INIT (allowing the peer `remote_access`), swap endpoints over TCP, RTR, RTS. */
void conn_connect(struct conn *c, int fd, int remote_access);
/* Posts one signalled work request and waits for its completion. */
void conn_do(struct conn *c, struct ibv_send_wr *wr);
void conn_close(struct conn *c, int last);
#endif
