/* Lab 3 client: puts key-value pairs into the server's table with RDMA WRITE and reads them
 * back with RDMA READ. The server's CPU takes no part: only its NIC answers.
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

struct kv_client {
  struct conn c;
  struct slot *local; /* one slot of my own memory: the source of WRITEs, the target of READs */
  struct ibv_mr *mr;
};

/* Posts one signalled RDMA WRITE or READ between my local slot and slot `slot` of the table,
 * and waits for its completion. */
static void rdma_slot(struct kv_client *k, enum ibv_wr_opcode op, uint32_t slot) {
  (void)k, (void)op, (void)slot;
  /* TODO(lab 3, step 4): post one signalled work request with opcode `op` whose single SGE is my
   * local slot (k->local, sizeof *k->local bytes, k->mr->lkey) and whose remote side is slot
   * `slot` of the server's table: wr.wr.rdma.remote_addr (the table's address + slot * its size)
   * and wr.wr.rdma.rkey. Then wait for its completion (lab_wait_ok). */
  lab_die("TODO(lab 3, step 4): post the RDMA work request in rdma_slot()");
}

static void kv_put(struct kv_client *k, const char *key, const char *value) {
  memset(k->local, 0, sizeof *k->local);
  snprintf(k->local->key, sizeof k->local->key, "%s", key);
  snprintf(k->local->value, sizeof k->local->value, "%s", value);
  /* TODO(lab 3, step 4): copy my local slot into the table's slot_of(key) with rdma_slot(). */
  (void)rdma_slot;
}

/* Returns the value in my local slot, or NULL when the slot holds another key. */
static const char *kv_get(struct kv_client *k, const char *key) {
  memset(k->local, 0, sizeof *k->local);
  /* TODO(lab 3, step 5): fetch the table's slot_of(key) into my local slot with rdma_slot(). */
  return strcmp(k->local->key, key) == 0 ? k->local->value : NULL;
}

int main(int argc, char **argv) {
  struct options o = parse_options(argc, argv, 1);
  struct kv_client k;
  conn_open(&k.c, o.dev, o.gid_index); /* the device first: without one, say so and stop */
  int fd = lab_tcp_connect(o.server, o.port);
  k.local = calloc(1, sizeof *k.local);
  /* LOCAL_WRITE: the NIC writes READ responses into it. */
  k.mr = ibv_reg_mr(k.c.pd, k.local, sizeof *k.local, IBV_ACCESS_LOCAL_WRITE);
  if (!k.mr) lab_die("ibv_reg_mr failed");
  conn_connect(&k.c, fd, 0);
  lab_sync(fd);

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
  lab_sync(fd); /* done */
  lab_sync(fd);
  ibv_dereg_mr(k.mr);
  conn_close(&k.c, 1);
  free(k.local);
  return 0;
}
