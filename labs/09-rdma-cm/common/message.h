/* The lab's command line: plain C, no RDMA here. (Its test messages: lab_message_fill and
 * lab_message_ok in labutil.h.) */
#ifndef LAB9_MESSAGE_H
#define LAB9_MESSAGE_H
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cm.h"
#include "labutil.h"

struct options {
  const char *addr;   /* -a: server: the address to listen on; client: its own address (optional) */
  int port;           /* -p: the rdma_cm port (RDMA_PS_TCP: like a TCP port, in its own space) */
  int messages;       /* -n: how many messages */
  const char *server; /* client only: the server's IPv4 address */
};

static inline struct options parse_options(int argc, char **argv, int is_client) {
  struct options o = {.addr = is_client ? NULL : "0.0.0.0", .port = lab_default_port(), .messages = 5, .server = NULL};
  const char *usage = is_client ? "[-a SOURCE_IP] [-p PORT] [-n MESSAGES] SERVER_IP" : "[-a LISTEN_IP] [-p PORT] [-n MESSAGES]";
  setvbuf(stdout, NULL, _IOLBF, 0); /* a grader that stops a stuck program still sees what it said */
  for (int opt; (opt = getopt(argc, argv, "a:p:n:")) != -1;) {
    if (opt == 'a') o.addr = optarg;
    else if (opt == 'p') o.port = atoi(optarg);
    else if (opt == 'n') o.messages = atoi(optarg);
    else lab_die("usage: %s %s", argv[0], usage);
  }
  if (is_client) {
    if (optind >= argc) lab_die("usage: %s %s", argv[0], usage);
    o.server = argv[optind];
  }
  return o;
}

#endif
