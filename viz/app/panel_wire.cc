// The wire between the NICs: packets travel as boxes coloured by opcode class, left-to-right
// on the upper lane and right-to-left on the lower one. A packet the fault injector dropped
// falls off the wire with a red cross; a retransmission has an orange frame and an "R".
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "viz/app/palette.h"
#include "viz/app/viz_app.h"

namespace simnic::viz {

void draw_wire(VizApp& app, float x, float y, float w, float h) {
  ImGui::SetNextWindowPos({x, y});
  ImGui::SetNextWindowSize({w, h});
  if (!ImGui::Begin("Wire (RoCEv2 over UDP 4791)", nullptr,
                    ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoCollapse |
                        ImGuiWindowFlags_NoScrollbar)) {
    ImGui::End();
    return;
  }
  const World& world = app.world();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 origin = ImGui::GetCursorScreenPos();
  float inner_w = ImGui::GetContentRegionAvail().x, inner_h = ImGui::GetContentRegionAvail().y;

  // Legend.
  float lx = origin.x;
  for (PacketClass c : {PacketClass::kSend, PacketClass::kWrite, PacketClass::kReadRequest, PacketClass::kReadResponse,
                        PacketClass::kAtomic, PacketClass::kAck, PacketClass::kNak}) {
    dl->AddRectFilled({lx, origin.y + 2}, {lx + 12, origin.y + 14}, packet_colour(c), 2);
    dl->AddText({lx + 16, origin.y}, kText, packet_class_name(c));
    lx += 24 + ImGui::CalcTextSize(packet_class_name(c)).x;
  }
  dl->AddText({lx + 10, origin.y}, IM_COL32(231, 76, 60, 255), "x = dropped by fault injector");
  lx += 30 + ImGui::CalcTextSize("x = dropped by fault injector").x;
  dl->AddText({lx, origin.y}, IM_COL32(255, 160, 0, 255), "R = retransmission");

  // NIC endpoints sit at the centres of the NIC columns below.
  std::map<std::string, float> nic_x;
  size_t n = std::max<size_t>(1, world.size()), i = 0;
  for (const auto& [name, nic] : world) nic_x[name] = x + w * (float(i++) + 0.5f) / float(n);
  // The wire in the middle; rightward packets above it, leftward below, each lane with two
  // rows so that packets sent back to back do not hide each other.
  float wire_y = origin.y + 16 + (inner_h - 16) / 2;
  const float row_step = 22;
  auto lane_y = [&](bool rightward, int row) {
    return rightward ? wire_y - 24 - row_step * float(row) : wire_y + 24 + row_step * float(row);
  };
  if (!nic_x.empty()) {
    float x0 = nic_x.begin()->second, x1 = nic_x.rbegin()->second;
    if (world.size() == 1) x1 = x + w - 20;
    dl->AddLine({x0, wire_y}, {x1, wire_y}, IM_COL32(120, 120, 130, 255), 3);
    for (const auto& [name, cx] : nic_x) {
      const NicState& nic = world.at(name);
      std::string label = name + "  " + nic.addr + (nic.paused ? "  [held]" : "");
      ImVec2 ts = ImGui::CalcTextSize(label.c_str());
      dl->AddRectFilled({cx - ts.x / 2 - 8, wire_y - 12}, {cx + ts.x / 2 + 8, wire_y + 12},
                        nic.paused ? IM_COL32(120, 90, 0, 255) : IM_COL32(50, 55, 70, 255), 4);
      dl->AddText({cx - ts.x / 2, wire_y - ts.y / 2}, kText, label.c_str());
    }
  }

  // Packets in flight at the playhead: place them, then stack overlapping ones in rows.
  const ImVec2 box{132, 20};
  struct Placed {
    const Flight* f;
    double progress;
    float px;
    bool rightward;
    int row = 0;
  };
  std::vector<Placed> placed;
  for (const auto& fv : app.timeline.flights_at(app.pos)) {
    const Flight& f = *fv.flight;
    auto from = nic_x.find(f.from_nic);
    if (from == nic_x.end()) continue;
    auto to = nic_x.find(f.to_nic);
    float tx = to != nic_x.end() ? to->second : (from->second < x + w / 2 ? x + w - 40 : x + 40);
    placed.push_back({&f, fv.progress, from->second + (tx - from->second) * float(fv.progress), tx >= from->second});
  }
  std::sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) { return a.px < b.px; });
  for (bool dir : {true, false}) {
    float row_end[2] = {-1e9f, -1e9f};
    for (Placed& p : placed) {
      if (p.rightward != dir) continue;
      p.row = p.px - box.x / 2 >= row_end[0] ? 0 : p.px - box.x / 2 >= row_end[1] ? 1 : 0;
      row_end[p.row] = p.px + box.x / 2 + 2;
    }
  }
  ImVec2 mouse = ImGui::GetMousePos();
  for (const Placed& pl : placed) {
    const Flight& f = *pl.f;
    const Event& pkt = app.timeline.at(f.tx_pos);
    float px = pl.px, py = lane_y(pl.rightward, pl.row);
    if (f.dropped && pl.progress > 0.5) py += float(pl.progress - 0.5) * 2 * inner_h * 0.3f;  // falls off
    ImVec2 a{px - box.x / 2, py - box.y / 2}, b{px + box.x / 2, py + box.y / 2};
    dl->AddRectFilled(a, b, packet_colour(classify_packet(pkt)), 4);
    if (f.retransmission) dl->AddRect(a, b, IM_COL32(255, 160, 0, 255), 4, 0, 3);
    if (app.selected && *app.selected == f.tx_pos) dl->AddRect(a, b, kHighlight, 4, 0, 2);
    std::string label = (f.retransmission ? "R " : "") + packet_label(pkt) + " " + std::to_string(pkt.u("psn"));
    dl->AddText({a.x + 3, a.y + 3}, IM_COL32(255, 255, 255, 255), label.c_str());
    if (f.dropped) {
      dl->AddLine(a, b, IM_COL32(231, 76, 60, 255), 3);
      dl->AddLine({a.x, b.y}, {b.x, a.y}, IM_COL32(231, 76, 60, 255), 3);
    }
    bool hover = mouse.x >= a.x && mouse.x <= b.x && mouse.y >= a.y && mouse.y <= b.y && ImGui::IsWindowHovered();
    if (hover) {
      ImGui::SetTooltip("%s\n(click to inspect)", summarize(pkt).c_str());
      if (ImGui::IsMouseClicked(0)) app.selected = f.tx_pos;
    }
  }
  ImGui::Dummy({inner_w, inner_h});
  ImGui::End();
}

}  // namespace simnic::viz
