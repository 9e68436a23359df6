// Small text helpers for the messages the NIC logs and traces.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace simnic::core {

// "0x1a2b": keys, QPNs and addresses as an RDMA programmer reads them.
inline std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace simnic::core
