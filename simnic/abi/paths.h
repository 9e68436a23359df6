// Where simnic's per-user sockets live. Shared by simnicd, the shim and the `simnic` tool.
#pragma once
#include <cstdlib>
#include <string>
#include <unistd.h>

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
inline std::string pid_file_path(const std::string& dir, const std::string& name) {
  return dir + "/" + name + ".pid";
}

constexpr const char* kControlSocketSuffix = ".sock";

}  // namespace simnic::abi
