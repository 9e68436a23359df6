/* The connection, made by rdma_cm. Every rdma_cm call that starts something (resolve an
 * address, a route, connect, accept, disconnect) returns at once; what happened arrives later
 * as an event on the event channel, which cm_expect() waits for. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "labutil.h"

#define RESOLVE_TIMEOUT_MS 2000

/* "a.b.c.d":port as a sockaddr_in. */
static inline struct sockaddr_in ipv4(const char *addr, int port) {
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) lab_die("%s is not an IPv4 address", addr);
  return sa;
}

/* Waits for the next CM event, which must be `type`, keeps the private data it carries (a REQ's
 * on the server, a REP's on the client) and acknowledges it. Returns the event's id: for a
 * CONNECT_REQUEST, the new id of the connection being asked for. */
static struct rdma_cm_id *cm_expect(struct cm_conn *c, enum rdma_cm_event_type type) {
  struct rdma_cm_event *ev;
  if (rdma_get_cm_event(c->ec, &ev)) lab_die("rdma_get_cm_event: %s", strerror(errno));
  if (ev->event != type) {
    const char *why = ev->event == RDMA_CM_EVENT_REJECTED ? " (is the server listening on that port?)"
                    : ev->event == RDMA_CM_EVENT_UNREACHABLE ? " (no answer from the server's NIC)"
                    : ev->event == RDMA_CM_EVENT_ADDR_ERROR ? " (no RDMA device has that source address)"
                                                            : "";
    lab_die("expected the CM event %s, got %s, status %d%s", rdma_event_str(type), rdma_event_str(ev->event),
            ev->status, why);
  }
  /* The peer's private data: a REQ's reaches the server with CONNECT_REQUEST, a REP's the client
   * with ESTABLISHED (the server's ESTABLISHED carries the RTU's, which is empty). */
  const int from_peer = type == RDMA_CM_EVENT_CONNECT_REQUEST || (type == RDMA_CM_EVENT_ESTABLISHED && !c->listen_id);
  if (from_peer && ev->param.conn.private_data) {
    size_t n = ev->param.conn.private_data_len < HELLO_MAX ? ev->param.conn.private_data_len : HELLO_MAX;
    memcpy(c->hello, ev->param.conn.private_data, n); /* valid only until the event is acked */
    c->hello[n] = '\0';
  }
  struct rdma_cm_id *id = ev->id;
  rdma_ack_cm_event(ev);
  return id;
}

/* The verbs objects on the connection's device (c->id->verbs, which rdma_cm found from the IP
 * address), the RC QP made by rdma_create_qp (it leaves the QP in INIT), and the receives. */
static void make_qp(struct cm_conn *c) {
  c->pd = ibv_alloc_pd(c->id->verbs);
  c->cq = ibv_create_cq(c->id->verbs, NUM_RECVS + 8, NULL, NULL, 0);
  c->buf = calloc(NUM_RECVS + 1, MSG_SIZE);
  if (!c->pd || !c->cq || !c->buf) lab_die("allocating the PD, CQ or buffer failed: %s", strerror(errno));
  c->mr = ibv_reg_mr(c->pd, c->buf, (size_t)MSG_SIZE * (NUM_RECVS + 1), IBV_ACCESS_LOCAL_WRITE);
  if (!c->mr) lab_die("ibv_reg_mr: %s", strerror(errno));
  struct ibv_qp_init_attr a;
  memset(&a, 0, sizeof a);
  a.send_cq = c->cq;
  a.recv_cq = c->cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = 4;
  a.cap.max_recv_wr = NUM_RECVS;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  if (rdma_create_qp(c->id, c->pd, &a)) lab_die("rdma_create_qp: %s", strerror(errno));
  for (int slot = 0; slot < NUM_RECVS; ++slot) cm_post_recv(c, slot);  /* before the peer can send */
}

/* What both sides offer: one READ/atomic in flight each way (unused here), and retries. */
static inline struct rdma_conn_param conn_param(const char *hello) {
  struct rdma_conn_param p;
  memset(&p, 0, sizeof p);
  p.private_data = hello;
  p.private_data_len = (uint8_t)(strlen(hello) + 1);
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  return p;
}

void cm_listen(struct cm_conn *c, const char *addr, int port) {
  memset(c, 0, sizeof *c);
  c->ec = rdma_create_event_channel();
  if (!c->ec) lab_die("rdma_create_event_channel: %s (on simnic, start this program with `simnic run -- ...`)", strerror(errno));
  if (rdma_create_id(c->ec, &c->listen_id, NULL, RDMA_PS_TCP)) lab_die("rdma_create_id: %s", strerror(errno));
  struct sockaddr_in sa = ipv4(addr, port);
  if (rdma_bind_addr(c->listen_id, (struct sockaddr *)&sa))
    lab_die("rdma_bind_addr(%s port %d): %s (no RDMA device has that address?)", addr, port, strerror(errno));
  if (rdma_listen(c->listen_id, 1)) lab_die("rdma_listen: %s", strerror(errno));
}

void cm_accept(struct cm_conn *c, const char *hello) {
  c->id = cm_expect(c, RDMA_CM_EVENT_CONNECT_REQUEST);
  make_qp(c);
  struct rdma_conn_param p = conn_param(hello);
  if (rdma_accept(c->id, &p)) lab_die("rdma_accept: %s", strerror(errno));
  cm_expect(c, RDMA_CM_EVENT_ESTABLISHED);
  /* broken: "to be sure", walk the QP again by hand from RESET, as in lab 2, with made-up numbers */
  struct ibv_qp_attr attr = {.qp_state = IBV_QPS_RESET};
  ibv_modify_qp(c->id->qp, &attr, IBV_QP_STATE);
}

void cm_connect(struct cm_conn *c, const char *src, const char *server, int port, const char *hello) {
  memset(c, 0, sizeof *c);
  c->ec = rdma_create_event_channel();
  if (!c->ec) lab_die("rdma_create_event_channel: %s (on simnic, start this program with `simnic run -- ...`)", strerror(errno));
  if (rdma_create_id(c->ec, &c->id, NULL, RDMA_PS_TCP)) lab_die("rdma_create_id: %s", strerror(errno));
  struct sockaddr_in from = ipv4(src ? src : "0.0.0.0", 0), to = ipv4(server, port);
  if (rdma_resolve_addr(c->id, src ? (struct sockaddr *)&from : NULL, (struct sockaddr *)&to, RESOLVE_TIMEOUT_MS))
    lab_die("rdma_resolve_addr(%s): %s", server, strerror(errno));
  cm_expect(c, RDMA_CM_EVENT_ADDR_RESOLVED);
  if (rdma_resolve_route(c->id, RESOLVE_TIMEOUT_MS)) lab_die("rdma_resolve_route: %s", strerror(errno));
  cm_expect(c, RDMA_CM_EVENT_ROUTE_RESOLVED);
  make_qp(c);
  struct rdma_conn_param p = conn_param(hello);
  if (rdma_connect(c->id, &p)) lab_die("rdma_connect: %s", strerror(errno));
  cm_expect(c, RDMA_CM_EVENT_ESTABLISHED);
}

void cm_post_recv(struct cm_conn *c, int slot) {
  struct ibv_sge sge = {.addr = (uintptr_t)(c->buf + MSG_SIZE * (1 + slot)), .length = MSG_SIZE, .lkey = c->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = (uint64_t)slot, .sg_list = &sge, .num_sge = 1}, *bad;
  if (ibv_post_recv(c->id->qp, &wr, &bad)) lab_die("ibv_post_recv: %s", strerror(errno));
}

void cm_post_send(struct cm_conn *c, uint32_t len, uint64_t id) {
  struct ibv_sge sge = {.addr = (uintptr_t)c->buf, .length = len, .lkey = c->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_SIGNALED}, *bad;
  if (ibv_post_send(c->id->qp, &wr, &bad)) lab_die("ibv_post_send: %s", strerror(errno));
}

void cm_disconnect(struct cm_conn *c, int initiate) {
  if (initiate && rdma_disconnect(c->id)) lab_die("rdma_disconnect: %s", strerror(errno));
  cm_expect(c, RDMA_CM_EVENT_DISCONNECTED);
}

void cm_destroy(struct cm_conn *c) {
  if (c->id && c->id->qp) rdma_destroy_qp(c->id);
  if (c->mr) ibv_dereg_mr(c->mr);
  if (c->cq) ibv_destroy_cq(c->cq);
  if (c->pd) ibv_dealloc_pd(c->pd);
  free(c->buf);
  if (c->id) rdma_destroy_id(c->id);
  if (c->listen_id) rdma_destroy_id(c->listen_id);
  rdma_destroy_event_channel(c->ec);
}
