#include "viz/model/packet_class.h"

namespace simnic::viz {

namespace {
bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }
}  // namespace

PacketClass classify_packet(const Event& e) {
  const std::string op = e.s("opcode");
  if (e.has("aeth")) {
    std::string cls = e.sub_s("aeth", "class", "ACK");
    if (cls != "ACK") return PacketClass::kNak;
    if (contains(op, "READ_RESPONSE")) return PacketClass::kReadResponse;
    if (contains(op, "ATOMIC")) return PacketClass::kAtomic;
    return PacketClass::kAck;
  }
  if (contains(op, "READ_RESPONSE")) return PacketClass::kReadResponse;  // MIDDLE has no AETH
  if (contains(op, "READ_REQUEST")) return PacketClass::kReadRequest;
  if (contains(op, "COMPARE_SWAP") || contains(op, "FETCH_ADD") || contains(op, "ATOMIC")) return PacketClass::kAtomic;
  if (contains(op, "WRITE")) return PacketClass::kWrite;
  if (contains(op, "SEND")) return PacketClass::kSend;
  return PacketClass::kOther;
}

const char* packet_class_name(PacketClass c) {
  switch (c) {
    case PacketClass::kSend: return "SEND";
    case PacketClass::kWrite: return "WRITE";
    case PacketClass::kReadRequest: return "READ req";
    case PacketClass::kReadResponse: return "READ resp";
    case PacketClass::kAtomic: return "ATOMIC";
    case PacketClass::kAck: return "ACK";
    case PacketClass::kNak: return "NAK";
    default: return "other";
  }
}

std::string packet_label(const Event& e) {
  if (e.has("cm")) return "CM " + e.s("cm");  // a connection manager MAD to QP1: "CM REQ", "CM DREP"
  PacketClass c = classify_packet(e);
  if (c == PacketClass::kNak) return e.sub_s("aeth", "class", "NAK") == "RNR_NAK" ? "RNR" : "NAK";
  if (c == PacketClass::kAck) return "ACK";
  std::string label = c == PacketClass::kReadRequest ? "READ" : c == PacketClass::kReadResponse ? "RESP" : packet_class_name(c);
  const std::string op = e.s("opcode");
  if (contains(op, "_FIRST")) label += " F";
  else if (contains(op, "_MIDDLE")) label += " M";
  else if (contains(op, "_LAST")) label += " L";
  return label;
}

}  // namespace simnic::viz
