// LD_PRELOAD handling for libsimnic_devnode.so: `simnic run` prepends it, `simnic env` prints it,
// `--no-devnodes` / SIMNIC_DEVNODES=0 leave it out (and take out a copy an outer `simnic env` put).
#include "simnic/cli/devnodes.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace simnic::cli {
namespace {

// LD_PRELOAD's entries: ld.so splits them at spaces and colons (ld.so(8)).
std::vector<std::string> preload_entries(const std::string& preload) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : preload + ":") {
    if (c == ':' || c == ' ') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

bool is_devnode_library(const std::string& entry) {
  const std::string name = entry.substr(entry.rfind('/') + 1);
  return name == kDevnodeLibrary;
}

std::string devnode_library_in(const std::string& shim_dir) {
  const std::string lib = shim_dir + "/" + kDevnodeLibrary;
  return ::access(lib.c_str(), R_OK) == 0 ? lib : "";
}

// The library to preload, or "" with a warning on stderr when it is missing from the build.
std::string find_devnode_library(const std::string& shim_dir) {
  const std::string lib = devnode_library_in(shim_dir);
  if (lib.empty())
    std::fprintf(stderr,
                 "simnic: warning: %s/%s is missing, so programs that check /dev/infiniband (UCX) will "
                 "not see the NICs; build it (cmake --build build --target simnic_devnode) or pass --no-devnodes\n",
                 shim_dir.c_str(), kDevnodeLibrary);
  return lib;
}

}  // namespace

bool devnodes_wanted(bool no_devnodes_option) {
  const char* env = std::getenv("SIMNIC_DEVNODES");
  return !no_devnodes_option && !(env && std::strcmp(env, "0") == 0);
}

std::string preload_with_devnodes(const std::string& preload, const std::string& lib, bool on) {
  std::string out = on && !lib.empty() ? lib : "";
  for (const std::string& e : preload_entries(preload)) {
    if (is_devnode_library(e)) continue;
    out += (out.empty() ? "" : ":") + e;
  }
  return out;
}

void set_devnode_preload(const std::string& shim_dir, bool on) {
  const char* old = std::getenv("LD_PRELOAD");
  const std::string lib = on ? find_devnode_library(shim_dir) : "";
  const std::string preload = preload_with_devnodes(old ? old : "", lib, on);
  if (preload.empty()) ::unsetenv("LD_PRELOAD");
  else ::setenv("LD_PRELOAD", preload.c_str(), 1);
}

std::string devnode_env_line(const std::string& shim_dir, bool on) {
  const char* old = std::getenv("LD_PRELOAD");
  const std::string lib = on ? find_devnode_library(shim_dir) : "";
  const std::string preload = preload_with_devnodes(old ? old : "", lib, on);
  if (preload.empty()) return old && *old ? "unset LD_PRELOAD\n" : "";
  return "export LD_PRELOAD='" + preload + "'\n";
}

}  // namespace simnic::cli
