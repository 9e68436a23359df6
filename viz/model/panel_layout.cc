#include "viz/model/panel_layout.h"

#include <algorithm>
#include <cmath>

#include "viz/model/format.h"

namespace simnic::viz {

namespace {

// The QP header's lines, as panel_nic.cc writes them: peer and PSNs, timer and retries, the
// latest packets (typical lengths: the exact text depends on the values).
constexpr size_t kPeerChars = 70, kRetryChars = 100, kLastPacketChars = 80;
constexpr float kSpacing = 4;  // between items on a line and around separators
constexpr float kMaxQpRing = 110, kMaxCqRing = 96, kMinRing = 48;

float qp_text_h(const QpInfo& qp, float w, const TextMetrics& m) {
  int lines = 1 + wrapped_lines(kPeerChars, w, m) + wrapped_lines(kRetryChars, w, m) +
              wrapped_lines(kLastPacketChars, w, m);
  if (!qp.last_error.empty()) lines += wrapped_lines(qp.last_error.size() + 7, w, m);  // "error: ..."
  return float(lines) * m.line_h + 2 * kSpacing;                                       // and the separator above
}

float destroyed_h(const NicState& nic, float w, const TextMetrics& m) {
  if (nic.destroyed.empty()) return nic.qps.empty() ? m.line_h : 0;
  const size_t shown = std::min<size_t>(nic.destroyed.size(), 8);
  return float(wrapped_lines(12 + shown * 22, w, m) + (nic.qps.empty() ? 1 : 0)) * m.line_h;
}

// The QPs: text, then a row of state diagram and SQ and RQ rings each.
float left_height(const NicState& nic, float w, float ring, const TextMetrics& m) {
  float h = destroyed_h(nic, w, m);
  for (const auto& [qpn, qp] : nic.qps) h += qp_text_h(qp, w, m) + ring + m.line_h;
  return h;
}

int rings_per_row(float w, float ring) { return std::max(1, int((w + kSpacing) / (ring + kSpacing))); }

float cq_height(const NicState& nic, float w, float ring, const TextMetrics& m) {
  if (nic.cqs.empty()) return 0;
  const int rows = (int(nic.cqs.size()) + rings_per_row(w, ring) - 1) / rings_per_row(w, ring);
  return float(rows) * (ring + m.line_h + kSpacing);
}

constexpr float kCellPad = 8;  // a table cell's padding, both sides together

// The MR table: a heading, the column headers, a row per MR and window ("none" without), each
// as high as its rights wrap in what the four first columns leave.
float mr_height(const NicState& nic, float w, const float fixed_w[4], const TextMetrics& m) {
  const float rights_w = std::max(m.char_w * 8, w - fixed_w[0] - fixed_w[1] - fixed_w[2] - fixed_w[3] - kCellPad);
  const float row_h = m.line_h + 1;
  const std::vector<MrRow> rows = mr_rows(nic);
  float h = m.line_h + row_h + kSpacing + (rows.empty() ? row_h : 0);  // heading, column headers, "none"
  for (const MrRow& r : rows) h += float(wrapped_lines(r.cells[4].size(), rights_w, m)) * row_h;
  return h;
}

float counter_height(const NicState& nic, float w, const TextMetrics& m) {
  return m.line_h + float(wrapped_lines(counters_text(nic).size(), w, m)) * m.line_h;
}

float right_height(const NicState& nic, float w, float ring, const TextMetrics& m) {
  return cq_height(nic, w, ring, m) + counter_height(nic, w, m);
}

// Shrinks a ring until `height(ring)` fits in `room` (not below kMinRing).
template <class Height>
float fit_ring(float ring, float room, const Height& height) {
  while (ring > kMinRing && height(ring) > room) ring = std::max(kMinRing, ring - 4);
  return ring;
}

}  // namespace

std::vector<MrRow> mr_rows(const NicState& nic) {
  std::vector<MrRow> rows;
  for (const auto& [handle, mr] : nic.mrs)
    rows.push_back({{std::to_string(handle), mr.lkey == mr.rkey ? hex(mr.lkey) : hex(mr.lkey) + " / " + hex(mr.rkey),
                     hex(mr.addr), std::to_string(mr.length), mr.access.empty() ? "LOCAL_READ" : mr.access},
                    true});
  for (const auto& [handle, mw] : nic.mws)
    rows.push_back({{"MW " + std::to_string(handle) + " (type " + std::to_string(mw.type) + ")", "rkey " + hex(mw.rkey),
                     mw.mr ? hex(mw.addr) + " in MR " + std::to_string(mw.mr) : "not bound", std::to_string(mw.length),
                     mw.mr ? mw.access : "-"},
                    mw.mr != 0});
  return rows;
}

MrColumns mr_columns(const std::vector<MrRow>& rows) {
  MrColumns c;
  const char* headers[4] = {"MR", "lkey/rkey", "range", "length"};
  for (int i = 0; i < 4; ++i) {
    c.chars[i] = i == 0 ? 4 : int(std::string(headers[i]).size());  // 4: "none" in an empty table
    for (const MrRow& r : rows) c.chars[i] = std::max(c.chars[i], int(r.cells[i].size()));
  }
  return c;
}

std::string counters_text(const NicState& nic) {
  std::string s;
  // "name=N": no space inside a pair, so wrapping never parts a name from its count.
  for (const auto& [name, v] : nic.counters) s += (s.empty() ? "" : "   ") + name + "=" + std::to_string(v);
  return s.empty() ? "none yet" : s;
}

int wrapped_lines(size_t chars, float width, const TextMetrics& m) {
  // Word wrapping leaves the end of a line unused: count a line as two characters shorter.
  const float per_line = std::max(1.0f, std::floor(width / m.char_w) - 2);
  return std::max(1, int(std::ceil(float(chars) / per_line)));
}

PanelRects layout_panels(float width, float height, float menu_h, size_t nic_count, bool inspector_big) {
  PanelRects r;
  const float bar_h = 64;
  const float wire_h = std::clamp(height * 0.17f, 110.0f, 170.0f);
  const float bottom_h = std::clamp(height * 0.22f, 150.0f, 260.0f);
  r.timeline = {0, menu_h, width, menu_h + bar_h};
  r.wire = {0, r.timeline.y1, width, r.timeline.y1 + wire_h};
  const float nic_y = r.wire.y1;
  const float nic_h = std::max(120.0f, height - nic_y - bottom_h);
  const size_t n = std::max<size_t>(1, nic_count);
  const float col = width / float(n);
  for (size_t i = 0; i < n; ++i) r.nics.push_back({col * float(i), nic_y, col * float(i + 1), nic_y + nic_h});
  const float bottom_y = nic_y + nic_h;
  r.log = {0, bottom_y, width * 0.58f, height};
  // Enlarged, the inspector covers the NIC columns' right part too: long values get room.
  r.inspector = inspector_big ? Rect{width * 0.35f, nic_y, width, height}
                              : Rect{width * 0.58f, bottom_y, width, height};
  return r;
}

NicColumnPlan plan_nic_column(const NicState& nic, float width, float height, const TextMetrics& m) {
  NicColumnPlan p;
  const float inner = width - 2 * m.pad;
  p.left_w = std::floor(inner * 0.62f);
  p.right_w = inner - p.left_w - kSpacing * 2;
  p.body_h = height - m.title_h - 2 * m.pad;
  const MrColumns cols = mr_columns(mr_rows(nic));
  for (int i = 0; i < 4; ++i) p.mr_fixed_w[i] = float(cols.chars[i]) * m.char_w + kCellPad;
  p.mr_h = mr_height(nic, inner, p.mr_fixed_w, m);
  p.upper_h = p.body_h - p.mr_h - kSpacing;
  p.qp_ring = fit_ring(std::min(kMaxQpRing, p.left_w * 0.2f), p.upper_h,
                       [&](float ring) { return left_height(nic, p.left_w, ring, m); });
  p.cq_ring = fit_ring(std::min(kMaxCqRing, p.right_w * 0.45f), p.upper_h,
                       [&](float ring) { return right_height(nic, p.right_w, ring, m); });
  p.left_h = left_height(nic, p.left_w, p.qp_ring, m);
  p.right_h = right_height(nic, p.right_w, p.cq_ring, m);
  return p;
}

}  // namespace simnic::viz
