// Prints a device's GID table the ways rdma-core offers it: ibv_query_gid_table, then for
// each index up to gid_tbl_len ibv_query_gid_ex, ibv_query_gid and ibv_query_gid_type, and the
// network interface of each GID both ways a program finds it: ibv_query_gid_ex's ndev_ifindex,
// and the device's sysfs files (<ibdev_path>/ports/1/gid_attrs/ndevs/N, and the device found
// under ibv_get_sysfs_path()'s class/infiniband). Used by
// tests/integration/link_layer_test.cc; runs unchanged on a real NIC.
//   simnic-gid-query DEVICE
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <net/if.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "check_util.h"

extern "C" int ibv_query_gid_type(struct ibv_context*, uint8_t, unsigned int, uint32_t*);       // infiniband/driver.h
extern "C" int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size);  // likewise
extern "C" const char* ibv_get_sysfs_path(void);                                                // likewise

namespace {

const char* type_name(uint32_t t) {
  return t == IBV_GID_TYPE_IB        ? "IB"
         : t == IBV_GID_TYPE_ROCE_V1 ? "RoCE-v1"
         : t == IBV_GID_TYPE_ROCE_V2 ? "RoCE-v2"
                                     : "?";
}

// "<ndev_ifindex's name> sysfs <ndevs/N> <types/N>", "-" where there is none.
std::string interface_of(ibv_device* dev, const ibv_gid_entry& e, int index) {
  char name[IF_NAMESIZE] = "-", ndev[64] = "-", type[64] = "-";
  if (e.ndev_ifindex && !if_indextoname(e.ndev_ifindex, name)) std::strcpy(name, "?");
  const std::string n = std::to_string(index);
  if (ibv_read_sysfs_file(dev->ibdev_path, ("ports/1/gid_attrs/ndevs/" + n).c_str(), ndev, sizeof ndev) < 0)
    std::strcpy(ndev, "-");
  if (ibv_read_sysfs_file(dev->ibdev_path, ("ports/1/gid_attrs/types/" + n).c_str(), type, sizeof type) < 0)
    std::strcpy(type, "-");
  return std::string(name) + " sysfs " + ndev + " " + type;
}

std::string text(const ibv_gid& g) {
  char s[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, g.raw, s, sizeof s);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: %s DEVICE\n", argv[0]), 2;
  ibv_context* ctx = check::open_dev(argv[1]);
  if (!ctx) return std::fprintf(stderr, "cannot open %s\n", argv[1]), 1;
  ibv_device* dev = ctx->device;  // an open context holds its device
  ibv_port_attr port{};
  if (ibv_query_port(ctx, 1, &port)) return std::perror("ibv_query_port"), 1;
  std::printf("gid_tbl_len %d\n", port.gid_tbl_len);
  std::vector<ibv_gid_entry> entries(port.gid_tbl_len);
  ssize_t valid = ibv_query_gid_table(ctx, entries.data(), entries.size(), 0);
  std::printf("table %zd\n", valid);
  for (ssize_t i = 0; i < valid; ++i)
    std::printf("table[%zd] index %u port %u %s %s\n", i, entries[i].gid_index, entries[i].port_num,
                text(entries[i].gid).c_str(), type_name(entries[i].gid_type));
  if (valid > 1) std::printf("table too small %zd\n", ibv_query_gid_table(ctx, entries.data(), size_t(valid - 1), 0));
  // Each slot: the entry, or ENODATA for an empty one; EINVAL past the table.
  for (int i = 0; i <= port.gid_tbl_len && i < valid + 2; ++i) {
    ibv_gid_entry e{};
    int ex = ibv_query_gid_ex(ctx, 1, uint32_t(i), &e, 0);
    ibv_gid g;
    std::memset(&g, 0xaa, sizeof g);
    int q = ibv_query_gid(ctx, 1, i, &g);
    uint32_t type = 7;
    int qt = ibv_query_gid_type(ctx, 1, unsigned(i), &type);
    std::printf("gid %d ex %s query %d %s type %d %u\n", i, ex == 0 ? type_name(e.gid_type) : strerrorname_np(ex), q,
                q == 0 ? text(g).c_str() : "-", qt, type);
    if (ex == 0) std::printf("ndev %d %s\n", i, interface_of(dev, e, i).c_str());
  }
  ibv_gid_entry e{};
  std::printf("past the table %s\n", strerrorname_np(ibv_query_gid_ex(ctx, 1, uint32_t(port.gid_tbl_len), &e, 0)));
  char layer[64] = "-", node_type[64] = "-";
  ibv_read_sysfs_file(dev->ibdev_path, "ports/1/link_layer", layer, sizeof layer);
  ibv_read_sysfs_file(dev->ibdev_path, "node_type", node_type, sizeof node_type);
  std::printf("sysfs link_layer %s node_type %s\n", layer, node_type);
  // The sysfs way of finding the device (Open MPI's openib BTL): <sysfs root>/class/infiniband/<name>.
  char by_class[64] = "-";
  const std::string root = ibv_get_sysfs_path();
  ibv_read_sysfs_file((root + "/class/infiniband/" + dev->name).c_str(), "node_type", by_class, sizeof by_class);
  std::printf("sysfs root %s class/infiniband/%s/node_type %s\n", root.c_str(), dev->name, by_class);
  ibv_close_device(ctx);
  return 0;
}
