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
  /* The client's NIC writes and reads the table: the MR must allow REMOTE_WRITE and REMOTE_READ
   * (and REMOTE_WRITE requires LOCAL_WRITE). */
  struct ibv_mr *mr = ibv_reg_mr(c.pd, table, SLOTS * sizeof *table,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!mr) lab_die("ibv_reg_mr failed");
  c.me.addr = (uintptr_t)table;
  c.me.rkey = mr->rkey;
  c.me.slots = SLOTS;
  conn_connect(&c, fd, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
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
