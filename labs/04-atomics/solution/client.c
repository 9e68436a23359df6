/* Lab 4 client: increments the server's counter with FETCH_ADD, and updates its total under a
 * spinlock taken and released with CMP_SWP. Several clients run at once; the NIC that owns the
 * words executes each atomic as one indivisible step, so no increment is lost.
 *
 *   simnic run -- ./client -d simnic1 [-p PORT] -i ID [-n INCREMENTS] [-m UPDATES] [-g GID_INDEX] SERVER_IP
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "conn.h"
#include "labutil.h"
#include "shared.h"

struct client {
  struct conn c;
  uint64_t *word; /* 8 bytes of my memory: the atomics' result (the old value), READ/WRITE buffer */
  struct ibv_mr *mr;
};

static uint64_t remote(struct client *k, size_t offset) { return k->c.peer.addr + offset; }

/* FETCH_ADD: adds `add` to the remote word and returns what it held before. */
static uint64_t fetch_add(struct client *k, size_t offset, uint64_t add) {
  struct ibv_sge sge = {.addr = (uintptr_t)k->word, .length = 8, .lkey = k->mr->lkey};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD};
  wr.wr.atomic.remote_addr = remote(k, offset);
  wr.wr.atomic.rkey = k->c.peer.rkey;
  wr.wr.atomic.compare_add = add;
  conn_do(&k->c, &wr);
  return *k->word;
}

/* CMP_SWP: if the remote word equals `expect`, replaces it with `swap`; returns the old value
 * either way (so the swap happened exactly when the result equals `expect`). */
static uint64_t cmp_swap(struct client *k, size_t offset, uint64_t expect, uint64_t swap) {
  struct ibv_sge sge = {.addr = (uintptr_t)k->word, .length = 8, .lkey = k->mr->lkey};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_ATOMIC_CMP_AND_SWP};
  wr.wr.atomic.remote_addr = remote(k, offset);
  wr.wr.atomic.rkey = k->c.peer.rkey;
  wr.wr.atomic.compare_add = expect;
  wr.wr.atomic.swap = swap;
  conn_do(&k->c, &wr);
  return *k->word;
}

/* A plain RDMA READ or WRITE of one remote word through k->word. */
static void rdma_word(struct client *k, enum ibv_wr_opcode op, size_t offset) {
  struct ibv_sge sge = {.addr = (uintptr_t)k->word, .length = 8, .lkey = k->mr->lkey};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = op};
  wr.wr.rdma.remote_addr = remote(k, offset);
  wr.wr.rdma.rkey = k->c.peer.rkey;
  conn_do(&k->c, &wr);
}

/* Spin until CMP_SWP finds the lock free (0) and puts my id in; returns the attempts it took. */
static int lock(struct client *k, uint64_t id) {
  int attempts = 1;
  while (cmp_swap(k, offsetof(struct shared, lock), 0, id) != 0) ++attempts;
  return attempts;
}

static void unlock(struct client *k, uint64_t id) {
  if (cmp_swap(k, offsetof(struct shared, lock), id, 0) != id) lab_die("the lock was not mine");
}

int main(int argc, char **argv) {
  struct options o = parse_options(argc, argv, 1);
  struct client k;
  conn_open(&k.c, o.dev, o.gid_index); /* the device first: without one, say so and stop */
  int fd = lab_tcp_connect(o.server, o.port);
  k.word = aligned_alloc(8, 8);
  /* LOCAL_WRITE: the NIC writes each atomic's old value (and READ data) here. */
  k.mr = ibv_reg_mr(k.c.pd, k.word, 8, IBV_ACCESS_LOCAL_WRITE);
  if (!k.mr) lab_die("ibv_reg_mr failed");
  conn_connect(&k.c, fd, 0);
  lab_sync(fd);

  uint64_t first = 0;
  for (int i = 0; i < o.increments; ++i) {
    uint64_t old = fetch_add(&k, offsetof(struct shared, counter), 1);
    if (i == 0) first = old;
  }
  printf("client %d: %d increments (the first saw %llu)\n", o.id, o.increments, (unsigned long long)first);

  int spins = 0;
  for (int i = 0; i < o.updates; ++i) {
    spins += lock(&k, (uint64_t)o.id);
    rdma_word(&k, IBV_WR_RDMA_READ, offsetof(struct shared, total)); /* read total... */
    *k.word += 1;                                                      /* ...add one... */
    rdma_word(&k, IBV_WR_RDMA_WRITE, offsetof(struct shared, total)); /* ...write it back */
    unlock(&k, (uint64_t)o.id);
  }
  printf("client %d: %d locked updates (%d lock attempts)\n", o.id, o.updates, spins);
  lab_sync(fd);
  lab_sync(fd);
  ibv_dereg_mr(k.mr);
  conn_close(&k.c, 1);
  return 0;
}
