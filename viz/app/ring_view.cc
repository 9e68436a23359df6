#include "viz/app/ring_view.h"

#include <cmath>

#include "viz/app/palette.h"

namespace simnic::viz {

size_t draw_ring(const RingSpec& ring, float size) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 o = ImGui::GetCursorScreenPos();
  const float line = ImGui::GetTextLineHeight();
  ImGui::InvisibleButton(ring.title.c_str(), {size, size + line});
  bool hovered = ImGui::IsItemHovered();
  bool clicked = ImGui::IsItemClicked();
  ImVec2 c{o.x + size / 2, o.y + size / 2};
  float r_out = size / 2 - 18, r_in = r_out * 0.62f;  // room outside the ring for the P/C letters
  uint32_t entries = std::max<uint32_t>(1, ring.entries);
  // Big rings are drawn with one segment per group of slots.
  uint32_t segs = std::min<uint32_t>(entries, 32);
  constexpr float kTau = 6.2831853f;
  auto angle = [&](double frac) { return float(-kTau / 4 + kTau * frac); };
  std::vector<const RingSlot*> seg_slot(segs, nullptr);
  for (const RingSlot& s : ring.slots) {
    uint32_t seg = uint32_t(uint64_t(s.index % entries) * segs / entries);
    if (!seg_slot[seg]) seg_slot[seg] = &s;
  }
  ImVec2 mouse = ImGui::GetMousePos();
  float ma = std::atan2(mouse.y - c.y, mouse.x - c.x) + kTau / 4;
  if (ma < 0) ma += kTau;
  float md = std::hypot(mouse.x - c.x, mouse.y - c.y);
  int hover_seg = hovered && md >= r_in && md <= r_out ? int(ma / kTau * float(segs)) % int(segs) : -1;
  for (uint32_t i = 0; i < segs; ++i) {
    float a0 = angle(double(i) / segs) + 0.02f, a1 = angle(double(i + 1) / segs) - 0.02f;
    ImU32 col = seg_slot[i] ? seg_slot[i]->colour : IM_COL32(55, 58, 68, 255);
    // An annulus piece is convex only when narrow: fill wide slots piecewise.
    int pieces = std::max(1, int(std::ceil((a1 - a0) / 0.5f)));
    for (int k = 0; k < pieces; ++k) {
      float b0 = a0 + (a1 - a0) * float(k) / float(pieces), b1 = a0 + (a1 - a0) * float(k + 1) / float(pieces);
      dl->PathArcTo(c, r_out, b0, b1 + (k + 1 < pieces ? 0.01f : 0.0f), 4);
      dl->PathArcTo(c, r_in, b1 + (k + 1 < pieces ? 0.01f : 0.0f), b0, 4);
      dl->PathFillConvex(col);
    }
    if (int(i) == hover_seg) {
      dl->PathArcTo(c, r_out, a0, a1, std::max(2, int(64 / segs)));
      dl->PathArcTo(c, r_in, a1, a0, std::max(2, int(64 / segs)));
      dl->PathStroke(kHighlight, ImDrawFlags_Closed, 2);
    }
  }
  // A mark: a tick across the ring at the index, its letter outside the ring at `label_a`.
  auto mark = [&](float a, float label_a, const char* label, ImU32 col) {
    dl->AddLine({c.x + std::cos(a) * r_in, c.y + std::sin(a) * r_in},
                {c.x + std::cos(a) * (r_out + 3), c.y + std::sin(a) * (r_out + 3)}, col, 2);
    ImVec2 ts = ImGui::CalcTextSize(label);
    float r = r_out + 4 + std::abs(std::cos(label_a)) * ts.x / 2 + std::abs(std::sin(label_a)) * ts.y / 2;
    dl->AddText({c.x + std::cos(label_a) * r - ts.x / 2, c.y + std::sin(label_a) * r - ts.y / 2}, col, label);
  };
  const ImU32 p_col = IM_COL32(255, 221, 0, 255), c_col = IM_COL32(120, 200, 255, 255);
  float ap = angle(double(ring.producer % entries) / entries), ac = angle(double(ring.consumer % entries) / entries);
  if (!ring.show_consumer) {
    mark(ap, ap, "P", p_col);
  } else if (ring.producer % entries == ring.consumer % entries) {
    mark(ap, ap, "P=C", p_col);  // empty (or full): one tick, one label
  } else {
    // Letters close together are pushed apart along the ring (P ahead, clockwise).
    float d = std::remainder(ap - ac, kTau), spread = 0.4f;
    float lp = ap, lc = ac;
    if (std::abs(d) < spread) lp = ac + d / 2 + spread / 2, lc = ac + d / 2 - spread / 2;
    mark(ac, lc, "C", c_col);
    mark(ap, lp, "P", p_col);
  }
  ImVec2 ts = ImGui::CalcTextSize(ring.title.c_str());
  dl->AddText({c.x - ts.x / 2, c.y - ts.y / 2}, kText, ring.title.c_str());
  ImVec2 cs = ImGui::CalcTextSize(ring.count.c_str());
  dl->AddText({c.x - cs.x / 2, o.y + size}, kText, ring.count.c_str());

  size_t picked = ~size_t(0);
  if (hover_seg >= 0 && seg_slot[hover_seg]) {
    ImGui::SetTooltip("%s\n(click to inspect)", seg_slot[hover_seg]->tip.c_str());
    if (clicked) picked = seg_slot[hover_seg]->event_pos;
  } else if (hovered) {
    ImGui::SetTooltip("%s %s: %u slots, producer (P) %llu, consumer (C) %llu", ring.title.c_str(), ring.count.c_str(),
                      ring.entries, static_cast<unsigned long long>(ring.producer),
                      static_cast<unsigned long long>(ring.consumer));
  }
  return picked;
}

}  // namespace simnic::viz
