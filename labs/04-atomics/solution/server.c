/* Lab 4 server: shares three 8-byte words (struct shared) with several clients and does
 * nothing else: the clients' atomics are executed by its NIC. At the end it prints them.
 *
 *   simnic run -- ./server -d simnic0 [-p PORT] -c CLIENTS [-g GID_INDEX]
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "conn.h"
#include "labutil.h"
#include "shared.h"

#define MAX_CLIENTS 16

int main(int argc, char **argv) {
  struct options o = parse_options(argc, argv, 0);
  if (o.clients < 1 || o.clients > MAX_CLIENTS) lab_die("-c must be 1..%d", MAX_CLIENTS);
  struct conn c[MAX_CLIENTS];
  struct shared *sh = aligned_alloc(64, 64);
  *sh = (struct shared){0, 0, 0};
  conn_open(&c[0], o.dev, o.gid_index); /* the device first: without one, say so and stop */
  /* REMOTE_ATOMIC for FETCH_ADD and CMP_SWP; READ and WRITE for the locked update. */
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  struct ibv_mr *mr = ibv_reg_mr(c[0].pd, sh, sizeof *sh, access);
  if (!mr) lab_die("ibv_reg_mr failed");
  int ls = lab_tcp_listen(o.port), fds[MAX_CLIENTS];
  for (int i = 0; i < o.clients; ++i) {
    fds[i] = accept(ls, NULL, NULL);
    if (fds[i] < 0) lab_die("accept failed");
    if (i > 0) conn_share(&c[i], &c[0]); /* one QP per client, all on the same PD and MR */
    c[i].me.addr = (uintptr_t)sh;
    c[i].me.rkey = mr->rkey;
    conn_connect(&c[i], fds[i], IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
  }
  printf("server: %d clients connected, shared words at 0x%llx rkey 0x%x\n", o.clients,
         (unsigned long long)(uintptr_t)sh, mr->rkey);
  for (int i = 0; i < o.clients; ++i) lab_sync(fds[i]); /* go */
  for (int i = 0; i < o.clients; ++i) lab_sync(fds[i]); /* each says it is done */
  printf("server: counter %llu\n", (unsigned long long)sh->counter);
  printf("server: total %llu\n", (unsigned long long)sh->total);
  printf("server: lock %llu\n", (unsigned long long)sh->lock);
  for (int i = 0; i < o.clients; ++i) lab_sync(fds[i]);
  ibv_dereg_mr(mr);
  for (int i = o.clients - 1; i >= 0; --i) conn_close(&c[i], i == 0);
  return 0;
}
