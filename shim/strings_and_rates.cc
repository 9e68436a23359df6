// The pure helpers of libibverbs: enum-to-string, rate conversions, sysfs reads, fork support.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "shim/shim.h"
#include "simnic/abi/paths.h"
#include "simnic/abi/wc_status.h"

namespace {

struct RateRow {
  ibv_rate rate;
  int mult;  // in units of 2.5 Gb/s; -1 when the rate is not a multiple
  int mbps;
};

// IBA's static rate encodings with their multipliers and data rates.
constexpr RateRow kRates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},    {IBV_RATE_5_GBPS, 2, 5000},      {IBV_RATE_10_GBPS, 4, 10000},
    {IBV_RATE_20_GBPS, 8, 20000},    {IBV_RATE_30_GBPS, 12, 30000},   {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},   {IBV_RATE_80_GBPS, 32, 80000},   {IBV_RATE_120_GBPS, 48, 120000},
    {IBV_RATE_14_GBPS, -1, 14062},   {IBV_RATE_56_GBPS, -1, 56250},   {IBV_RATE_112_GBPS, -1, 112500},
    {IBV_RATE_168_GBPS, -1, 168750}, {IBV_RATE_25_GBPS, -1, 25781},   {IBV_RATE_100_GBPS, -1, 103125},
    {IBV_RATE_200_GBPS, -1, 206250}, {IBV_RATE_300_GBPS, -1, 309375}, {IBV_RATE_28_GBPS, -1, 28125},
    {IBV_RATE_50_GBPS, -1, 53125},   {IBV_RATE_400_GBPS, -1, 425000}, {IBV_RATE_600_GBPS, -1, 637500},
};

template <size_t N>
const char* lookup(const char* const (&names)[N], int i) {
  return i >= 0 && size_t(i) < N && names[i] ? names[i] : "unknown";
}

}  // namespace

extern "C" {

const char* ibv_wc_status_str(enum ibv_wc_status status) { return simnic::abi::wc_status_str(status); }

const char* ibv_node_type_str(enum ibv_node_type node_type) {
  static const char* const kNames[] = {nullptr,
                                       "InfiniBand channel adapter",
                                       "InfiniBand switch",
                                       "InfiniBand router",
                                       "iWARP NIC",
                                       "usNIC",
                                       "usNIC UDP",
                                       "unspecified"};
  return lookup(kNames, node_type);
}

const char* ibv_port_state_str(enum ibv_port_state port_state) {
  static const char* const kNames[] = {"no state change (NOP)", "down", "init", "armed", "active", "active defer"};
  return lookup(kNames, port_state);
}

const char* ibv_event_type_str(enum ibv_event_type event) {
  static const char* const kNames[] = {"CQ error",
                                       "local work queue catastrophic error",
                                       "invalid request local work queue error",
                                       "local access violation work queue error",
                                       "communication established",
                                       "send queue drained",
                                       "path migrated",
                                       "path migration request error",
                                       "local catastrophic error",
                                       "port active",
                                       "port error",
                                       "LID change",
                                       "P_Key change",
                                       "SM change",
                                       "SRQ catastrophic error",
                                       "SRQ limit reached",
                                       "last WQE reached",
                                       "client reregistration",
                                       "GID table change",
                                       "WQ fatal"};
  return lookup(kNames, event);
}

int ibv_rate_to_mult(enum ibv_rate rate) {
  for (const auto& r : kRates)
    if (r.rate == rate) return r.mult;
  return -1;
}

enum ibv_rate mult_to_ibv_rate(int mult) {
  for (const auto& r : kRates)
    if (r.mult == mult) return r.rate;
  return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(enum ibv_rate rate) {
  for (const auto& r : kRates)
    if (r.rate == rate) return r.mbps;
  return -1;
}

enum ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const auto& r : kRates)
    if (r.mbps == mbps) return r.rate;
  return IBV_RATE_MAX;
}

// simnic needs no fork protection: simnicd reaches memory by pid, not by pinned pages.
int ibv_fork_init(void) { return 0; }
enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
int ibv_dontfork_range(void*, size_t) { return 0; }
int ibv_dofork_range(void*, size_t) { return 0; }

// rdma-core's rule first: $SYSFS_PATH without its trailing slashes, unless the program runs
// setuid. Otherwise the simnic directory's sysfs root when simnicd made one: it holds
// class/infiniband/<nic> for every running NIC (and class/net -> /sys/class/net), so
// programs that look for the devices the sysfs way find them (Open MPI's openib BTL gives up
// when <sysfs>/class/infiniband is no directory). "/sys" when neither exists. Computed once, as
// rdma-core does.
const char* ibv_get_sysfs_path(void) {
  static const std::string path = [] {
    const char* env = ::getuid() == ::geteuid() ? std::getenv("SYSFS_PATH") : nullptr;
    if (env) {
      std::string p = env;
      while (!p.empty() && p.back() == '/') p.pop_back();
      return p;
    }
    const std::string own = simnic::abi::sysfs_root_path(simnic::abi::simnic_dir());
    struct stat st {};
    return ::stat((own + "/class/infiniband").c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? own : std::string("/sys");
  }();
  return path.c_str();
}

int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  char path[512];
  std::snprintf(path, sizeof path, "%s/%s", dir, file);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = ::read(fd, buf, size);
  ::close(fd);
  if (n <= 0) return -1;
  if (size_t(n) == size) --n;
  buf[n] = '\0';
  if (n > 0 && buf[n - 1] == '\n') buf[--n] = '\0';
  return int(n);
}

// IBVERBS_PRIVATE_34: reads <ibdev_path>/<file> of a device.
int ibv_read_ibdev_sysfs_file(char* buf, size_t size, struct ibv_device* dev, const char* fmt, ...) {
  (void)buf;
  (void)size;
  (void)dev;
  (void)fmt;
  errno = ENOENT;  // simulated devices have no sysfs entries
  return -1;
}

}  // extern "C"
