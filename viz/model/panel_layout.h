// Where simnic-viz's panels go, and how a NIC's column lays out its parts, computed without any
// drawing so that a test can check that at the default 1280x800 nothing is cut off: the QPs
// (with their error sentence, wrapped), the CQ rings, the MR table and the counters.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "viz/model/nic_state.h"
#include "viz/model/wire_layout.h"

namespace simnic::viz {

// The font's measures (Dear ImGui's default font unless the app says otherwise).
struct TextMetrics {
  float line_h = 17;   // a line of text and the spacing under it
  float char_w = 7;    // one character (the default font is monospaced)
  float title_h = 19;  // a window's title bar
  float pad = 8;       // a window's inner padding, each side
};

struct PanelRects {
  Rect timeline, wire;
  std::vector<Rect> nics;  // one column each, left to right
  Rect log, inspector;
};

// The window's panels under a menu bar of `menu_h`: the timeline bar and the wire on top, the
// NIC columns in the middle, the event log and the inspector at the bottom. The wire and the
// bottom row give up height first on small windows, so the NIC columns keep room.
PanelRects layout_panels(float width, float height, float menu_h, size_t nic_count, bool inspector_big);

// One NIC column: the QPs on the left and the CQs and counters on the right, over the MR
// table, which takes the column's whole width (its keys, addresses and rights need it).
struct NicColumnPlan {
  float left_w = 0, right_w = 0;       // content widths of the two upper parts
  float body_h = 0;                    // the column's height less title and padding
  float mr_h = 0;                      // the MR table's, at the bottom (from its rows, rights wrapped)
  float mr_fixed_w[4] = {0, 0, 0, 0};  // its first four columns' widths; rights get the rest
  float upper_h = 0;                   // the two upper parts' (body_h less the MR table)
  float qp_ring = 0, cq_ring = 0;      // ring diameters
  float left_h = 0, right_h = 0;       // the height their contents need (estimated from the state)
  bool fits() const { return left_h <= upper_h && right_h <= upper_h && upper_h > 0; }
};

// The MR table's rows as the column shows them: MRs, then memory windows under their own rkey.
struct MrRow {
  std::string cells[5];  // MR, lkey/rkey, range, length, rights
  bool bound = true;     // false: a window not bound to any MR (its range is "not bound")
};
std::vector<MrRow> mr_rows(const NicState& nic);
// The four first columns' widths in characters (the widest cell of each, header included);
// the rights column gets the rest of the width and wraps.
struct MrColumns {
  int chars[4] = {0, 0, 0, 0};
};
MrColumns mr_columns(const std::vector<MrRow>& rows);

// The counters as the column shows them: "cqe=2   pkt_rx=5   ..." (wrapped to the width).
std::string counters_text(const NicState& nic);

// Lines a wrapped text of `chars` characters takes at `width`.
int wrapped_lines(size_t chars, float width, const TextMetrics& m);

NicColumnPlan plan_nic_column(const NicState& nic, float width, float height, const TextMetrics& m = {});

}  // namespace simnic::viz
