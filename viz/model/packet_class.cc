#include "viz/model/packet_class.h"

namespace simnic::viz {

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// A trace written before simnicd put op_flags in packet events names only the opcode: its
// kinds are read from the name (IBA Table 38's names, as rxe and Wireshark spell them).
std::string op_flags_from_name(const std::string& op) {
  std::string f;
  auto add = [&](bool yes, const char* flag) {
    if (yes) (f += f.empty() ? "" : "|") += flag;
  };
  const bool read_resp = contains(op, "READ_RESPONSE"), ack = contains(op, "ACKNOWLEDGE");
  add(contains(op, "_FIRST") || contains(op, "_ONLY"), "FIRST");
  add(contains(op, "_MIDDLE"), "MIDDLE");
  add(contains(op, "_LAST") || contains(op, "_ONLY"), "LAST");
  add(read_resp, "READ_RESP");
  add(contains(op, "READ_REQUEST"), "READ_REQ");
  add(ack, "ACK");
  add(contains(op, "ATOMIC_WRITE"), "ATOMIC_WRITE");
  add(!ack && (contains(op, "COMPARE_SWAP") || contains(op, "FETCH_ADD")), "ATOMIC");
  add(!read_resp && contains(op, "WRITE") && !contains(op, "ATOMIC_WRITE"), "WRITE");
  add(contains(op, "SEND"), "SEND");
  return f;
}

}  // namespace

OpFlags op_flags(const Event& e) {
  const std::string text = e.has("op_flags") ? e.s("op_flags") : op_flags_from_name(e.s("opcode"));
  OpFlags f;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t bar = text.find('|', start);
    const std::string flag = text.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
    f.names.insert(flag);
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return f;
}

// By the opcode's kind (op_flags) and the AETH's class, never by the opcode's name.
PacketClass classify_packet(const Event& e) {
  const OpFlags f = op_flags(e);
  if (e.has("aeth") && e.sub_s("aeth", "class", "ACK") != "ACK") return PacketClass::kNak;
  if (f.has("READ_RESP")) return PacketClass::kReadResponse;
  if (f.has("ACK")) return e.has("atomic_ack") ? PacketClass::kAtomic : PacketClass::kAck;  // ATOMIC ACKNOWLEDGE
  if (f.has("READ_REQ")) return PacketClass::kReadRequest;
  if (f.has("ATOMIC") || f.has("ATOMIC_WRITE")) return PacketClass::kAtomic;
  if (f.has("WRITE")) return PacketClass::kWrite;
  if (f.has("SEND")) return PacketClass::kSend;
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
  std::string label = c == PacketClass::kReadRequest    ? "READ"
                      : c == PacketClass::kReadResponse ? "RESP"
                                                        : packet_class_name(c);
  const OpFlags f = op_flags(e);
  const bool first = f.has("FIRST"), last = f.has("LAST");
  if (first && !last) label += " F";
  else if (f.has("MIDDLE")) label += " M";
  else if (last && !first) label += " L";
  return label;
}

}  // namespace simnic::viz
