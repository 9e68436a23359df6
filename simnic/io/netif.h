// The host's network interfaces, as far as a NIC on one of their IPv4 addresses needs them:
// which interface holds an address, its first IPv4 address, and its MTU. No Asio: the `simnic`
// command uses it too.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace simnic::io {

struct LocalInterface {
  std::string name;   // "eth0", "lo"
  uint32_t ipv4 = 0;  // host order
  uint32_t mtu = 0;   // the link MTU in bytes (IP datagram size), as `ip link` shows it
};

// The interface that holds `ipv4` (host order). Every address of 127/8 is loopback's on Linux
// (one local route), though only 127.0.0.1 is listed on `lo`. Empty, with the reason in *why,
// when no interface of this host (of this network namespace) has the address.
std::optional<LocalInterface> interface_with_address(uint32_t ipv4, std::string* why);

// The interface `name` and its first IPv4 address (the primary one, as `ip -4 addr` lists it).
std::optional<LocalInterface> interface_by_name(const std::string& name, std::string* why);

// "a.b.c.d" of a host-order address.
std::string ipv4_string(uint32_t ipv4);

}  // namespace simnic::io
