// Prints a device's GID table the ways rdma-core offers it: ibv_query_gid_table, then for
// each index up to gid_tbl_len ibv_query_gid_ex, ibv_query_gid and ibv_query_gid_type. Used by
// tests/integration/link_layer_test.cc; runs unchanged on a real NIC.
//   simnic-gid-query DEVICE
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

extern "C" int ibv_query_gid_type(struct ibv_context*, uint8_t, unsigned int, uint32_t*);  // infiniband/driver.h

namespace {

const char* type_name(uint32_t t) {
  return t == IBV_GID_TYPE_IB ? "IB" : t == IBV_GID_TYPE_ROCE_V1 ? "RoCE-v1" : t == IBV_GID_TYPE_ROCE_V2 ? "RoCE-v2" : "?";
}

std::string text(const ibv_gid& g) {
  char s[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, g.raw, s, sizeof s);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: %s DEVICE\n", argv[0]), 2;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = nullptr;
  for (int i = 0; list && i < n && !ctx; ++i)
    if (std::strcmp(ibv_get_device_name(list[i]), argv[1]) == 0) ctx = ibv_open_device(list[i]);
  if (!ctx) return std::fprintf(stderr, "cannot open %s\n", argv[1]), 1;
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
  }
  ibv_gid_entry e{};
  std::printf("past the table %s\n", strerrorname_np(ibv_query_gid_ex(ctx, 1, uint32_t(port.gid_tbl_len), &e, 0)));
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return 0;
}
