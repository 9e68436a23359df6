/* util.c: device, QP and connection set-up shared by the lab's programs (see util.h). */
#include "util.h"

#include "labutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int g_gid_index = 0;
enum ibv_mtu g_mtu = IBV_MTU_1024;

int side_open(struct side *s, const char *dev_name) { return side_open_sized(s, dev_name, BUF_SIZE, 16); }

int side_open_sized(struct side *s, const char *dev_name, size_t buf_size, uint32_t sq_depth) {
  memset(s, 0, sizeof *s);
  s->dev_name = dev_name;
  s->buf_size = buf_size;
  s->sq_depth = sq_depth;
  s->ctx = lab_open_device(dev_name);  /* exits with a clear message when there is none */
  s->pd = ibv_alloc_pd(s->ctx);
  s->cq = s->pd ? ibv_create_cq(s->ctx, (int)sq_depth + 64, NULL, NULL, 0) : NULL;
  s->buf = calloc(1, buf_size);
  if (!s->cq || !s->buf) {
    fprintf(stderr, "%s: cannot allocate PD/CQ: %s\n", dev_name, strerror(errno));
    return -1;
  }
  s->mr = ibv_reg_mr(s->pd, s->buf, buf_size,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!s->mr || ibv_query_gid(s->ctx, 1, g_gid_index, &s->gid)) {
    fprintf(stderr, "%s: ibv_reg_mr or ibv_query_gid(index %d) failed: %s\n", dev_name, g_gid_index,
            strerror(errno));
    return -1;
  }
  return side_create_qp(s);
}

int side_create_qp(struct side *s) {
  struct ibv_qp_init_attr init = {
      .send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = s->sq_depth, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1,
              .max_inline_data = 128}};
  s->qp = ibv_create_qp(s->pd, &init);
  if (!s->qp) {
    fprintf(stderr, "%s: ibv_create_qp: %s\n", s->dev_name, strerror(errno));
    return -1;
  }
  s->max_inline = init.cap.max_inline_data;  /* ibv_create_qp writes back what it granted */
  return 0;
}

void side_close(struct side *s) {
  if (s->qp) ibv_destroy_qp(s->qp);
  if (s->mr) ibv_dereg_mr(s->mr);
  if (s->cq) ibv_destroy_cq(s->cq);
  if (s->pd) ibv_dealloc_pd(s->pd);
  if (s->ctx) ibv_close_device(s->ctx);
  free(s->buf);
  memset(s, 0, sizeof *s);
}

static int to_init(struct side *s) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
  return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int to_rtr(struct side *s, const struct side *peer, const struct conn_params *p) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR, .path_mtu = g_mtu, .dest_qp_num = peer->qp->qp_num,
                          .rq_psn = 0, .max_dest_rd_atomic = 1, .min_rnr_timer = p->min_rnr_timer};
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer->gid;
  a.ah_attr.grh.sgid_index = g_gid_index;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static int to_rts(struct side *s, const struct conn_params *p) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS, .sq_psn = 0, .timeout = p->timeout,
                          .retry_cnt = p->retry_cnt, .rnr_retry = p->rnr_retry, .max_rd_atomic = 1};
  return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

int qp_connect(struct side *s, const struct side *peer, const struct conn_params *p) {
  int rc = to_init(s);
  if (!rc) rc = to_rtr(s, peer, p);
  if (!rc) rc = to_rts(s, p);
  if (rc) fprintf(stderr, "%s: connecting QP 0x%x failed: %s\n", s->dev_name, s->qp->qp_num, strerror(rc));
  return rc;
}

int qp_reset(struct side *s) {
  struct ibv_qp_attr reset = {.qp_state = IBV_QPS_RESET};
  if (qp_state_of(s->qp) == IBV_QPS_RESET) return 0;
  return ibv_modify_qp(s->qp, &reset, IBV_QP_STATE);
}

int reconnect_pair(struct side *a, struct side *b, const struct conn_params *p) {
  int rc = qp_reset(a);
  if (!rc) rc = qp_reset(b);
  if (rc) return rc;
  struct ibv_wc wc;  /* RESET empties the queues; drop what is left in the CQs */
  while (ibv_poll_cq(a->cq, 1, &wc) > 0) {}
  while (ibv_poll_cq(b->cq, 1, &wc) > 0) {}
  rc = qp_connect(a, b, p);
  return rc ? rc : qp_connect(b, a, p);
}

int post_send_op(struct side *s, enum ibv_wr_opcode op, uint64_t wr_id, uint32_t len,
                 uint64_t remote_addr, uint32_t rkey) {
  struct ibv_sge sge = {.addr = (uintptr_t)s->buf, .length = len, .lkey = s->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
                           .send_flags = IBV_SEND_SIGNALED};
  struct ibv_send_wr *bad = NULL;
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  return ibv_post_send(s->qp, &wr, &bad);
}

int post_recv_buf(struct side *s, uint64_t wr_id, uint32_t len) {
  struct ibv_sge sge = {.addr = (uintptr_t)s->buf, .length = len, .lkey = s->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1};
  struct ibv_recv_wr *bad = NULL;
  return ibv_post_recv(s->qp, &wr, &bad);
}

int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms) {
  return lab_poll_one(cq, wc, timeout_ms);
}

const char *qp_state_str(enum ibv_qp_state s) {
  static const char *names[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
  return (unsigned)s < sizeof names / sizeof *names ? names[s] : "?";
}

enum ibv_qp_state qp_state_of(struct ibv_qp *qp) {
  struct ibv_qp_attr a;
  struct ibv_qp_init_attr init;
  if (ibv_query_qp(qp, &a, IBV_QP_STATE, &init)) return IBV_QPS_UNKNOWN;
  return a.qp_state;
}

static enum ibv_mtu mtu_of(int bytes) {
  return bytes >= 4096 ? IBV_MTU_4096 : bytes >= 2048 ? IBV_MTU_2048 : bytes >= 1024 ? IBV_MTU_1024
       : bytes >= 512 ? IBV_MTU_512 : IBV_MTU_256;
}

int parse_common_args(int argc, char **argv, const char **dev_a, const char **dev_b, const char *usage,
                      const char *extra_opts, int (*extra)(int opt, const char *arg)) {
  char optstring[64];
  snprintf(optstring, sizeof optstring, "a:b:g:m:h%s", extra_opts ? extra_opts : "");
  int c;
  while ((c = getopt(argc, argv, optstring)) != -1) {
    switch (c) {
      case 'a': *dev_a = optarg; break;
      case 'b': *dev_b = optarg; break;
      case 'g': g_gid_index = atoi(optarg); break;
      case 'm': g_mtu = mtu_of(atoi(optarg)); break;
      default:
        if (c != 'h' && c != '?' && extra && extra(c, optarg) == 0) break;
        fprintf(stderr, "usage: %s [-a DEV_A] [-b DEV_B] [-g GID_INDEX] [-m MTU] %s\n", argv[0], usage);
        exit(c == 'h' ? 0 : 2);
    }
  }
  return optind;
}
