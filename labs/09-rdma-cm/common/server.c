/* Lab 9 server: lab 2's server with rdma_cm instead of a TCP side channel. It listens on an
 * rdma_cm port, accepts one client, answers each message with a reply of the same size, and
 * waits for the client to disconnect.
 *
 *   simnic run -- ./server -a 127.0.0.1 [-p PORT] [-n MESSAGES]
 */
#include <stdio.h>

#include "cm.h"
#include "labutil.h"
#include "message.h"

int main(int argc, char **argv) {
  struct options o = parse_options(argc, argv, 0);
  struct cm_conn c;
  cm_listen(&c, o.addr, o.port);
  printf("server: listening on %s port %d\n", o.addr, o.port);
  cm_accept(&c, "lab 9 server says hello");
  printf("server: connected to QP %u, the client said \"%s\"\n", c.id->qp->qp_num, c.hello);

  for (int i = 0; i < o.messages; ++i) {
    struct ibv_wc wc;
    lab_wait_ok(c.cq, &wc, "receiving a message");
    int slot = lab_message_received(&wc, c.buf + MSG_SIZE, MSG_SIZE, "message", i);
    printf("server: message %d ok (%d bytes)\n", i, MSG_SIZE);
    cm_post_recv(&c, slot); /* give the slot back */
    lab_message_fill(c.buf, MSG_SIZE, "reply", i);
    cm_post_send(&c, MSG_SIZE, (uint64_t)i);
    lab_wait_ok(c.cq, &wc, "sending a reply");
  }
  printf("server: %d messages ok\n", o.messages);
  cm_disconnect(&c, 0); /* the client disconnects once it has every reply */
  printf("server: disconnected\n");
  cm_destroy(&c);
  return 0;
}
