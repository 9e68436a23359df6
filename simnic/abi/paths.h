// Where simnic's per-user sockets live. Shared by simnicd, the shim and the `simnic` tool.
#pragma once
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace simnic::abi {

// $SIMNIC_DIR, else $XDG_RUNTIME_DIR/simnic, else /tmp/simnic-$UID (mode 0700).
inline std::string simnic_dir() {
  if (const char* d = std::getenv("SIMNIC_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x) return std::string(x) + "/simnic";
  return "/tmp/simnic-" + std::to_string(::getuid());
}

// The control socket of NIC `name`: the uverbs-like slow path.
inline std::string control_socket_path(const std::string& dir, const std::string& name) {
  return dir + "/" + name + ".sock";
}

// The pid file `simnic up` writes for each NIC it starts.
inline std::string pid_file_path(const std::string& dir, const std::string& name) { return dir + "/" + name + ".pid"; }

// The NICs' sysfs root in `dir`: class/infiniband/<name> for each running NIC (simnicd keeps it,
// simnic/io/sysfs_tree.h), what the shim's ibv_get_sysfs_path() returns. No NIC may be named so.
constexpr const char* kSysfsRootName = "sysfs";
inline std::string sysfs_root_path(const std::string& dir) { return dir + "/" + kSysfsRootName; }

constexpr const char* kControlSocketSuffix = ".sock";

// The NICs whose control sockets are in `dir`, sorted by name (whether they answer is the
// caller's question): ibv_get_device_list, `simnic status`, simnic-viz.
inline std::vector<std::string> nic_names_in(const std::string& dir) {
  std::vector<std::string> names;
  const std::string suffix = kControlSocketSuffix;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
        names.push_back(n.substr(0, n.size() - suffix.size()));
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace simnic::abi
