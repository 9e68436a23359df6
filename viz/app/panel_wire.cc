// The wire between the NICs: packets travel as boxes coloured by opcode class, left-to-right
// on the upper lane and right-to-left on the lower one. Where the boxes go and what they say
// comes from layout_wire (viz/model/wire_layout.h): packets sent back to back share one block
// ("WRITE x12"), so labels never overlap; the mouse wheel zooms (the burst spreads into its
// packets), dragging pans, a click on a burst zooms to it, a right-click lists its packets.
// A dropped packet is faded with a red frame and an "X"; a retransmission has an orange frame
// and an "R".
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include "viz/app/palette.h"
#include "viz/app/viz_app.h"
#include "viz/model/format.h"

namespace simnic::viz {

namespace {

constexpr ImU32 kDropRed = IM_COL32(231, 76, 60, 255);
constexpr ImU32 kRetxOrange = IM_COL32(255, 160, 0, 255);

void draw_colour_strip(ImDrawList* dl, ImVec2 o, const WireView& view) {
  float lx = o.x;
  for (PacketClass c : {PacketClass::kSend, PacketClass::kWrite, PacketClass::kReadRequest, PacketClass::kReadResponse,
                        PacketClass::kAtomic, PacketClass::kAck, PacketClass::kNak}) {
    dl->AddRectFilled({lx, o.y + 2}, {lx + 12, o.y + 14}, packet_colour(c), 2);
    dl->AddText({lx + 16, o.y}, kText, packet_class_name(c));
    lx += 24 + ImGui::CalcTextSize(packet_class_name(c)).x;
  }
  dl->AddText({lx + 6, o.y}, kDropRed, "X dropped");
  lx += 16 + ImGui::CalcTextSize("X dropped").x;
  dl->AddText({lx, o.y}, kRetxOrange, "R retransmitted");
  lx += 10 + ImGui::CalcTextSize("R retransmitted").x;
  char z[96];
  std::snprintf(z, sizeof z, "zoom x%.0f  (wheel: zoom, drag: pan, click a burst: expand)", view.zoom);
  dl->AddText({lx + 10, o.y}, IM_COL32(150, 150, 160, 255), z);
}

// The packets in flight at the playhead, as the layout wants them: wire coordinate 0..1
// across the panel, from the sender's column centre towards the receiver's.
std::vector<WirePacket> packets_in_flight(VizApp& app, const std::map<std::string, float>& nic_u) {
  std::vector<WirePacket> out;
  for (const auto& fv : app.timeline.flights_at(app.pos)) {
    const Flight& f = *fv.flight;
    auto from = nic_u.find(f.from_nic);
    if (from == nic_u.end()) continue;
    auto to = nic_u.find(f.to_nic);
    double tu = to != nic_u.end() ? to->second : (from->second < 0.5 ? 0.97 : 0.03);
    const Event& pkt = app.timeline.at(f.tx_pos);
    WirePacket p;
    p.id = f.tx_pos;
    p.u = from->second + (tu - from->second) * fv.progress;
    p.rightward = tu >= from->second;
    p.cls = classify_packet(pkt);
    p.label = packet_label(pkt) + " " + hex(pkt.u("psn"));
    p.retransmission = f.retransmission;
    p.dropped = f.dropped;
    out.push_back(std::move(p));
  }
  return out;
}

void handle_zoom_and_pan(VizApp& app, float x0, float w) {
  if (!ImGui::IsWindowHovered()) return;
  ImGuiIO& io = ImGui::GetIO();
  WireView& v = app.wire_view;
  if (io.MouseWheel != 0) {
    double at = v.u_of(io.MousePos.x - x0);  // keep the wire point under the mouse in place
    v.zoom = std::clamp(v.zoom * std::pow(1.25, double(io.MouseWheel)), 1.0, 1e7);
    v.centre = at - (io.MousePos.x - x0 - w / 2.0) / (v.zoom * w);
  }
  if (ImGui::IsMouseDragging(0) && v.zoom > 1) v.centre -= double(io.MouseDelta.x) / (v.zoom * w);
  if (v.zoom <= 1) v.centre = 0.5;
}

void block_tooltip(VizApp& app, const WireBlock& b) {
  if (b.members.size() == 1) {
    ImGui::SetTooltip("%s\n(click to inspect)", summarize(app.timeline.at(b.members[0])).c_str());
    return;
  }
  const Event& first = app.timeline.at(b.members.front());
  const Event& last = app.timeline.at(b.members.back());
  ImGui::SetTooltip(
      "%zu packets sent back to back, PSN %s .. %s\nclick: zoom in until each has its own label\n"
      "right-click: list them",
      b.members.size(), hex(first.u("psn")).c_str(), hex(last.u("psn")).c_str());
}

// The wire line and the NICs at its ends (at the centres of the NIC columns below).
void draw_endpoints(ImDrawList* dl, const World& world, const std::map<std::string, float>& nic_u, float wire_y,
                    const std::function<float(double)>& sx) {
  if (nic_u.empty()) return;
  float x0 = sx(nic_u.begin()->second), x1 = world.size() == 1 ? sx(0.98) : sx(nic_u.rbegin()->second);
  dl->AddLine({x0, wire_y}, {x1, wire_y}, IM_COL32(120, 120, 130, 255), 3);
  for (const auto& [name, u] : nic_u) {
    const NicState& nic = world.at(name);
    std::string label = name + "  " + nic.addr + (nic.paused ? "  [held]" : "");
    ImVec2 ts = ImGui::CalcTextSize(label.c_str());
    float cx = sx(u);
    dl->AddRectFilled({cx - ts.x / 2 - 8, wire_y - 12}, {cx + ts.x / 2 + 8, wire_y + 12},
                      nic.paused ? IM_COL32(120, 90, 0, 255) : IM_COL32(50, 55, 70, 255), 4);
    dl->AddText({cx - ts.x / 2, wire_y - ts.y / 2}, kText, label.c_str());
  }
}

// One block (a packet or a burst) inside its rectangle a..c; a click selects a packet or
// zooms into a burst, a right-click lists the burst.
void draw_block(VizApp& app, ImDrawList* dl, const WireBlock& b, ImVec2 a, ImVec2 c, float view_x0,
                const std::vector<WirePacket>& packets) {
  const WireView& view = app.wire_view;
  // A dropped packet stays readable: faded, framed in red, its label starting with "X".
  ImU32 fill = packet_colour(b.cls);
  if (b.any_dropped && b.members.size() == 1) fill = (fill & 0x00FFFFFF) | IM_COL32(0, 0, 0, 110);
  dl->AddRectFilled(a, c, fill, 4);
  if (b.members.size() > 1) dl->AddRect(a, c, IM_COL32(255, 255, 255, 140), 4, 0, 1);  // a burst
  // One frame: red for a drop, else orange for a retransmission (the label's X / R says both).
  if (b.any_dropped || b.any_retransmission) dl->AddRect(a, c, b.any_dropped ? kDropRed : kRetxOrange, 4, 0, 3);
  bool selected = app.selected && std::find(b.members.begin(), b.members.end(), *app.selected) != b.members.end();
  if (selected) dl->AddRect(a, c, kHighlight, 4, 0, 2);
  // A block that starts left of the view has its label moved into view, if it fits there.
  float lw = label_width(b.label, view), tx = a.x + view.pad / 2;
  if (a.x < view_x0 && c.x - view_x0 >= lw + view.pad) tx = view_x0 + view.pad / 2;
  dl->AddText({tx, a.y + 3}, IM_COL32(255, 255, 255, 255), b.label.c_str());
  ImVec2 mouse = ImGui::GetMousePos();
  if (!ImGui::IsWindowHovered() || mouse.x < a.x || mouse.x > c.x || mouse.y < a.y || mouse.y > c.y) return;
  block_tooltip(app, b);
  if (ImGui::IsMouseReleased(0) && ImGui::GetMouseDragDelta(0).x == 0) {
    if (b.members.size() == 1) app.selected = b.members[0];
    else app.wire_view = zoom_to(b, packets, view);
  }
  if (ImGui::IsMouseClicked(1)) {
    app.burst_members = b.members;
    ImGui::OpenPopup("burst");
  }
}

void burst_popup(VizApp& app) {
  if (!ImGui::BeginPopup("burst")) return;
  ImGui::TextDisabled("%zu packets (click one to inspect it)", app.burst_members.size());
  size_t shown = 0;
  for (size_t id : app.burst_members) {
    if (id < app.timeline.first_pos() || id >= app.timeline.end_pos()) continue;
    if (++shown > 500) {
      ImGui::TextDisabled("... (zoom in for the rest)");
      break;
    }
    ImGui::PushID(int(id));
    if (ImGui::Selectable(summarize(app.timeline.at(id)).c_str(), app.selected && *app.selected == id))
      app.selected = id;
    ImGui::PopID();
  }
  ImGui::EndPopup();
}

}  // namespace

void draw_wire(VizApp& app, float x, float y, float w, float h) {
  ImGui::SetNextWindowPos({x, y});
  ImGui::SetNextWindowSize({w, h});
  if (!ImGui::Begin("Wire (RoCEv2 over UDP 4791)", nullptr,
                    ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoCollapse |
                        ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse |
                        ImGuiWindowFlags_NoBringToFrontOnFocus)) {
    ImGui::End();
    return;
  }
  const World& world = app.world();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 origin = ImGui::GetCursorScreenPos();
  float inner_w = ImGui::GetContentRegionAvail().x, inner_h = ImGui::GetContentRegionAvail().y;
  WireView& view = app.wire_view;
  view.width = inner_w;
  view.char_w = ImGui::CalcTextSize("M").x;
  handle_zoom_and_pan(app, origin.x, inner_w);
  draw_colour_strip(dl, origin, view);

  // NIC endpoints sit at the centres of the NIC columns below (wire coordinate 0..1).
  std::map<std::string, float> nic_u;
  size_t n = std::max<size_t>(1, world.size()), i = 0;
  for (const auto& [name, nic] : world) nic_u[name] = (x + w * (float(i++) + 0.5f) / float(n) - origin.x) / inner_w;
  float wire_y = origin.y + 16 + (inner_h - 16) / 2;
  dl->PushClipRect({origin.x, origin.y + 16}, {origin.x + inner_w, origin.y + inner_h}, true);
  draw_endpoints(dl, world, nic_u, wire_y, [&](double u) { return origin.x + float(view.x_of(u)); });

  std::vector<WirePacket> packets = packets_in_flight(app, nic_u);
  app.wire_blocks = layout_wire(packets, view);
  for (const WireBlock& b : app.wire_blocks) {
    Rect r = b.rect(view);
    draw_block(app, dl, b, {origin.x + r.x0, wire_y + r.y0}, {origin.x + r.x1, wire_y + r.y1}, origin.x, packets);
  }
  dl->PopClipRect();
  burst_popup(app);
  // "fit" sits on the colour strip's line, away from the lanes.
  ImGui::SetCursorScreenPos({origin.x + inner_w - ImGui::CalcTextSize("fit the whole wire").x - 12, origin.y - 2});
  if (app.wire_view.zoom > 1 && ImGui::SmallButton("fit the whole wire"))
    app.wire_view.zoom = 1, app.wire_view.centre = 0.5;
  ImGui::End();
}

}  // namespace simnic::viz
