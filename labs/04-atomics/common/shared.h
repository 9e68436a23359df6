/* The words the server shares, and the lab's command line: plain C, no RDMA here. */
#ifndef LAB4_SHARED_H
#define LAB4_SHARED_H
#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "labutil.h"

/* In the server's memory. Atomics work on 8-byte words at 8-byte aligned addresses. */
struct shared {
  uint64_t counter; /* incremented with FETCH_ADD */
  uint64_t lock;    /* 0 when free, else the holder's id: taken and given back with CMP_SWP */
  uint64_t total;   /* updated with a plain READ + WRITE, only while holding the lock */
};

struct options {
  const char *dev;    /* -d: RDMA device */
  int gid_index;      /* -g: GID index */
  int port;           /* -p: TCP port of the side channel */
  int clients;        /* -c: server: how many clients to wait for */
  int id;             /* -i: client: my id (1, 2, ...), what I write into the lock */
  int increments;     /* -n: client: FETCH_ADDs on the counter */
  int updates;        /* -m: client: locked updates of total */
  const char *server; /* client: the server's IPv4 address */
};

static inline struct options parse_options(int argc, char **argv, int is_client) {
  struct options o = {.dev = NULL, .port = lab_default_port(), .clients = 2, .id = 1, .increments = 100, .updates = 10};
  for (int opt; (opt = getopt(argc, argv, "d:g:p:c:i:n:m:")) != -1;) {
    if (opt == 'd') o.dev = optarg;
    else if (opt == 'g') o.gid_index = atoi(optarg);
    else if (opt == 'p') o.port = atoi(optarg);
    else if (opt == 'c') o.clients = atoi(optarg);
    else if (opt == 'i') o.id = atoi(optarg);
    else if (opt == 'n') o.increments = atoi(optarg);
    else if (opt == 'm') o.updates = atoi(optarg);
    else lab_die("usage: %s -d DEVICE [-g GID_INDEX] [-p PORT] %s", argv[0],
                 is_client ? "[-i ID] [-n INCREMENTS] [-m UPDATES] SERVER_IP" : "[-c CLIENTS]");
  }
  if (is_client && optind >= argc) lab_die("usage: %s ... SERVER_IP", argv[0]);
  if (is_client) o.server = argv[optind];
  return o;
}
#endif
