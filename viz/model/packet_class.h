// The colour classes of packets on the wire (SEND, WRITE, READ request/response, ATOMIC, ACK,
// NAK), from a pkt_tx/pkt_rx event's opcode name and AETH.
#pragma once
#include <string>

#include "viz/model/event.h"

namespace simnic::viz {

enum class PacketClass { kSend, kWrite, kReadRequest, kReadResponse, kAtomic, kAck, kNak, kOther };

PacketClass classify_packet(const Event& pkt);
const char* packet_class_name(PacketClass c);
// A short label for a box on the wire, e.g. "SEND F", "WRITE L", "ACK", "NAK".
std::string packet_label(const Event& pkt);

}  // namespace simnic::viz
