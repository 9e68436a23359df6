/* Lab 9 client: lab 2's client with rdma_cm instead of a TCP side channel. It connects to the
 * server's rdma_cm port, sends messages, checks each reply, then disconnects.
 *
 *   simnic run -- ./client [-a SOURCE_IP] [-p PORT] [-n MESSAGES] SERVER_IP
 */
#include <stdio.h>

#include "cm.h"
#include "labutil.h"
#include "message.h"

int main(int argc, char **argv) {
  struct options o = parse_options(argc, argv, 1);
  struct cm_conn c;
  cm_connect(&c, o.addr, o.server, o.port, "lab 9 client says hello");
  printf("client: connected to QP %u, the server said \"%s\"\n", c.id->qp->qp_num, c.hello);

  for (int i = 0; i < o.messages; ++i) {
    lab_message_fill(c.buf, MSG_SIZE, "message", i);
    cm_post_send(&c, MSG_SIZE, (uint64_t)i);
    /* My SEND done and the reply arrived and checked; its receive slot goes back. */
    cm_post_recv(&c, lab_wait_reply(c.cq, c.buf + MSG_SIZE, MSG_SIZE, "reply", i));
    printf("client: reply %d ok\n", i);
  }
  printf("client: %d replies ok\n", o.messages);
  cm_disconnect(&c, 1);
  printf("client: disconnected\n");
  cm_destroy(&c);
  return 0;
}
