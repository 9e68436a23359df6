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
    message_fill(c.buf, "message", i);
    cm_post_send(&c, MSG_SIZE, (uint64_t)i);
    /* Two completions: my SEND is done, and the reply arrived (in either order). */
    int got_reply = 0;
    for (int done = 0; done < 2; ++done) {
      struct ibv_wc wc;
      lab_wait_ok(c.cq, &wc, "waiting for the send and the reply");
      if (wc.opcode != IBV_WC_RECV) continue;
      const char *reply = c.buf + MSG_SIZE * (1 + wc.wr_id);
      if (wc.byte_len != MSG_SIZE || !message_ok(reply, "reply", i)) lab_die("reply %d is wrong", i);
      cm_post_recv(&c, (int)wc.wr_id);
      got_reply = 1;
    }
    if (!got_reply) lab_die("no reply to message %d", i);
    printf("client: reply %d ok\n", i);
  }
  printf("client: %d replies ok\n", o.messages);
  cm_disconnect(&c, 1);
  printf("client: disconnected\n");
  cm_destroy(&c);
  return 0;
}
