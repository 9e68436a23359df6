/* ud_common.h: the plumbing of lab 6 that is not about UD itself: the wire format of the
 * discovery protocol, the device and buffers, posting receives, and the bootstrap file that
 * tells everyone where the registry is. */
#ifndef UD_COMMON_H
#define UD_COMMON_H

#include <infiniband/verbs.h>
#include <stdint.h>

#define REGISTRY_QKEY 0x52454749u  /* "REGI": every datagram to the registry carries it */
#define SERVICE_QKEY 0x53525643u   /* "SRVC": the Q_Key our service QPs accept */
#define CLIENT_QKEY 0x434c4e54u    /* "CLNT": the Q_Key our client QPs accept */
#define GRH_BYTES 40               /* a UD receive buffer starts with room for the GRH */
#define SLOTS 16                   /* receive buffers per QP */

enum msg_type { MSG_REGISTER = 1, MSG_REGISTERED, MSG_LOOKUP, MSG_FOUND, MSG_NOT_FOUND, MSG_REQUEST, MSG_REPLY };

/* One datagram of the protocol (fits any MTU). Integers in host order: a lab, one machine. */
struct msg {
  uint32_t type;       /* enum msg_type */
  uint32_t qpn;        /* REGISTER / FOUND: the service's QP number */
  uint32_t qkey;       /* FOUND: the Q_Key the service's QP accepts; in every request: the Q_Key
                          of the sender's own QP, so the answer can be addressed to it */
  uint8_t gid[16];     /* REGISTER / FOUND: the GID of the service's port */
  char name[32];       /* REGISTER / LOOKUP / FOUND: the service's name */
  char text[128];      /* REQUEST / REPLY */
};

struct ud_node {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *send_cq;  /* send completions ... */
  struct ibv_cq *recv_cq;  /* ... and receives apart, so waiting for one never eats the other */
  struct ibv_qp *qp;
  union ibv_gid gid;
  int gid_index;
  char *recv_buf;      /* SLOTS * (GRH_BYTES + sizeof(struct msg)) */
  struct ibv_mr *recv_mr;
  struct msg send_msg; /* the one datagram being sent */
  struct ibv_mr *send_mr;
};

/* Opens `dev`, allocates PD, CQ, buffers and a UD QP (still in RESET). Exits on failure with a
 * clear message (no RDMA device: not under `simnic run` and no real NIC). */
void node_open(struct ud_node *n, const char *dev, int gid_index);
void node_close(struct ud_node *n);
/* Posts receive slot `slot` (wr_id = slot). */
int post_slot(struct ud_node *n, int slot);
/* The message in a completed receive (after the GRH room). */
struct msg *slot_msg(struct ud_node *n, int slot);
struct ibv_grh *slot_grh(struct ud_node *n, int slot);
/* Waits up to timeout_ms for a completion on `cq`; returns 1, or 0 on timeout. */
int node_wait(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms);

/* The registry's address, written by the registry and read by everyone else. */
int bootstrap_write(const char *path, uint32_t qpn, const union ibv_gid *gid);
int bootstrap_read(const char *path, uint32_t *qpn, union ibv_gid *gid, int timeout_ms);

#endif
