// A NIC's files in the layout of the kernel's /sys/class/infiniband/<device>/, under the
// device's ibdev_path (<simnic dir>/<name>/). rdma-core's providers and programs that read a
// device's attributes the sysfs way (ibv_read_sysfs_file(dev->ibdev_path, ...),
// ibv_read_ibdev_sysfs_file) find there what they find for rxe: node_type, node_guid,
// ports/1/state, link_layer, gids/N, and gid_attrs/types/N and gid_attrs/ndevs/N, which name the
// network interface a GID belongs to (lo for a NIC on 127/8).
#pragma once
#include <string>

#include "simnic/core/device.h"

namespace simnic::io {

// Writes the tree for `dev` under `root` (created, mode 0755 in the private simnic directory).
// Returns "" or what failed; a failure costs programs only the files, never the NIC.
std::string write_sysfs_tree(const std::string& root, const core::Device& dev, const std::string& netdev);

// Removes what write_sysfs_tree wrote (only those names: nothing else under `root` is touched).
void remove_sysfs_tree(const std::string& root, uint32_t gid_tbl_len);

}  // namespace simnic::io
