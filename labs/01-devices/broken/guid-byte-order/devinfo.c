/* Lab 1: a small ibv_devinfo. Lists every RDMA device, what it can do, its port and the port's
 * GID table, in the format the lab's README gives.
 *
 *   simnic run -- ./devinfo          (on simnic)
 *   ./devinfo                        (on a machine with a real RDMA NIC)
 */
#include <endian.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>

#include "labutil.h"

/* enum ibv_mtu counts in steps: IBV_MTU_256 is 1, IBV_MTU_512 is 2, ... IBV_MTU_4096 is 5. */
static int mtu_bytes(enum ibv_mtu mtu) { return 128 << mtu; }

static const char *link_layer_str(uint8_t link_layer) {
  switch (link_layer) {
    case IBV_LINK_LAYER_ETHERNET: return "Ethernet"; /* RoCE: InfiniBand transport over UDP/IP */
    case IBV_LINK_LAYER_INFINIBAND: return "InfiniBand";
    default: return "unknown";
  }
}

/* The GID table: each entry is a 128-bit address of the port. On RoCE it is made from the
 * port's IP address (an IPv4 address appears as ::ffff:a.b.c.d). Empty entries are zero. */
static void print_gids(struct ibv_context *ctx, uint8_t port, int table_len) {
  for (int i = 0; i < table_len; ++i) {
    union ibv_gid gid;
    if (ibv_query_gid(ctx, port, i, &gid) != 0) continue;
    int empty = 1;
    for (int b = 0; b < 16; ++b) empty &= gid.raw[b] == 0;
    if (empty) continue;
    char text[40];
    lab_gid_str(&gid, text);
    printf("  port %u gid %d %s\n", port, i, text);
  }
}

static void print_port(struct ibv_context *ctx, uint8_t port) {
  struct ibv_port_attr pa;
  if (ibv_query_port(ctx, port, &pa) != 0) {
    fprintf(stderr, "ibv_query_port(%u) failed\n", port);
    return;
  }
  printf("  port %u state %s\n", port, ibv_port_state_str(pa.state));
  printf("  port %u active_mtu %d\n", port, mtu_bytes(pa.active_mtu));
  printf("  port %u max_mtu %d\n", port, mtu_bytes(pa.max_mtu));
  printf("  port %u link_layer %s\n", port, link_layer_str(pa.link_layer));
  print_gids(ctx, port, pa.gid_tbl_len);
}

/* The node GUID comes in network byte order (__be64): convert before printing. */
static void print_device(struct ibv_device *dev) {
  struct ibv_context *ctx = ibv_open_device(dev);
  if (!ctx) {
    fprintf(stderr, "ibv_open_device(%s) failed\n", ibv_get_device_name(dev));
    return;
  }
  struct ibv_device_attr da;
  if (ibv_query_device(ctx, &da) != 0) {
    fprintf(stderr, "ibv_query_device(%s) failed\n", ibv_get_device_name(dev));
    ibv_close_device(ctx);
    return;
  }
  uint64_t guid = ibv_get_device_guid(dev); /* printed as it comes */
  printf("device %s\n", ibv_get_device_name(dev));
  printf("  node_guid %04x:%04x:%04x:%04x\n", (unsigned)(guid >> 48) & 0xffff, (unsigned)(guid >> 32) & 0xffff,
         (unsigned)(guid >> 16) & 0xffff, (unsigned)guid & 0xffff);
  printf("  phys_port_cnt %u\n", da.phys_port_cnt);
  printf("  max_qp %d\n", da.max_qp);
  printf("  max_cqe %d\n", da.max_cqe);
  for (uint8_t port = 1; port <= da.phys_port_cnt; ++port) print_port(ctx, port);
  ibv_close_device(ctx);
}

int main(void) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n == 0)
    lab_die("no RDMA device found: on simnic, start NICs with `simnic up` and run this program with "
            "`simnic run -- ./devinfo`; on real hardware, check the RDMA driver (ibv_devices)");
  for (int i = 0; i < n; ++i) print_device(list[i]);
  ibv_free_device_list(list);
  return 0;
}
