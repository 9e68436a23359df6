/* One side of an RC connection made by the RDMA connection manager (rdma_cm): the CM finds
 * the device from an IP address, exchanges the QP numbers, PSNs and addresses with the peer
 * (InfiniBand CM messages REQ, REP, RTU on the RDMA wire itself) and walks the QP through
 * INIT, RTR and RTS. Compare with lab 2, where you did all of that by hand over TCP. */
#ifndef LAB9_CM_H
#define LAB9_CM_H
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>

#define MSG_SIZE 4000 /* bytes per message, as in lab 2 */
#define NUM_RECVS 8   /* receive WQEs kept posted */
#define HELLO_MAX 56  /* private data: what a REQ may carry for rdma_cm on RoCE */

struct cm_conn {
  struct rdma_event_channel *ec; /* where the CM reports what happened (a pollable fd) */
  struct rdma_cm_id *listen_id;  /* server: the id listening on the port */
  struct rdma_cm_id *id;         /* the connection: its QP is id->qp, its device id->verbs */
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_mr *mr;
  char *buf;                 /* [0, MSG_SIZE): what I send; then NUM_RECVS receive slots */
  char hello[HELLO_MAX + 1]; /* the private data the peer sent with its REQ or REP */
};

/* Server: binds to `addr`:`port` ("0.0.0.0": every NIC) and listens. */
void cm_listen(struct cm_conn *c, const char *addr, int port);
/* Server: waits for a client's CONNECT_REQUEST, makes the QP on the new id, accepts with
 * `hello` as private data and waits until the connection is ESTABLISHED. */
void cm_accept(struct cm_conn *c, const char *hello);
/* Client: resolves `server`:`port` (from the local address `src`, NULL: any), makes the QP,
 * connects with `hello` as private data and waits until the connection is ESTABLISHED. */
void cm_connect(struct cm_conn *c, const char *src, const char *server, int port, const char *hello);
/* Posts receive slot `slot` (wr_id = slot). */
void cm_post_recv(struct cm_conn *c, int slot);
/* Sends `len` bytes from the start of buf (wr_id = id), signalled. */
void cm_post_send(struct cm_conn *c, uint32_t len, uint64_t id);
/* Disconnects (if `initiate`) or waits for the peer to, then waits for DISCONNECTED. */
void cm_disconnect(struct cm_conn *c, int initiate);
/* Frees everything. */
void cm_destroy(struct cm_conn *c);
#endif
