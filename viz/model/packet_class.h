// The colour classes of packets on the wire (SEND, WRITE, READ request/response, ATOMIC, ACK,
// NAK), from a pkt_tx/pkt_rx event's op_flags (the opcode table's kinds) and AETH.
#pragma once
#include <set>
#include <string>

#include "viz/model/event.h"

namespace simnic::viz {

enum class PacketClass { kSend, kWrite, kReadRequest, kReadResponse, kAtomic, kAck, kNak, kOther };

// A packet's kinds, as simnicd's opcode table has them ("REQUEST|SEND|FIRST|RC"); read from the
// opcode's name for a trace written before packet events carried op_flags.
struct OpFlags {
  std::set<std::string> names;
  bool has(const char* flag) const { return names.count(flag) != 0; }
};
OpFlags op_flags(const Event& pkt);

PacketClass classify_packet(const Event& pkt);
const char* packet_class_name(PacketClass c);
// A short label for a box on the wire, e.g. "SEND F", "WRITE L", "ACK", "NAK".
std::string packet_label(const Event& pkt);

}  // namespace simnic::viz
