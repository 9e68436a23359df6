// `simnic up`'s link-layer options and the simulated subnet manager (link_layer.h).
#include "simnic/cli/link_layer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "simnic/abi/state_dir.h"

namespace simnic::cli {

namespace {

std::string read_file(const std::string& path, bool* ok) {
  std::ifstream in(path);
  *ok = bool(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string address_text(uint32_t ipv4) {
  return std::to_string(ipv4 >> 24) + "." + std::to_string((ipv4 >> 16) & 255) + "." +
         std::to_string((ipv4 >> 8) & 255) + "." + std::to_string(ipv4 & 255);
}

}  // namespace

const char* LinkLayerSetup::usage() {
  return "  --link-layer eth|ib  eth: RoCE ports (the default); ib: InfiniBand ports with LIDs, so\n"
         "                      address vectors without a GRH work (docs/link-layer.md)\n"
         "  --gid-table T       RoCE GID table: simple (one IPv4-mapped RoCE v2 GID, the default),\n"
         "                      rxe or mlx5 (the entries those devices list, mlx5's v2 at index 3)\n"
         "  --lid-map FILE      ib: the fabric's LIDs as \"LID ADDRESS [NAME]\" lines (NICs on other\n"
         "                      machines too); without it LIDs are given from 1 up\n";
}

int LinkLayerSetup::parse(const std::vector<std::string>& args, size_t& i) {
  const std::string& a = args[i];
  if (a != "--link-layer" && a != "--gid-table" && a != "--lid-map") return 0;
  if (i + 1 >= args.size()) {
    std::fprintf(stderr, "simnic up: %s needs a value\n", a.c_str());
    return -1;
  }
  const std::string v = args[++i];
  if (a == "--link-layer") {
    if (v != "ib" && v != "eth" && v != "infiniband" && v != "ethernet" && v != "roce") {
      std::fprintf(stderr, "simnic up: --link-layer is eth (RoCE) or ib (InfiniBand), not '%s'\n", v.c_str());
      return -1;
    }
    infiniband_ = v == "ib" || v == "infiniband";
  } else if (a == "--gid-table") {
    if (v != "simple" && v != "rxe" && v != "mlx5") {
      std::fprintf(stderr, "simnic up: --gid-table is simple, rxe or mlx5, not '%s'\n", v.c_str());
      return -1;
    }
    gid_table_ = v;
  } else {
    lid_map_ = v;
  }
  return 1;
}

bool LinkLayerSetup::begin(const std::string& dir) {
  dir_ = dir;
  if (!infiniband_) {
    if (!lid_map_.empty()) std::fprintf(stderr, "simnic up: --lid-map is for --link-layer ib\n");
    return lid_map_.empty();
  }
  if (!gid_table_.empty() && gid_table_ != "simple") {
    std::fprintf(stderr,
                 "simnic up: --gid-table %s lists a RoCE port's GIDs; an InfiniBand port has one GID "
                 "(fe80:: and its port GUID)\n",
                 gid_table_.c_str());
    return false;
  }
  bool ok = false;
  const std::string path = lid_map_.empty() ? abi::lid_map_path(dir) : lid_map_;
  const std::string text = read_file(path, &ok);
  if (!ok && !lid_map_.empty()) {
    std::fprintf(stderr, "simnic up: cannot read --lid-map %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  std::vector<std::string> errors;
  entries_ = abi::parse_lid_map(text, &errors);
  if (!lid_map_.empty() && !errors.empty()) {  // the user's file: every line must make sense
    for (const auto& e : errors) std::fprintf(stderr, "simnic up: %s, %s\n", lid_map_.c_str(), e.c_str());
    return false;
  }
  return true;
}

bool LinkLayerSetup::nic_args(const std::string& name, uint32_t ipv4, std::vector<std::string>* argv) {
  if (!gid_table_.empty()) argv->insert(argv->end(), {"--gid-table", gid_table_});
  if (!infiniband_) return true;
  uint16_t lid = 0;
  if (!lid_map_.empty()) {
    lid = abi::lid_of_address(entries_, ipv4);
    if (!lid) {
      std::fprintf(stderr, "simnic up: %s's address %s has no LID in %s\n", name.c_str(), address_text(ipv4).c_str(),
                   lid_map_.c_str());
      return false;
    }
    for (auto& e : entries_)
      if (e.lid == lid) e.name = name;
  } else {
    // The subnet manager: a NIC keeps the LID its name had, if still free; else the lowest free.
    uint16_t before = 0;
    for (const auto& e : entries_)
      if (e.name == name) before = e.lid;
    std::erase_if(entries_, [&](const abi::LidEntry& e) { return e.name == name || e.ipv4 == ipv4; });
    const bool free = before &&
                      std::none_of(entries_.begin(), entries_.end(), [&](const auto& e) { return e.lid == before; });
    lid = free ? before : abi::lowest_free_lid(entries_);
    if (!lid) return std::fprintf(stderr, "simnic up: no free LID left\n"), false;
    entries_.push_back({lid, ipv4, name});
  }
  // The SM sits on the port with the lowest LID, as when OpenSM runs on the first host.
  uint16_t sm = lid;
  for (const auto& e : entries_) sm = std::min(sm, e.lid);
  argv->insert(argv->end(), {"--link-layer", "ib", "--lid", std::to_string(lid), "--sm-lid", std::to_string(sm)});
  return true;
}

bool LinkLayerSetup::commit() {
  if (!infiniband_) return true;
  std::sort(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) { return a.lid < b.lid; });
  const std::string path = abi::lid_map_path(dir_), tmp = path + ".new";
  const std::string text = abi::format_lid_map(entries_);
  int fd = abi::create_private_file(tmp);  // never through a planted symlink
  bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == ssize_t(text.size());
  if (fd >= 0) ::close(fd);
  ok = ok && ::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok)
    std::fprintf(stderr, "simnic up: cannot write the LID registry %s: %s\n", path.c_str(), std::strerror(errno));
  return ok;
}

}  // namespace simnic::cli
