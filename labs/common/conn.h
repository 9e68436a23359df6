/* One side of an RC connection, as you made it by hand in lab 2, now with remote access: the
 * verbs objects, and what the peer must know, including where my memory is and its key (sent
 * over TCP). Labs 3 and 4 use it (their shared.txt names it). A server with several clients
 * (lab 4) has one per client, all on one device and one protection domain, so that every
 * client's QP may use the same memory region. */
#ifndef LAB_CONN_H
#define LAB_CONN_H
#include <infiniband/verbs.h>
#include <stdint.h>

struct endpoint {
  uint32_t qpn;       /* my QP number: the peer's dest_qp_num */
  uint32_t psn;       /* the first PSN I will send: the peer's rq_psn */
  union ibv_gid gid;  /* my port's GID: the peer's destination address */
  uint64_t addr;      /* the server's memory (lab 3: its table; lab 4: struct shared)... */
  uint32_t rkey;      /* ...and the key that lets the peer's NIC read and write it */
  uint32_t slots;     /* lab 3: how many slots the table has (lab 4 leaves it 0) */
};

struct conn {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  int gid_index;
  struct endpoint me, peer;
};

/* Opens `dev`, allocates a PD, and creates a CQ and an RC QP (in RESET). */
void conn_open(struct conn *c, const char *dev, int gid_index);
/* Another QP (with its own CQ) on `first`'s device and PD. */
void conn_share(struct conn *c, const struct conn *first);
/* Walks the QP to INIT allowing the peer `remote_access` (IBV_ACCESS_REMOTE_* flags, 0 for
 * none), swaps endpoints over TCP (fill c->me.addr/rkey/slots first), then walks RTR and RTS. */
void conn_connect(struct conn *c, int fd, int remote_access);
/* Posts one signalled work request and waits for its completion. */
void conn_do(struct conn *c, struct ibv_send_wr *wr);
/* Destroys the QP and CQ, and with `last` the PD and the device too (after every shared QP). */
void conn_close(struct conn *c, int last);
#endif
