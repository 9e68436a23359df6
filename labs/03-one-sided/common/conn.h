/* One side of an RC connection (lab 2's, now with remote access): the verbs objects, and what
 * the peer must know, including where my memory is and its key (sent over TCP). */
#ifndef LAB3_CONN_H
#define LAB3_CONN_H
#include <infiniband/verbs.h>
#include <stdint.h>

struct endpoint {
  uint32_t qpn;       /* my QP number: the peer's dest_qp_num */
  uint32_t psn;       /* the first PSN I will send: the peer's rq_psn */
  union ibv_gid gid;  /* my port's GID: the peer's destination address */
  uint64_t addr;      /* the server's table: its address in the server's memory... */
  uint32_t rkey;      /* ...and the key that lets the peer's NIC read and write it */
  uint32_t slots;     /* how many slots the table has */
};

struct conn {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  int gid_index;
  struct endpoint me, peer;
};

/* Opens `dev` and creates the PD, CQ and an RC QP (in RESET). */
void conn_create(struct conn *c, const char *dev, int gid_index);
/* Walks the QP to INIT allowing the peer `remote_access` (IBV_ACCESS_REMOTE_* flags, 0 for
 * none), swaps endpoints over TCP (fill c->me.addr/rkey/slots first), then walks RTR and RTS. */
void conn_connect(struct conn *c, int fd, int remote_access);
void conn_destroy(struct conn *c);
#endif
