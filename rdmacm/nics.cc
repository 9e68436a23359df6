// The NICs librdmacm can bind to: the simnic NICs whose control sockets answer in the simnic
// directory (the same ones the verbs shim lists), each with its IPv4 address from Hello. An IP
// address names a NIC the way the kernel's rdma_translate_ip finds the device of a netdev.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "rdmacm/cma.h"
#include "simnic/abi/paths.h"
#include "simnic/abi/seqpacket.h"
#include "simnic/abi/state_dir.h"

namespace simnic::rdmacm {
namespace {

std::mutex g_mu;
std::vector<std::unique_ptr<Nic>> g_nics;  // never freed: ids and events point at them

uint32_t host_ip(const abi::HelloReply& h) {
  uint32_t be;
  std::memcpy(&be, &h.ipv4, 4);
  return ntohl(be);
}

// Lists the NICs of the simnic directory (g_mu held).
void scan_locked() {
  const std::string dir = abi::simnic_dir();
  if (!abi::check_private_dir(dir).empty()) return;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    const std::string suffix = abi::kControlSocketSuffix;
    if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      names.push_back(n.substr(0, n.size() - suffix.size()));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    if (std::any_of(g_nics.begin(), g_nics.end(), [&](auto& n) { return n->name == name; })) continue;
    const std::string path = abi::control_socket_path(dir, name);
    int fd = abi::connect_nic(path, nullptr);
    if (fd < 0) continue;
    abi::HelloReply hello{};
    timeval tv{2, 0};  // a hung NIC must not hang address resolution
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (abi::call_fixed(fd, abi::Op::Hello, abi::HelloReq{abi::kAbiVersion, 0}, &hello) != 0) {
      ::close(fd);
      continue;
    }
    timeval none{0, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
    auto nic = std::make_unique<Nic>();
    nic->name = name;
    nic->socket_path = path;
    nic->ipv4 = host_ip(hello);
    nic->fd = fd;  // this query-only connection becomes the NIC's CM connection
    g_nics.push_back(std::move(nic));
  }
}

Nic* find_locked(uint32_t ip) {
  for (auto& n : g_nics)
    if (n->ipv4 == ip) return n.get();
  return nullptr;
}

}  // namespace

void explain(const char* fmt, ...) {
  const char* e = std::getenv("SIMNIC_EXPLAIN");
  const char* q = std::getenv("SIMNIC_QUIET");
  if (!e || std::strcmp(e, "1") != 0 || (q && std::strcmp(q, "1") == 0)) return;
  va_list ap;
  va_start(ap, fmt);
  std::fputs("simnic: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
}

Nic* nic_by_ip(uint32_t ip) {
  std::lock_guard lock(g_mu);
  if (Nic* n = find_locked(ip)) return n;
  scan_locked();
  return find_locked(ip);
}

std::vector<Nic*> all_nics() {
  std::lock_guard lock(g_mu);
  scan_locked();
  std::vector<Nic*> out;
  for (auto& n : g_nics) out.push_back(n.get());
  return out;
}

// The NIC an id without a source address uses to reach dst: $SIMNIC_CM_DEVICE if set (the
// name of a NIC: the "host" the program runs on), else the NIC that owns dst (a local
// destination goes through its own device, as the kernel's loopback does), else the first.
Nic* nic_for_destination(uint32_t dst) {
  std::vector<Nic*> nics = all_nics();
  if (nics.empty()) return nullptr;
  if (const char* want = std::getenv("SIMNIC_CM_DEVICE"); want && *want) {
    for (Nic* n : nics)
      if (n->name == want) return n;
    explain("SIMNIC_CM_DEVICE=%s names no running NIC; choosing by address", want);
  }
  for (Nic* n : nics)
    if (n->ipv4 == dst) return n;
  return nics.front();
}

// The verbs context comes from the shim (simnic's libibverbs): id->verbs must be a context
// the program can create QPs, CQs and MRs on.
int open_nic(Nic* nic) {
  std::lock_guard lock(nic->mu);
  if (nic->verbs) return 0;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return errno ? errno : ENODEV;
  for (int i = 0; i < n && !nic->verbs; ++i)
    if (nic->name == ibv_get_device_name(list[i])) nic->verbs = ibv_open_device(list[i]);
  ibv_free_device_list(list);
  if (!nic->verbs) return ENODEV;
  ibv_query_device(nic->verbs, &nic->attr);
  nic->pd = ibv_alloc_pd(nic->verbs);
  return nic->pd ? 0 : ENOMEM;
}

int nic_call(Nic* nic, abi::Op op, const void* req, size_t len, void* reply, size_t reply_len,
             const std::vector<int>& fds) {
  std::lock_guard lock(nic->mu);
  std::vector<uint8_t> body;
  int st = abi::call(nic->fd, op, req, len, body, fds);
  if (st != 0) {
    if (!abi::last_refusal().empty()) explain("%s", abi::last_refusal().c_str());
    return st;
  }
  if (reply) {
    if (body.size() != reply_len) return EPROTO;
    std::memcpy(reply, body.data(), reply_len);
  }
  return 0;
}

int attach_channel(CmaChannel* ch, Nic* nic, uint32_t* handle) {
  for (auto& [n, h] : ch->attached)
    if (n == nic) {
      *handle = h;
      return 0;
    }
  abi::HandleReply rep{};
  int st = nic_call(nic, abi::Op::CmAttachChannel, nullptr, 0, &rep, sizeof rep, {ch->write_fd});
  if (st) return st;
  ch->attached.emplace_back(nic, rep.handle);
  *handle = rep.handle;
  return 0;
}

}  // namespace simnic::rdmacm
