// Device discovery: the devices are the NICs whose control sockets answer in the user's simnic
// directory, the way rdma-core's are the uverbs devices in sysfs.
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "shim/shim.h"
#include "simnic/abi/paths.h"
#include "simnic/abi/state_dir.h"

namespace simnic::shim {
namespace {

// Devices are kept for the life of the process (rdma-core caches them too), so pointers from
// an earlier ibv_get_device_list stay valid after ibv_free_device_list.
std::mutex g_mu;
std::vector<std::unique_ptr<ShimDevice>> g_devices;

// Asks a NIC who it is over a short-lived, query-only control connection.
bool probe(const std::string& path, abi::HelloReply* out) {
  std::string why;
  int fd = abi::connect_nic(path, &why);
  if (fd < 0) {
    if (!why.empty()) warn("%s", why.c_str());  // someone else's socket: say so, not just skip
    return false;
  }
  timeval tv{2, 0};  // a hung daemon must not hang ibv_get_device_list
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  int st = abi::call_fixed(fd, abi::Op::Hello, abi::HelloReq{abi::kAbiVersion, 0}, out);
  if (st != 0 && !abi::last_refusal().empty()) warn("%s", abi::last_refusal().c_str());  // e.g. over a share
  ::close(fd);
  return st == 0;
}

ShimDevice* find_or_add(const std::string& name, const std::string& path, const abi::HelloReply& hello) {
  for (auto& d : g_devices)
    if (name == d->dev.name) {
      d->node_guid_be = hello.node_guid;
      return d.get();
    }
  auto d = std::make_unique<ShimDevice>();
  std::memset(d.get(), 0, sizeof(ShimDevice));
  d->dev.node_type = IBV_NODE_CA;
  d->dev.transport_type = IBV_TRANSPORT_IB;  // RoCE devices report the IB transport
  std::snprintf(d->dev.name, sizeof d->dev.name, "%s", name.c_str());
  std::snprintf(d->dev.dev_name, sizeof d->dev.dev_name, "uverbs-%s", name.c_str());
  std::string dir = path.substr(0, path.rfind('/'));
  std::snprintf(d->dev.dev_path, sizeof d->dev.dev_path, "%s/%s", dir.c_str(), name.c_str());
  std::snprintf(d->dev.ibdev_path, sizeof d->dev.ibdev_path, "%s/%s", dir.c_str(), name.c_str());
  std::snprintf(d->socket_path, sizeof d->socket_path, "%s", path.c_str());
  d->node_guid_be = hello.node_guid;
  d->index = int(g_devices.size());
  g_devices.push_back(std::move(d));
  return g_devices.back().get();
}

// debug() and warn(): one line on stderr, prefixed as every message of the shim.
void say(const char* fmt, va_list ap) {
  std::fputs("simnic: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
}
}  // namespace

void debug(const char* fmt, ...) {
  static const bool on = std::getenv("SIMNIC_DEBUG") != nullptr;
  if (!on) return;
  va_list ap;
  va_start(ap, fmt);
  say(fmt, ap);
  va_end(ap);
}

void warn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say(fmt, ap);
  va_end(ap);
}

}  // namespace simnic::shim

using namespace simnic::shim;

extern "C" {

struct ibv_device** ibv_get_device_list(int* num_devices) {
  std::string dir = simnic::abi::simnic_dir();
  std::vector<std::string> names;
  bool missing = false;
  if (std::string bad = simnic::abi::check_private_dir(dir, &missing); !bad.empty()) {
    if (!missing) warn("%s; no device is used from it", bad.c_str());
  } else {
    names = simnic::abi::nic_names_in(dir);
  }

  std::vector<ibv_device*> found;
  {
    std::lock_guard lock(g_mu);
    for (const auto& name : names) {
      std::string path = simnic::abi::control_socket_path(dir, name);
      simnic::abi::HelloReply hello{};
      if (!probe(path, &hello)) {
        debug("%s: no answer, skipped (a NIC that is not running)", path.c_str());
        continue;
      }
      found.push_back(&find_or_add(name, path, hello)->dev);
    }
  }
  debug("%zu device(s) in %s", found.size(), dir.c_str());
  auto** list = static_cast<ibv_device**>(std::calloc(found.size() + 1, sizeof(ibv_device*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  std::copy(found.begin(), found.end(), list);
  if (num_devices) *num_devices = int(found.size());
  return list;
}

void ibv_free_device_list(struct ibv_device** list) { std::free(list); }

const char* ibv_get_device_name(struct ibv_device* device) { return device ? device->name : nullptr; }

__be64 ibv_get_device_guid(struct ibv_device* device) { return to_shim(device)->node_guid_be; }

int ibv_get_device_index(struct ibv_device* device) { return to_shim(device)->index; }

}  // extern "C"

#include "shim/symver.h"
SIMNIC_DEFAULT_VERSION_1_1(ibv_get_device_list);
SIMNIC_DEFAULT_VERSION_1_1(ibv_free_device_list);
SIMNIC_DEFAULT_VERSION_1_1(ibv_get_device_name);
SIMNIC_DEFAULT_VERSION_1_1(ibv_get_device_guid);
