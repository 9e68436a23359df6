/* Lab 1: a small ibv_devinfo. Lists every RDMA device, what it can do, its port and the port's
 * GID table, in the format the lab's README gives.
 *
 *   simnic run -- ./devinfo          (on simnic)
 *   ./devinfo                        (on a machine with a real RDMA NIC)
 *
 * Fill in the TODOs in the order of the README's steps; `simnic lab check 1` tells you what is
 * still missing.
 */
#include <endian.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>

#include "labutil.h"

/* Converts an enum ibv_mtu (IBV_MTU_256 is 1, IBV_MTU_512 is 2, ... IBV_MTU_4096 is 5) to bytes. */
static int mtu_bytes(enum ibv_mtu mtu) {
  /* TODO(lab 1, step 4): return the MTU in bytes (256 for IBV_MTU_256, ... 4096 for IBV_MTU_4096). */
  return (int)mtu;
}

static const char *link_layer_str(uint8_t link_layer) {
  switch (link_layer) {
    case IBV_LINK_LAYER_ETHERNET: return "Ethernet"; /* RoCE: InfiniBand transport over UDP/IP */
    case IBV_LINK_LAYER_INFINIBAND: return "InfiniBand";
    default: return "unknown";
  }
}

/* Prints the non-empty entries of the port's GID table:  "  port 1 gid 0 0000:...:7f00:0001". */
static void print_gids(struct ibv_context *ctx, uint8_t port, int table_len) {
  (void)ctx, (void)port, (void)table_len;
  /* TODO(lab 1, step 5): for each index below table_len, ibv_query_gid(ctx, port, index, &gid);
   * skip entries that are all zero; print the others with lab_gid_str(). */
}

/* Prints "  port P state ...", "active_mtu", "max_mtu", "link_layer", then the GID table. */
static void print_port(struct ibv_context *ctx, uint8_t port) {
  (void)ctx, (void)port, (void)mtu_bytes, (void)link_layer_str, (void)print_gids;
  /* TODO(lab 1, step 3): ibv_query_port(ctx, port, &attr) and print the port's state
   * (ibv_port_state_str), active_mtu and max_mtu (step 4: in bytes) and link layer, then its
   * GID table (step 5: print_gids with attr.gid_tbl_len). */
}

/* Prints "device NAME", its node_guid, phys_port_cnt, max_qp, max_cqe, then each port. */
static void print_device(struct ibv_device *dev) {
  printf("device %s\n", ibv_get_device_name(dev));
  /* TODO(lab 1, step 2): open the device (ibv_open_device), ask it what it can do
   * (ibv_query_device fills struct ibv_device_attr) and print node_guid (ibv_get_device_guid:
   * mind its byte order), phys_port_cnt, max_qp and max_cqe. Then print_port() for each port
   * 1..phys_port_cnt. */
  (void)print_port;
  /* TODO(lab 1, step 6): close what you opened (ibv_close_device). */
}

int main(void) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n == 0)
    lab_die("no RDMA device found: on simnic, start NICs with `simnic up` and run this program with "
            "`simnic run -- ./devinfo`; on real hardware, check the RDMA driver (ibv_devices)");
  /* TODO(lab 1, step 1): call print_device() for every one of the n devices, not just the first. */
  print_device(list[0]);
  ibv_free_device_list(list);
  return 0;
}
