/* The key-value table's layout and the lab's command line: plain C, no RDMA here. */
#ifndef LAB3_KV_H
#define LAB3_KV_H
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labutil.h"

#define SLOTS 64

/* One slot of the table: 64 bytes, all in the server's memory. */
struct slot {
  char key[16];
  char value[48];
};

/* Which slot a key lives in (FNV-1a): both sides compute it, the server never needs to. */
static inline uint32_t slot_of(const char *key) {
  uint32_t h = 2166136261u;
  for (const char *p = key; *p; ++p) h = (h ^ (uint8_t)*p) * 16777619u;
  return h % SLOTS;
}

struct options {
  const char *dev;    /* -d: RDMA device */
  int gid_index;      /* -g: GID index */
  int port;           /* -p: TCP port of the side channel */
  const char *seed;   /* -s: client only: a word mixed into the values */
  const char *server; /* client only: the server's IPv4 address */
};

static inline struct options parse_options(int argc, char **argv, int is_client) {
  struct options o = {.dev = NULL, .gid_index = 0, .port = lab_default_port(), .seed = "lab3", .server = NULL};
  for (int opt; (opt = getopt(argc, argv, "d:g:p:s:")) != -1;) {
    if (opt == 'd') o.dev = optarg;
    else if (opt == 'g') o.gid_index = atoi(optarg);
    else if (opt == 'p') o.port = atoi(optarg);
    else if (opt == 's') o.seed = optarg;
    else lab_die("usage: %s -d DEVICE [-g GID_INDEX] [-p PORT]%s", argv[0], is_client ? " [-s SEED] SERVER_IP" : "");
  }
  if (is_client && optind >= argc) lab_die("usage: %s -d DEVICE [-g GID_INDEX] [-p PORT] [-s SEED] SERVER_IP", argv[0]);
  if (is_client) o.server = argv[optind];
  return o;
}
#endif
