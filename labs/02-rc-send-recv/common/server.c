/* Lab 2 server: accepts one client on TCP, connects an RC QP to it by hand, then answers each
 * message (a SEND into one of its posted receives) with a reply of the same size.
 *
 *   simnic run -- ./server -d simnic0 [-p PORT] [-g GID_INDEX] [-n MESSAGES]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "labutil.h"
#include "message.h"

int main(int argc, char **argv) {
  struct options o = parse_options(argc, argv, 0);
  struct conn c;
  conn_create(&c, o.dev, o.gid_index); /* the device first: without one, say so and stop */
  int fd = lab_tcp_accept(o.port);
  conn_connect(&c, fd);
  sync_with_peer(fd); /* both QPs are in RTS before anyone sends */

  for (int i = 0; i < o.messages; ++i) {
    struct ibv_wc wc;
    lab_wait_ok(c.cq, &wc, "receiving a message");
    if (wc.opcode != IBV_WC_RECV) lab_die("expected a receive completion, got opcode %d", wc.opcode);
    const char *msg = c.buf + MSG_SIZE * (1 + wc.wr_id);
    if (wc.byte_len != MSG_SIZE || !message_ok(msg, "message", i)) lab_die("message %d is wrong", i);
    printf("server: message %d ok (%u bytes)\n", i, wc.byte_len);
    conn_post_recv(&c, (int)wc.wr_id); /* give the slot back */
    message_fill(c.buf, "reply", i);
    conn_post_send(&c, MSG_SIZE, (uint64_t)i);
    lab_wait_ok(c.cq, &wc, "sending a reply");
  }
  printf("server: %d messages ok\n", o.messages);
  sync_with_peer(fd); /* the client has every reply before we tear the QP down */
  conn_destroy(&c);
  close(fd);
  return 0;
}
