#include "viz/model/wire_layout.h"

#include <algorithm>
#include <numeric>

namespace simnic::viz {

namespace {

struct Placed {
  const WirePacket* p;
  double x;  // pixels
  float w;   // its own label's box width
};

// A packet's own label with its marks: "X" dropped, "R" retransmitted.
std::string own_label(const WirePacket& p) {
  return std::string(p.dropped ? "X " : "") + (p.retransmission ? "R " : "") + p.label;
}

// "SEND x12" (x = U+00D7) when the burst is one class, "12 packets" when it mixes; a single
// packet keeps its own label. "X" / "R" mark a drop / a retransmission among them.
void relabel(WireBlock& b, const std::vector<const WirePacket*>& pk) {
  b.cls = pk.front()->cls;
  b.any_retransmission = b.any_dropped = false;
  for (const WirePacket* p : pk) {
    if (p->cls != b.cls) b.cls = PacketClass::kOther;
    b.any_retransmission |= p->retransmission;
    b.any_dropped |= p->dropped;
  }
  if (pk.size() == 1) {
    b.label = own_label(*pk.front());
    return;
  }
  std::string n = std::to_string(pk.size());
  b.label = std::string(b.any_dropped ? "X " : "") + (b.any_retransmission ? "R " : "") +
            (b.cls == PacketClass::kOther ? n + " packets" : std::string(packet_class_name(b.cls)) + " \xC3\x97" + n);
}

// One lane: back-to-back packets (too close for a label each) form a block; blocks go to the
// first row with room, or join the row's last block when no row has room.
void layout_lane(std::vector<Placed>& lane, const WireView& v, bool rightward, std::vector<WireBlock>* out) {
  std::sort(lane.begin(), lane.end(), [](const Placed& a, const Placed& b) { return a.x < b.x; });
  std::vector<float> row_end(size_t(std::max(1, v.rows)), -1e30f);
  std::vector<size_t> row_last(row_end.size(), ~size_t(0));  // index into *out
  std::vector<std::vector<const WirePacket*>> members;       // per block of *out (this lane's part)
  size_t first_block = out->size();
  auto members_of = [&](size_t block) -> std::vector<const WirePacket*>& { return members[block - first_block]; };

  for (size_t i = 0; i < lane.size();) {
    // The burst starting at i.
    size_t j = i + 1;
    // Packets closer than 1/rows of a label's width cannot all have a label, even alternating
    // rows: they are one burst. Farther apart, each gets its own label in the next free row.
    const float rows = float(row_end.size());
    while (j < lane.size() && lane[j].x - lane[j - 1].x < ((lane[j].w + lane[j - 1].w) / 2 + v.gap) / rows) ++j;
    WireBlock b;
    b.rightward = rightward;
    std::vector<const WirePacket*> pk;
    for (size_t k = i; k < j; ++k) pk.push_back(lane[k].p), b.members.push_back(lane[k].p->id);
    relabel(b, pk);
    b.x0 = float(lane[i].x - lane[i].w / 2);
    b.x1 = std::max(float(lane[j - 1].x + lane[j - 1].w / 2), b.x0 + label_width(b.label, v) + v.pad);
    i = j;

    size_t row = 0;
    while (row < row_end.size() && row_end[row] + v.gap > b.x0) ++row;
    if (row == row_end.size()) {
      // No room in any row: the row that ends first takes these packets into its last block.
      row = size_t(std::min_element(row_end.begin(), row_end.end()) - row_end.begin());
      WireBlock& last = (*out)[row_last[row]];
      auto& lm = members_of(row_last[row]);
      lm.insert(lm.end(), pk.begin(), pk.end());
      last.members.insert(last.members.end(), b.members.begin(), b.members.end());
      relabel(last, lm);
      last.x1 = std::max({last.x1, b.x1, last.x0 + label_width(last.label, v) + v.pad});
      row_end[row] = last.x1;
      continue;
    }
    b.row = int(row);
    row_end[row] = b.x1;
    row_last[row] = out->size();
    out->push_back(std::move(b));
    members.push_back(std::move(pk));
  }
}

}  // namespace

float label_width(const std::string& label, const WireView& view) {
  size_t glyphs = 0;
  for (unsigned char c : label) glyphs += (c & 0xC0) != 0x80;  // count UTF-8 lead bytes only
  return float(glyphs) * view.char_w;
}

Rect WireBlock::rect(const WireView& v) const {
  float cy = rightward ? -24 - v.row_h * float(row) : 24 + v.row_h * float(row);
  return {x0, cy - v.box_h / 2, x1, cy + v.box_h / 2};
}

std::vector<WireBlock> layout_wire(const std::vector<WirePacket>& packets, const WireView& v) {
  std::vector<Placed> lanes[2];
  for (const WirePacket& p : packets) {
    double x = v.x_of(p.u);
    float w = label_width(own_label(p), v) + v.pad;
    if (x + w / 2 < 0 || x - w / 2 > v.width) continue;  // outside the view at this zoom
    lanes[p.rightward ? 0 : 1].push_back({&p, x, w});
  }
  std::vector<WireBlock> out;
  layout_lane(lanes[0], v, true, &out);
  layout_lane(lanes[1], v, false, &out);
  return out;
}

std::optional<std::pair<size_t, size_t>> overlapping_blocks(const std::vector<Rect>& r) {
  std::vector<size_t> order(r.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return r[a].x0 < r[b].x0; });
  for (size_t i = 0; i < order.size(); ++i)
    for (size_t j = i + 1; j < order.size() && r[order[j]].x0 < r[order[i]].x1; ++j)
      if (r[order[i]].intersects(r[order[j]])) return std::pair{order[i], order[j]};
  return std::nullopt;
}

WireView zoom_to(const WireBlock& b, const std::vector<WirePacket>& packets, WireView v) {
  std::vector<size_t> ids = b.members;
  std::sort(ids.begin(), ids.end());
  double lo = 1e300, hi = -1e300;
  for (const WirePacket& p : packets)
    if (std::binary_search(ids.begin(), ids.end(), p.id)) lo = std::min(lo, p.u), hi = std::max(hi, p.u);
  if (lo > hi) return v;
  v.centre = (lo + hi) / 2;
  v.zoom = hi > lo ? std::max(v.zoom * 2, 0.8 / (hi - lo)) : v.zoom * 8;
  v.zoom = std::min(v.zoom, 1e7);
  return v;
}

}  // namespace simnic::viz
