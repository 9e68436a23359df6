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
  sync_with_peer(fd);

  for (int i = 0; i < o.messages; ++i) {
    message_fill(c.buf, "message", i);
    conn_post_send(&c, MSG_SIZE, (uint64_t)i);
    /* Two completions: my SEND is done, and the reply arrived (in either order). */
    int got_reply = 0;
    for (int done = 0; done < 2; ++done) {
      struct ibv_wc wc;
      lab_wait_ok(c.cq, &wc, "waiting for the send and the reply");
      if (wc.opcode != IBV_WC_RECV) continue;
      const char *reply = c.buf + MSG_SIZE * (1 + wc.wr_id);
      if (wc.byte_len != MSG_SIZE || !message_ok(reply, "reply", i)) lab_die("reply %d is wrong", i);
      conn_post_recv(&c, (int)wc.wr_id);
      got_reply = 1;
    }
    if (!got_reply) lab_die("no reply to message %d", i);
    printf("client: reply %d ok\n", i);
  }
  printf("client: %d replies ok\n", o.messages);
  sync_with_peer(fd);
  conn_destroy(&c);
  close(fd);
  return 0;
}
