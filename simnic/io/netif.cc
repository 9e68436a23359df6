#include "simnic/io/netif.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace simnic::io {

namespace {

// SIOCGIFMTU works in the caller's network namespace, where /sys/class/net may show another's.
uint32_t link_mtu(const std::string& name) {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  ifreq req{};
  std::strncpy(req.ifr_name, name.c_str(), IFNAMSIZ - 1);
  int rc = ::ioctl(fd, SIOCGIFMTU, &req);
  ::close(fd);
  return rc == 0 && req.ifr_mtu > 0 ? uint32_t(req.ifr_mtu) : 0;
}

// The first IPv4 address of interface `name` (when `want` is 0), or the interface holding
// `want`, from getifaddrs (which lists addresses in the kernel's order, primary first).
std::optional<LocalInterface> find(const std::string& name, uint32_t want, std::string* why) {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) {
    *why = std::string("cannot list the network interfaces: ") + std::strerror(errno);
    return std::nullopt;
  }
  std::optional<LocalInterface> found;
  bool name_seen = false;
  for (ifaddrs* a = all; a && !found; a = a->ifa_next) {
    if (!a->ifa_name || (!name.empty() && name != a->ifa_name)) continue;
    name_seen = true;
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr);
    if (want == 0 || ip == want) found = LocalInterface{a->ifa_name, ip, 0};
  }
  ::freeifaddrs(all);
  if (!found) {
    if (!name.empty())
      *why = name_seen
                 ? "interface " + name + " has no IPv4 address (give it one: ip addr add A.B.C.D/N dev " + name + ")"
                 : "no interface named " + name + " (ip link lists them)";
    else
      *why = ipv4_string(want) +
             " is not an address of this host (ip -4 addr lists them; a NIC can only use a "
             "local address)";
    return std::nullopt;
  }
  found->mtu = link_mtu(found->name);
  if (found->mtu == 0) {
    *why = "cannot read the MTU of " + found->name;
    return std::nullopt;
  }
  return found;
}

}  // namespace

std::string ipv4_string(uint32_t ipv4) {
  in_addr a{htonl(ipv4)};
  char buf[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

std::optional<LocalInterface> interface_with_address(uint32_t ipv4, std::string* why) {
  if ((ipv4 >> 24) == 127) {
    LocalInterface lo{"lo", ipv4, link_mtu("lo")};
    if (lo.mtu == 0) lo.mtu = 65536;  // the loopback route works even where `lo` is named otherwise
    return lo;
  }
  if (ipv4 == 0 || (ipv4 >> 28) >= 14 || ipv4 == 0xffffffff) {
    *why = ipv4_string(ipv4) + " is not a unicast address; a NIC needs one address of its own";
    return std::nullopt;
  }
  return find("", ipv4, why);
}

std::optional<LocalInterface> interface_by_name(const std::string& name, std::string* why) {
  if (name.empty() || name.size() >= IFNAMSIZ) {
    *why = "'" + name + "' is not an interface name";
    return std::nullopt;
  }
  return find(name, 0, why);
}

}  // namespace simnic::io
