/* Lab 3 client, done the two-sided way (a plausible mistake): every put and get is a SEND the
 * server's CPU has to receive and answer. The grader must catch it.
 *
 *   simnic run -- ./client -d simnic1 [-p PORT] [-g GID_INDEX] [-s SEED] SERVER_IP
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "kv.h"
#include "labutil.h"

static const char *const kKeys[] = {"apple", "banana", "cherry", "damson", "elder", "fig", "guava", "hazel"};
#define NKEYS (int)(sizeof kKeys / sizeof kKeys[0])

struct request {
  char op;
  struct slot s;
};

struct kv_client {
  struct conn c;
  struct request *bufs; /* [0] request, [1] reply */
  struct ibv_mr *mr;
};

/* SENDs the request in bufs[0] and waits for the reply in bufs[1] (unless quitting). */
static void call(struct kv_client *k, int want_reply) {
  struct ibv_sge rsge = {.addr = (uintptr_t)&k->bufs[1], .length = sizeof k->bufs[1], .lkey = k->mr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 1, .sg_list = &rsge, .num_sge = 1}, *rbad;
  if (want_reply && ibv_post_recv(k->c.qp, &rwr, &rbad)) lab_die("ibv_post_recv failed");
  struct ibv_sge sge = {.addr = (uintptr_t)&k->bufs[0], .length = sizeof k->bufs[0], .lkey = k->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_SIGNALED}, *bad;
  if (ibv_post_send(k->c.qp, &wr, &bad)) lab_die("ibv_post_send failed");
  for (int done = 0; done < 1 + want_reply; ++done) {
    struct ibv_wc wc;
    lab_wait_ok(k->c.cq, &wc, "request");
  }
}

static void kv_put(struct kv_client *k, const char *key, const char *value) {
  memset(&k->bufs[0], 0, sizeof k->bufs[0]);
  k->bufs[0].op = 'P';
  snprintf(k->bufs[0].s.key, sizeof k->bufs[0].s.key, "%s", key);
  snprintf(k->bufs[0].s.value, sizeof k->bufs[0].s.value, "%s", value);
  call(k, 1);
}

static const char *kv_get(struct kv_client *k, const char *key) {
  memset(k->bufs, 0, 2 * sizeof *k->bufs);
  k->bufs[0].op = 'G';
  snprintf(k->bufs[0].s.key, sizeof k->bufs[0].s.key, "%s", key);
  call(k, 1);
  return strcmp(k->bufs[1].s.key, key) == 0 ? k->bufs[1].s.value : NULL;
}

int main(int argc, char **argv) {
  struct options o = parse_options(argc, argv, 1);
  struct kv_client k;
  conn_create(&k.c, o.dev, o.gid_index); /* the device first: without one, say so and stop */
  int fd = lab_tcp_connect(o.server, o.port);
  k.bufs = calloc(2, sizeof *k.bufs);
  k.mr = ibv_reg_mr(k.c.pd, k.bufs, 2 * sizeof *k.bufs, IBV_ACCESS_LOCAL_WRITE);
  if (!k.mr) lab_die("ibv_reg_mr failed");
  conn_connect(&k.c, fd, 0);
  sync_with_peer(fd);

  char value[48];
  for (int i = 0; i < NKEYS; ++i) {
    snprintf(value, sizeof value, "%s-%s-%d", kKeys[i], o.seed, i);
    kv_put(&k, kKeys[i], value);
    printf("client: put %s = %s\n", kKeys[i], value);
  }
  for (int i = 0; i < NKEYS; ++i) {
    const char *v = kv_get(&k, kKeys[i]);
    printf("client: get %s = %s\n", kKeys[i], v ? v : "(missing)");
  }
  memset(&k.bufs[0], 0, sizeof k.bufs[0]);
  k.bufs[0].op = 'Q';
  call(&k, 0);
  sync_with_peer(fd);
  sync_with_peer(fd);
  ibv_dereg_mr(k.mr);
  conn_destroy(&k.c);
  return 0;
}
