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

// The simnic directory's sysfs root (abi::sysfs_root_path), which the shim's ibv_get_sysfs_path()
// returns when it exists: class/infiniband/<name> links to each running NIC's tree
// (../../../<name>), as /sys/class/infiniband/<name> does to the device, and class/net links to
// /sys/class/net so netdev lookups through that root still reach the kernel's.
// Adds NIC `name` to <dir>/sysfs/class/infiniband (creating the root). Returns "" or what failed.
std::string link_sysfs_class_entry(const std::string& dir, const std::string& name);

// Removes NIC `name`'s link, and the root's directories once no NIC is left in it.
void unlink_sysfs_class_entry(const std::string& dir, const std::string& name);

}  // namespace simnic::io
