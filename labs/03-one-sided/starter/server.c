/* Lab 3 server: owns a key-value table in its memory and lets the client's NIC read and write
 * it directly. Its CPU never touches the table while the client works: it registers the
 * memory, hands out the address and key, and waits. At the end it prints what is in the table.
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

int main(int argc, char **argv) {
  struct options o = parse_options(argc, argv, 0);
  struct conn c;
  conn_open(&c, o.dev, o.gid_index); /* the device first: without one, say so and stop */
  int fd = lab_tcp_accept(o.port);

  struct slot *table = calloc(SLOTS, sizeof *table);
  struct ibv_mr *mr = NULL;
  /* TODO(lab 3, step 1): register the table (SLOTS slots) with ibv_reg_mr so that the client's
   * NIC may write and read it. Which access flags does that take? */
  if (!mr) lab_die("TODO(lab 3, step 1): register the table in server.c");
  /* TODO(lab 3, step 3): tell the client where the table is: fill c.me.addr, c.me.rkey and
   * c.me.slots before conn_connect() sends c.me over TCP. */
  /* TODO(lab 3, step 2): allow the client's RDMA WRITE and READ on this QP: the last argument
   * becomes the QP's qp_access_flags (IBV_ACCESS_REMOTE_* flags). */
  conn_connect(&c, fd, 0);
  printf("server: table at 0x%llx rkey 0x%x, %d slots\n", (unsigned long long)c.me.addr, c.me.rkey, SLOTS);

  lab_sync(fd); /* the client starts */
  lab_sync(fd); /* ...and says it is done: all this time the CPU did nothing */

  for (int i = 0; i < SLOTS; ++i)
    if (table[i].key[0]) printf("server: slot %d holds %s = %s\n", i, table[i].key, table[i].value);
  lab_sync(fd);
  ibv_dereg_mr(mr);
  conn_close(&c, 1);
  free(table);
  return 0;
}
