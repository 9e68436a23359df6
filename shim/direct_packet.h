// The request packet a program sends itself under a lent PSN (simnic/abi/direct_send.h): built
// from the WQE as simnicd's requester builds the only packet of a one-packet request
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

// What a lent PSN may carry, for a WQE of message length `length`: kData, a SEND,
// SEND_WITH_IMM, RDMA WRITE or WRITE_WITH_IMM of one packet (its payload goes in the packet);
// kAnswered, an RDMA READ of one response packet or an 8-byte CMP_SWP or FETCH_ADD (their
// answers land in the WQE's buffer, placed by the NIC, which checks it then). kNone: everything
// else (SEND_WITH_INV, ATOMIC WRITE, BIND_MW and LOCAL_INV, longer messages, inline data on a
// READ or atomic) is the NIC's to send, or to fail.
enum class DirectKind { kNone, kData, kAnswered };
DirectKind direct_kind(const abi::SendWqe& w, uint64_t length, const abi::DirectLend& lend);

// Writes the packet (BTH, RETH, AtomicETH or ImmDt, payload, pad, ICRC: the UDP payload) into
// `out` and returns its size; 0 when the WQE may not go under the lend. `payload` is a kData
// WQE's bytes (`length` of them), empty for the others. `src_ip` and `udp_port` are the NIC's
// (abi::OpenDirectSendReply): the ICRC covers the IP and UDP headers the datagram leaves with.
size_t build_direct_packet(const abi::SendWqe& w, const abi::DirectLend& lend, uint32_t src_ip, uint16_t udp_port,
                           uint64_t length, std::span<const uint8_t> payload, std::vector<uint8_t>& out);

}  // namespace simnic::shim
