// The request packet a program sends itself under a lent PSN (simnic/abi/direct_send.h): built
// from the WQE as simnicd's requester builds the only packet of a one-packet message
// (simnic/core/engines/requester.cc, request_headers), so the peer cannot tell who sent it. No
// shim state: the unit tests build with it what the shim would send.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "simnic/abi/direct_send.h"
#include "simnic/abi/rings.h"

namespace simnic::shim {

// Whether `w`, carrying `payload_len` bytes, may go under `lend`: a SEND, SEND_WITH_IMM, RDMA
// WRITE or WRITE_WITH_IMM of one packet. Everything else (READs and atomics, whose answers come
// back to the WQE; SEND_WITH_INV; BIND_MW and LOCAL_INV; a longer message) is the NIC's.
bool direct_packet_allowed(const abi::SendWqe& w, uint64_t payload_len, const abi::DirectLend& lend);

// Writes the packet (BTH, RETH or ImmDt, payload, pad, ICRC: the UDP payload) into `out` and
// returns its size; 0 when the WQE is not allowed. `src_ip` and `udp_port` are the NIC's
// (abi::OpenDirectSendReply): the ICRC covers the IP and UDP headers the datagram leaves with.
size_t build_direct_packet(const abi::SendWqe& w, const abi::DirectLend& lend, uint32_t src_ip, uint16_t udp_port,
                           std::span<const uint8_t> payload, std::vector<uint8_t>& out);

}  // namespace simnic::shim
