/* The lab's command line: plain C, no RDMA here. (Its test messages: lab_message_fill and
 * lab_message_ok in labutil.h.) */
#ifndef LAB2_MESSAGE_H
#define LAB2_MESSAGE_H
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "conn.h"
#include "labutil.h"

struct options {
  const char *dev;    /* -d: RDMA device (simnic0, simnic1, or a real one: ibv_devices) */
  int gid_index;      /* -g: GID index (0 on simnic; on real RoCE NICs, see docs/real-hardware.md) */
  int port;           /* -p: TCP port of the side channel */
  int messages;       /* -n: how many messages */
  const char *server; /* client only: the server's IPv4 address */
};

static inline struct options parse_options(int argc, char **argv, int is_client) {
  struct options o = {.dev = NULL, .gid_index = 0, .port = lab_default_port(), .messages = 5, .server = NULL};
  for (int opt; (opt = getopt(argc, argv, "d:g:p:n:")) != -1;) {
    if (opt == 'd') o.dev = optarg;
    else if (opt == 'g') o.gid_index = atoi(optarg);
    else if (opt == 'p') o.port = atoi(optarg);
    else if (opt == 'n') o.messages = atoi(optarg);
    else lab_die("usage: %s -d DEVICE [-g GID_INDEX] [-p PORT] [-n MESSAGES]%s", argv[0], is_client ? " SERVER_IP" : "");
  }
  if (is_client) {
    if (optind >= argc) lab_die("usage: %s -d DEVICE [-g GID_INDEX] [-p PORT] [-n MESSAGES] SERVER_IP", argv[0]);
    o.server = argv[optind];
  }
  return o;
}

#endif
