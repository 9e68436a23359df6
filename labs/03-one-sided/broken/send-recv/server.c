/* Lab 3 server, done the two-sided way (a plausible mistake): the client SENDs "put"/"get"
 * requests and this server's CPU receives each one, copies values in and out of the table and
 * SENDs replies. It works, but it is not what the lab asks: the grader must catch it.
 *
 *   simnic run -- ./server -d simnic0 [-p PORT] [-g GID_INDEX]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "kv.h"
#include "labutil.h"

struct request {
  char op; /* 'P' put, 'G' get, 'Q' quit */
  struct slot s;
};

static void post_recv(struct conn *c, struct request *req, struct ibv_mr *mr) {
  struct ibv_sge sge = {.addr = (uintptr_t)req, .length = sizeof *req, .lkey = mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1}, *bad;
  if (ibv_post_recv(c->qp, &wr, &bad)) lab_die("ibv_post_recv failed");
}

static void send_reply(struct conn *c, struct request *rep, struct ibv_mr *mr) {
  struct ibv_sge sge = {.addr = (uintptr_t)rep, .length = sizeof *rep, .lkey = mr->lkey};
  struct ibv_send_wr wr = {.wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_SIGNALED}, *bad;
  if (ibv_post_send(c->qp, &wr, &bad)) lab_die("ibv_post_send failed");
  struct ibv_wc wc;
  lab_wait_ok(c->cq, &wc, "SEND reply");
}

int main(int argc, char **argv) {
  struct options o = parse_options(argc, argv, 0);
  struct conn c;
  conn_create(&c, o.dev, o.gid_index); /* the device first: without one, say so and stop */
  int fd = lab_tcp_accept(o.port);
  struct slot *table = calloc(SLOTS, sizeof *table);
  struct request *bufs = calloc(2, sizeof *bufs); /* [0] request, [1] reply */
  struct ibv_mr *mr = ibv_reg_mr(c.pd, bufs, 2 * sizeof *bufs, IBV_ACCESS_LOCAL_WRITE);
  if (!mr) lab_die("ibv_reg_mr failed");
  conn_connect(&c, fd, 0);
  post_recv(&c, &bufs[0], mr);
  sync_with_peer(fd);

  for (;;) {
    struct ibv_wc wc;
    lab_wait_ok(c.cq, &wc, "receiving a request");
    struct request req = bufs[0];
    post_recv(&c, &bufs[0], mr);
    if (req.op == 'Q') break;
    struct slot *s = &table[slot_of(req.s.key)];
    if (req.op == 'P') *s = req.s;                /* the CPU copies the value in... */
    bufs[1].op = req.op;
    bufs[1].s = *s;                               /* ...and out */
    send_reply(&c, &bufs[1], mr);
  }
  sync_with_peer(fd);
  for (int i = 0; i < SLOTS; ++i)
    if (table[i].key[0]) printf("server: slot %d holds %s = %s\n", i, table[i].key, table[i].value);
  sync_with_peer(fd);
  ibv_dereg_mr(mr);
  conn_destroy(&c);
  return 0;
}
