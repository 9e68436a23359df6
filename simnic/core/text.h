// Small text helpers for the messages the NIC logs and traces.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace simnic::core {

// An opcode's kinds from its opcode-table row, "REQUEST|SEND|FIRST|RC" (trace_points.cc):
// pkt_tx/pkt_rx's op_flags.
const std::string& op_flags_of(uint8_t opcode);

// "0x1a2b": keys, QPNs and addresses as an RDMA programmer reads them.
inline std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// "127.0.0.2": an IPv4 address in host order.
inline std::string ip_string(uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 255) + "." + std::to_string((ip >> 8) & 255) +
         "." + std::to_string(ip & 255);
}

}  // namespace simnic::core
