// Finding simnicd and the shim relative to `simnic` itself, so a build tree (build/bin,
// build/lib) and an installed prefix (bin, lib/simnic) both work without configuration.
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "simnic/abi/paths.h"
#include "simnic/abi/state_dir.h"
#include "simnic/cli/cli.h"

#ifndef SIMNIC_INSTALL_LIBDIR
#define SIMNIC_INSTALL_LIBDIR "lib"
#endif

namespace simnic::cli {
namespace {

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

}  // namespace

std::string self_dir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  std::string p = buf;
  return p.substr(0, p.rfind('/'));
}

std::string find_simnicd() {
  std::string p = self_dir() + "/simnicd";
  return ::access(p.c_str(), X_OK) == 0 ? p : "";
}

std::string find_shim_dir() {
  if (const char* d = std::getenv("SIMNIC_SHIM_DIR"); d && *d)
    return exists(std::string(d) + "/libibverbs.so.1") ? d : "";
  const std::string bin = self_dir();
  for (std::string dir : {bin + "/../lib", bin + "/../" SIMNIC_INSTALL_LIBDIR "/simnic", bin + "/../lib/simnic"}) {
    if (!exists(dir + "/libibverbs.so.1")) continue;
    char real[PATH_MAX];
    return ::realpath(dir.c_str(), real) ? std::string(real) : dir;
  }
  return "";
}

void exec_or_exit(const std::vector<std::string>& argv, const char* who) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  std::fprintf(stderr, "%s: cannot run %s: %s\n", who, args[0], std::strerror(errno));
  ::_exit(127);
}

std::string state_dir(bool create) {
  const std::string dir = abi::simnic_dir();
  bool missing = false;
  std::string bad = create ? abi::make_private_dir(dir) : abi::check_private_dir(dir, &missing);
  if (bad.empty() || missing) return dir;
  std::fprintf(stderr, "simnic: %s\n", bad.c_str());
  return "";
}

}  // namespace simnic::cli
