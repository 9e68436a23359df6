// Why a received packet is dropped, one table: each reason's counter, name, meaning and the
// IBA rule it enforces. Device::drop counts, traces (pkt_drop) and logs a drop by its row, so
// a drop site names its reason and says what was wrong with this packet, nothing more.
#pragma once
#include <cstdint>
#include <string>

#include "simnic/core/env.h"
#include "simnic/core/observe/counters.h"
#include "simnic/core/observe/trace.h"

namespace simnic::core {

enum class Drop : uint8_t {
  kMalformed,       // parse_packet refused it
  kBadIcrc,         // parse_packet: the ICRC does not match
  kWrongPort,       // loopback: not sent from a NIC's UDP port
  kUdThrottled,     // UdProbeGuard is closed to new UD senders
  kNoQp,            // no QP with the BTH's DestQP
  kWrongTransport,  // an RC opcode for a UC QP, ...
  kWrongPeer,       // a connected QP hears only its peer
  kRequestState,    // a request for a QP before RTR or in ERR
  kResponseState,   // a response for a QP that does not send
  kBadMsn,          // an ACK/NAK whose MSN counts messages never sent
  kQkey,            // UD: the Q_Key is not the QP's
  kUdNoWqe,         // UD: no receive posted
  kUdTooLong,       // UD: longer than the receive WQE
  kUcMessage,       // UC: the rest of a message after a lost packet
  kMulticast,       // a datagram to a group no QP here takes
  kXrcDirection,    // a request for an XRC INI QP, a response for a TGT QP
  kCmNotDecodable,  // QP1: not a CM MAD this NIC decodes
  kCmMalformedReq,  // QP1: a REQ that breaks the CM's rules
};

struct DropReason {
  uint64_t DeviceCounters::*counter;  // nullptr: counted elsewhere (the CM agent's own counters)
  const char* name;                   // pkt_drop's `drop`, and the log budget's category
  bool logged;                        // written to the log (rate-limited) as well as traced
  LogLevel level;
  const char* explanation;  // pkt_drop's `reason`
  const char* rule;         // the IBA rule broken; "" when none applies
};

const DropReason& drop_reason(Drop d);

// The pkt_drop event for one drop: its row of the table, the QP (0: not known) and `detail`,
// what was wrong with this packet. The caller may add fields before it goes out of scope.
TraceEvent trace_drop(Tracer& tracer, Drop d, uint32_t qpn, const std::string& detail);

}  // namespace simnic::core
