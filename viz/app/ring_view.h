// Draws a ring (a QP's SQ or RQ, a CQ) as a circle of slots with producer and consumer marks.
#pragma once
#include <imgui.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace simnic::viz {

struct RingSlot {
  uint64_t index;  // free-running
  ImU32 colour;
  std::string tip;   // tooltip text
  size_t event_pos;  // the event to select on click
};

struct RingSpec {
  std::string title;  // drawn in the middle: "SQ", "RQ", "CQ #3"
  std::string count;  // drawn under the ring: "1/8" (in use / slots), "12 CQEs"
  uint32_t entries = 0;
  uint64_t producer = 0, consumer = 0;
  bool show_consumer = true;
  std::vector<RingSlot> slots;  // the occupied ones
};

// Reserves a square of `size` (and a line under it for the count) at the cursor and draws the
// ring there; the P and C marks' letters sit outside the ring, never over the title or count. Returns the event
// position of a clicked slot, or ~0.
size_t draw_ring(const RingSpec& ring, float size);

}  // namespace simnic::viz
