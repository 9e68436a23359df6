// See sysfs_tree.h. Values are formatted as the kernel's ib_core sysfs attributes print them
// (drivers/infiniband/core/sysfs.c: state_show, phys_state_show, link_layer_show, show_port_gid,
// print_gid_type / print_ndev; device.c node_type_show and node_guid_show).
#include "simnic/io/sysfs_tree.h"

#include "simnic/abi/paths.h"
#include "simnic/core/text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <endian.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace simnic::io {
namespace {

const char* const kDirs[] = {
    "ports", "ports/1", "ports/1/gids", "ports/1/gid_attrs", "ports/1/gid_attrs/types", "ports/1/gid_attrs/ndevs"};

bool write_file(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const std::string line = text + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == ssize_t(line.size());
  return ::close(fd) == 0 && ok;
}

// 0002:c9ff:fe00:0001: a GUID as node_guid_show prints it (four 16-bit groups).
std::string guid_text(uint64_t guid_be) {
  const uint64_t g = be64toh(guid_be);
  char s[24];
  std::snprintf(s, sizeof s, "%04x:%04x:%04x:%04x", unsigned(g >> 48), unsigned(g >> 32) & 0xffff,
                unsigned(g >> 16) & 0xffff, unsigned(g) & 0xffff);
  return s;
}

// fe80:0000:0000:0000:0253:7fff:fe00:0001: show_port_gid's %pI6 (eight groups, no compression).
std::string gid_text(const ibv_gid& gid) {
  char s[48];
  int n = 0;
  for (int i = 0; i < 16; i += 2)
    n += std::snprintf(s + n, sizeof s - n, "%s%02x%02x", i ? ":" : "", gid.raw[i], gid.raw[i + 1]);
  return s;
}

const char* port_state_text(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_DOWN: return "1: DOWN";
    case IBV_PORT_INIT: return "2: INIT";
    case IBV_PORT_ARMED: return "3: ARMED";
    case IBV_PORT_ACTIVE: return "4: ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "5: ACTIVE_DEFER";
    default: return "0: NOP";
  }
}

std::string index_path(const std::string& root, const char* dir, uint32_t i) {
  return root + "/ports/1/" + dir + "/" + std::to_string(i);
}

// gids/N for every slot of the table (an empty one reads as the zero GID, as in the kernel);
// gid_attrs/types/N and ndevs/N only for filled slots (the kernel answers EINVAL for the others).
bool write_gids(const std::string& root, const core::Device& dev, uint32_t length, const std::string& netdev) {
  bool ok = true;
  for (uint32_t i = 0; i < length; ++i) {
    core::GidEntry e;
    const bool filled = dev.addressing().query_gid(i, &e) == 0;
    ok &= write_file(index_path(root, "gids", i), gid_text(filled ? e.gid : ibv_gid{}));
    if (!filled) continue;
    ok &= write_file(index_path(root, "gid_attrs/types", i), e.type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "IB/RoCE v1");
    if (e.type != IBV_GID_TYPE_IB) ok &= write_file(index_path(root, "gid_attrs/ndevs", i), netdev);
  }
  return ok;
}

// The device's and port's attribute files under root (besides the per-GID ones), as the
// kernel lists them: one list, for writing and for removing.
constexpr const char* kFiles[] = {"node_type",   "node_guid",     "sys_image_guid",     "fw_ver",
                                  "hca_type",    "ports/1/state", "ports/1/phys_state", "ports/1/link_layer",
                                  "ports/1/lid", "ports/1/sm_lid"};

// What each of kFiles holds, in kFiles' order.
std::vector<std::string> attribute_texts(const core::Device& dev) {
  const ibv_device_attr a = dev.addressing().device_attr();
  const ibv_port_attr p = dev.addressing().port_attr();
  const bool ib = p.link_layer == IBV_LINK_LAYER_INFINIBAND;
  return {"1: CA",
          guid_text(a.node_guid),
          guid_text(a.sys_image_guid),
          a.fw_ver,
          "simnic",
          port_state_text(p.state),
          "5: LinkUp",
          ib ? "InfiniBand" : "Ethernet",
          core::hex(p.lid),
          core::hex(p.sm_lid)};
}

}  // namespace

std::string write_sysfs_tree(const std::string& root, const core::Device& dev, const std::string& netdev) {
  if (::mkdir(root.c_str(), 0755) != 0 && errno != EEXIST) return root + ": " + std::strerror(errno);
  for (const char* d : kDirs)
    if (::mkdir((root + "/" + d).c_str(), 0755) != 0 && errno != EEXIST)
      return root + "/" + d + ": " + std::strerror(errno);
  const std::vector<std::string> texts = attribute_texts(dev);
  bool ok = texts.size() == std::size(kFiles);
  for (size_t i = 0; ok && i < texts.size(); ++i) ok = write_file(root + "/" + kFiles[i], texts[i]);
  ok &= write_gids(root, dev, dev.addressing().port_attr().gid_tbl_len, netdev);
  return ok ? "" : root + ": a file could not be written";
}

std::string link_sysfs_class_entry(const std::string& dir, const std::string& name) {
  const std::string root = abi::sysfs_root_path(dir);
  for (const std::string& d : {root, root + "/class", root + "/class/infiniband"})
    if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) return d + ": " + std::strerror(errno);
  // Two NICs may start at once: whoever makes class/net first wins, EEXIST is fine.
  if (::symlink("/sys/class/net", (root + "/class/net").c_str()) != 0 && errno != EEXIST)
    return root + "/class/net: " + std::strerror(errno);
  const std::string link = root + "/class/infiniband/" + name;
  ::unlink(link.c_str());  // left by a NIC of that name that was killed
  if (::symlink(("../../../" + name).c_str(), link.c_str()) != 0) return link + ": " + std::strerror(errno);
  return "";
}

void unlink_sysfs_class_entry(const std::string& dir, const std::string& name) {
  const std::string root = abi::sysfs_root_path(dir);
  ::unlink((root + "/class/infiniband/" + name).c_str());
  // rmdir fails while another NIC's link is there: then the root stays, as it should.
  if (::rmdir((root + "/class/infiniband").c_str()) != 0) return;
  ::unlink((root + "/class/net").c_str());
  ::rmdir((root + "/class").c_str());
  ::rmdir(root.c_str());
}

void remove_sysfs_tree(const std::string& root, uint32_t gid_tbl_len) {
  for (const char* dir : {"gids", "gid_attrs/types", "gid_attrs/ndevs"})
    for (uint32_t i = 0; i < gid_tbl_len; ++i) ::unlink(index_path(root, dir, i).c_str());
  for (const char* f : kFiles) ::unlink((root + "/" + f).c_str());
  for (int i = int(std::size(kDirs)) - 1; i >= 0; --i) ::rmdir((root + "/" + kDirs[i]).c_str());
  ::rmdir(root.c_str());
}

}  // namespace simnic::io
