/* ud_common.c: see ud_common.h. */
#include "ud_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "labutil.h"

#define SLOT_BYTES (GRH_BYTES + sizeof(struct msg))

void node_open(struct ud_node *n, const char *dev, int gid_index) {
  memset(n, 0, sizeof *n);
  n->gid_index = gid_index;
  n->ctx = lab_open_device(dev);
  n->pd = ibv_alloc_pd(n->ctx);
  n->send_cq = n->pd ? ibv_create_cq(n->ctx, SLOTS, NULL, NULL, 0) : NULL;
  n->recv_cq = n->pd ? ibv_create_cq(n->ctx, SLOTS, NULL, NULL, 0) : NULL;
  n->recv_buf = calloc(SLOTS, SLOT_BYTES);
  if (!n->send_cq || !n->recv_cq || !n->recv_buf) lab_die("%s: cannot allocate PD/CQ: %s", dev, strerror(errno));
  n->recv_mr = ibv_reg_mr(n->pd, n->recv_buf, SLOTS * SLOT_BYTES, IBV_ACCESS_LOCAL_WRITE);
  n->send_mr = ibv_reg_mr(n->pd, &n->send_msg, sizeof n->send_msg, 0);
  if (!n->recv_mr || !n->send_mr) lab_die("%s: ibv_reg_mr: %s", dev, strerror(errno));
  if (ibv_query_gid(n->ctx, 1, gid_index, &n->gid)) lab_die("%s: no GID at index %d", dev, gid_index);
  struct ibv_qp_init_attr init = {.send_cq = n->send_cq, .recv_cq = n->recv_cq, .qp_type = IBV_QPT_UD,
                                  .cap = {.max_send_wr = SLOTS, .max_recv_wr = SLOTS, .max_send_sge = 1,
                                          .max_recv_sge = 1}};
  n->qp = ibv_create_qp(n->pd, &init);
  if (!n->qp) lab_die("%s: ibv_create_qp(UD): %s", dev, strerror(errno));
}

void node_close(struct ud_node *n) {
  ibv_destroy_qp(n->qp);
  ibv_dereg_mr(n->send_mr);
  ibv_dereg_mr(n->recv_mr);
  ibv_destroy_cq(n->send_cq);
  ibv_destroy_cq(n->recv_cq);
  ibv_dealloc_pd(n->pd);
  ibv_close_device(n->ctx);
  free(n->recv_buf);
}

int post_slot(struct ud_node *n, int slot) {
  struct ibv_sge sge = {.addr = (uintptr_t)(n->recv_buf + slot * SLOT_BYTES), .length = SLOT_BYTES,
                        .lkey = n->recv_mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = (uint64_t)slot, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
  return ibv_post_recv(n->qp, &wr, &bad);
}

struct msg *slot_msg(struct ud_node *n, int slot) {
  return (struct msg *)(n->recv_buf + slot * SLOT_BYTES + GRH_BYTES);
}

struct ibv_grh *slot_grh(struct ud_node *n, int slot) {
  return (struct ibv_grh *)(n->recv_buf + slot * SLOT_BYTES);
}

int node_wait(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms) { return lab_poll_one(cq, wc, timeout_ms); }

int bootstrap_write(const char *path, uint32_t qpn, const union ibv_gid *gid) {
  char tmp[512], g[40];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return -1;
  lab_gid_str(gid, g);
  fprintf(f, "%u %s\n", qpn, g);
  fclose(f);
  return rename(tmp, path);  /* readers never see half a file */
}

int bootstrap_read(const char *path, uint32_t *qpn, union ibv_gid *gid, int timeout_ms) {
  for (int waited = 0; waited <= timeout_ms; waited += 20) {
    FILE *f = fopen(path, "r");
    unsigned q;
    unsigned b[16];
    if (f) {
      int ok = fscanf(f, "%u %2x%2x:%2x%2x:%2x%2x:%2x%2x:%2x%2x:%2x%2x:%2x%2x:%2x%2x", &q, &b[0], &b[1], &b[2], &b[3],
                      &b[4], &b[5], &b[6], &b[7], &b[8], &b[9], &b[10], &b[11], &b[12], &b[13], &b[14], &b[15]);
      fclose(f);
      if (ok == 17) {
        *qpn = q;
        for (int i = 0; i < 16; ++i) gid->raw[i] = (uint8_t)b[i];
        return 0;
      }
    }
    usleep(20 * 1000);
  }
  return -1;
}
