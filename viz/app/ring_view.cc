#include "viz/app/ring_view.h"

#include <cmath>

#include "viz/app/palette.h"

namespace simnic::viz {

size_t draw_ring(const RingSpec& ring, float size) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 o = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(ring.title.c_str(), {size, size});
  bool hovered = ImGui::IsItemHovered();
  bool clicked = ImGui::IsItemClicked();
  ImVec2 c{o.x + size / 2, o.y + size / 2};
  float r_out = size / 2 - 6, r_in = r_out * 0.62f;
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
  auto mark = [&](uint64_t idx, const char* label, ImU32 col, float r) {
    float a = angle(double(idx % entries) / entries);
    ImVec2 p{c.x + std::cos(a) * r, c.y + std::sin(a) * r};
    dl->AddLine({c.x + std::cos(a) * r_in, c.y + std::sin(a) * r_in}, {c.x + std::cos(a) * (r_out + 4), c.y + std::sin(a) * (r_out + 4)}, col, 2);
    dl->AddText({p.x - 4, p.y - 7}, col, label);
  };
  mark(ring.producer, "P", IM_COL32(255, 221, 0, 255), r_out + 2);
  if (ring.show_consumer) mark(ring.consumer, "C", IM_COL32(120, 200, 255, 255), r_in - 10);
  ImVec2 ts = ImGui::CalcTextSize(ring.title.c_str());
  dl->AddText({c.x - ts.x / 2, c.y - ts.y / 2}, kText, ring.title.c_str());

  size_t picked = ~size_t(0);
  if (hover_seg >= 0 && seg_slot[hover_seg]) {
    ImGui::SetTooltip("%s\n(click to inspect)", seg_slot[hover_seg]->tip.c_str());
    if (clicked) picked = seg_slot[hover_seg]->event_pos;
  } else if (hovered) {
    ImGui::SetTooltip("%s: %u slots, producer %llu, consumer %llu", ring.title.c_str(), ring.entries,
                      static_cast<unsigned long long>(ring.producer), static_cast<unsigned long long>(ring.consumer));
  }
  return picked;
}

}  // namespace simnic::viz
