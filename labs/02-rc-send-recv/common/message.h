/* The lab's test messages and command line: plain C, no RDMA here. */
#ifndef LAB2_MESSAGE_H
#define LAB2_MESSAGE_H
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* "message 3" (or "reply 3") then a pattern that depends on the number, up to MSG_SIZE bytes. */
static inline void message_fill(char *buf, const char *what, int i) {
  int n = snprintf(buf, MSG_SIZE, "%s %d", what, i) + 1;
  for (int j = n; j < MSG_SIZE; ++j) buf[j] = (char)('a' + (i + j) % 26);
}

static inline int message_ok(const char *buf, const char *what, int i) {
  char want[MSG_SIZE];
  message_fill(want, what, i);
  return memcmp(buf, want, MSG_SIZE) == 0;
}

/* One byte each way over TCP: neither side goes on before the other reached this point. */
static inline void sync_with_peer(int fd) {
  char mine = 's', theirs;
  lab_exchange(fd, &mine, &theirs, 1);
}
#endif
