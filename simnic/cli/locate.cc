// Finding simnicd and the shim relative to `simnic` itself, so a build tree (build/bin,
// build/lib) and an installed prefix (bin, lib/simnic) both work without configuration.
#include <dirent.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "simnic/abi/paths.h"
#include "simnic/abi/seqpacket.h"
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
  if (const char* d = std::getenv("SIMNIC_SHIM_DIR"); d && *d) return exists(std::string(d) + "/libibverbs.so.1") ? d : "";
  const std::string bin = self_dir();
  for (std::string dir : {bin + "/../lib", bin + "/../" SIMNIC_INSTALL_LIBDIR "/simnic", bin + "/../lib/simnic"}) {
    if (!exists(dir + "/libibverbs.so.1")) continue;
    char real[PATH_MAX];
    return ::realpath(dir.c_str(), real) ? std::string(real) : dir;
  }
  return "";
}

std::string state_dir(bool create) {
  const std::string dir = abi::simnic_dir();
  bool missing = false;
  std::string bad = create ? abi::make_private_dir(dir) : abi::check_private_dir(dir, &missing);
  if (bad.empty() || missing) return dir;
  std::fprintf(stderr, "simnic: %s\n", bad.c_str());
  return "";
}

std::vector<std::string> list_nics(const std::string& dir) {
  std::vector<std::string> names;
  const std::string suffix = abi::kControlSocketSuffix;
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

int query_nic(const std::string& dir, const std::string& name, unsigned op, const std::string& body,
              std::string* text) {
  std::string why;
  int fd = abi::connect_nic(abi::control_socket_path(dir, name), &why);
  if (fd < 0) {
    int e = errno;
    if (!why.empty()) std::fprintf(stderr, "simnic: %s\n", why.c_str());
    return e;
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  abi::HelloReply hello{};
  int st = abi::call_fixed(fd, abi::Op::Hello, abi::HelloReq{abi::kAbiVersion, 0}, &hello);
  if (st == 0 && op != unsigned(abi::Op::Hello)) {
    std::vector<uint8_t> reply;
    st = abi::call(fd, abi::Op(op), body.data(), body.size(), reply);
    if (text) text->assign(reply.begin(), reply.end());
  }
  ::close(fd);
  return st;
}

std::map<std::string, std::string> parse_kv(const std::string& text) {
  std::map<std::string, std::string> kv;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto sp = line.find(' ');
    if (sp != std::string::npos) kv[line.substr(0, sp)] = line.substr(sp + 1);
  }
  return kv;
}

}  // namespace simnic::cli
