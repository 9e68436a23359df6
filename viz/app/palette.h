// Colours shared by the panels: one per packet class, QP state and completion status.
#pragma once
#include <imgui.h>

#include <string>

#include "viz/model/packet_class.h"

namespace simnic::viz {

inline ImU32 packet_colour(PacketClass c) {
  switch (c) {
    case PacketClass::kSend: return IM_COL32(66, 135, 245, 255);          // blue
    case PacketClass::kWrite: return IM_COL32(155, 89, 182, 255);         // purple
    case PacketClass::kReadRequest: return IM_COL32(26, 188, 156, 255);   // teal
    case PacketClass::kReadResponse: return IM_COL32(22, 140, 110, 255);  // dark teal
    case PacketClass::kAtomic: return IM_COL32(230, 126, 34, 255);        // orange
    case PacketClass::kAck: return IM_COL32(46, 204, 64, 255);            // green
    case PacketClass::kNak: return IM_COL32(231, 76, 60, 255);            // red
    default: return IM_COL32(150, 150, 150, 255);
  }
}

inline ImU32 wqe_colour(const std::string& opcode) {
  if (opcode == "RECV") return IM_COL32(100, 160, 255, 255);
  if (opcode.rfind("SEND", 0) == 0) return packet_colour(PacketClass::kSend);
  if (opcode.rfind("RDMA_WRITE", 0) == 0) return packet_colour(PacketClass::kWrite);
  if (opcode == "RDMA_READ") return packet_colour(PacketClass::kReadRequest);
  if (opcode.rfind("ATOMIC", 0) == 0) return packet_colour(PacketClass::kAtomic);
  return IM_COL32(180, 180, 180, 255);
}

inline ImU32 status_colour(bool ok) { return ok ? IM_COL32(46, 204, 64, 255) : IM_COL32(231, 76, 60, 255); }

constexpr ImU32 kHighlight = IM_COL32(255, 221, 0, 255);
constexpr ImU32 kDim = IM_COL32(90, 90, 100, 255);
constexpr ImU32 kText = IM_COL32(230, 230, 230, 255);

}  // namespace simnic::viz
