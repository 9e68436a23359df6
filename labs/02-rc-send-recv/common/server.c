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
  lab_sync(fd); /* both QPs are in RTS before anyone sends */

  for (int i = 0; i < o.messages; ++i) {
    struct ibv_wc wc;
    lab_wait_ok(c.cq, &wc, "receiving a message");
    int slot = lab_message_received(&wc, c.buf + MSG_SIZE, MSG_SIZE, "message", i);
    printf("server: message %d ok (%d bytes)\n", i, MSG_SIZE);
    conn_post_recv(&c, slot); /* give the slot back */
    lab_message_fill(c.buf, MSG_SIZE, "reply", i);
    conn_post_send(&c, MSG_SIZE, (uint64_t)i);
    lab_wait_ok(c.cq, &wc, "sending a reply");
  }
  printf("server: %d messages ok\n", o.messages);
  lab_sync(fd); /* the client has every reply before we tear the QP down */
  conn_destroy(&c);
  close(fd);
  return 0;
}
