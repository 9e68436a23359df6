// Where the packets on the wire panel go, and their labels: a pure function of the packets in
// flight, the zoom and the panel's width, so that "no two labels overlap" is checked by this
// code (tests/unit/viz), not by looking at pixels. Packets sent back to back (closer than one
// label's width at this zoom) aggregate into one block labelled with the count ("SEND x12");
// zooming in spreads them until each gets its own label.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "viz/model/packet_class.h"

namespace simnic::viz {

struct WirePacket {
  size_t id = 0;          // the pkt_tx event's timeline position
  double u = 0;           // where it is along the whole wire: 0 = left end, 1 = right end
  bool rightward = true;  // upper lane (left to right) or lower lane
  PacketClass cls = PacketClass::kOther;
  std::string label;  // its own label, e.g. "SEND F 0x1a2b3c"
  bool retransmission = false, dropped = false;
};

struct WireView {
  float width = 1280;   // pixels
  double zoom = 1;      // 1: the whole wire fits the width
  double centre = 0.5;  // the wire coordinate shown in the middle
  float char_w = 7;     // the (monospace) font's advance
  float pad = 8;        // label padding inside a block
  float gap = 3;        // the least space between two blocks of one row
  int rows = 2;         // rows per lane
  float row_h = 22, box_h = 20;
  // Pixel x of wire coordinate u, and back.
  double x_of(double u) const { return (u - centre) * zoom * width + width / 2.0; }
  double u_of(double x) const { return (x - width / 2.0) / (zoom * width) + centre; }
};

struct Rect {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool intersects(const Rect& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

// One labelled box on the wire: a single packet or a burst of them.
struct WireBlock {
  std::vector<size_t> members;  // WirePacket ids, left to right
  bool rightward = true;
  int row = 0;                            // 0 = nearest the wire
  float x0 = 0, x1 = 0;                   // pixels
  std::string label;                      // "SEND F 0x1a2b3c", "X R SEND L 0x2", "SEND x12", "12 packets"
  PacketClass cls = PacketClass::kOther;  // kOther when the burst mixes classes
  bool any_retransmission = false, any_dropped = false;
  // y is relative to the wire line (negative: above it).
  Rect rect(const WireView& v) const;
};

// Lays out every packet: each ends up in exactly one block; blocks of one lane and row never
// overlap, and a block is always wide enough for its label.
std::vector<WireBlock> layout_wire(const std::vector<WirePacket>& packets, const WireView& view);

// The first two blocks (indices) whose rectangles intersect, if any. Labels are drawn inside
// their block, so no intersection means no overlapping labels.
std::optional<std::pair<size_t, size_t>> overlapping_blocks(const std::vector<Rect>& rects);

// The label's width in pixels (UTF-8: "x" of "SEND x12" is U+00D7, one glyph).
float label_width(const std::string& label, const WireView& view);

// The zoom and centre that spread a block's packets over most of the width.
WireView zoom_to(const WireBlock& b, const std::vector<WirePacket>& packets, WireView view);

}  // namespace simnic::viz
