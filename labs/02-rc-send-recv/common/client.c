/* Lab 2 client: connects to the server over TCP, connects an RC QP to the server's by hand,
 * then sends messages and checks each reply.
 *
 *   simnic run -- ./client -d simnic1 [-p PORT] [-g GID_INDEX] [-n MESSAGES] SERVER_IP
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "labutil.h"
#include "message.h"

int main(int argc, char **argv) {
  struct options o = parse_options(argc, argv, 1);
  struct conn c;
  conn_create(&c, o.dev, o.gid_index); /* the device first: without one, say so and stop */
  int fd = lab_tcp_connect(o.server, o.port);
  conn_connect(&c, fd);
  lab_sync(fd);

  for (int i = 0; i < o.messages; ++i) {
    lab_message_fill(c.buf, MSG_SIZE, "message", i);
    conn_post_send(&c, MSG_SIZE, (uint64_t)i);
    /* My SEND done and the reply arrived and checked; its receive slot goes back. */
    conn_post_recv(&c, lab_wait_reply(c.cq, c.buf + MSG_SIZE, MSG_SIZE, "reply", i));
    printf("client: reply %d ok\n", i);
  }
  printf("client: %d replies ok\n", o.messages);
  lab_sync(fd);
  conn_destroy(&c);
  close(fd);
  return 0;
}
