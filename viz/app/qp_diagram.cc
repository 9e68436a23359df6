#include "viz/app/qp_diagram.h"

#include <imgui.h>

#include <cmath>
#include <cstring>

#include "viz/app/palette.h"

namespace simnic::viz {

namespace {

struct Node {
  const char* name;
  float col, row;  // grid position
  const char* help;
};

constexpr Node kNodes[] = {
    {"RESET", 0, 0, "RESET: just created; no WQEs are processed"},
    {"INIT", 1, 0, "INIT: receive WQEs may be posted, nothing is processed yet"},
    {"RTR", 2, 0, "RTR (ready to receive): incoming requests are served"},
    {"RTS", 3, 0, "RTS (ready to send): the send queue is processed"},
    {"SQD", 3, 1, "SQD (send queue drain): in-flight WRs finish, new ones wait"},
    {"SQE", 2, 1, "SQE (send queue error, UC/UD): the SQ is flushed, receives go on"},
    {"ERR", 4, 0.5f, "ERR: every outstanding and later WR completes with WR_FLUSH_ERR"},
};

// The transitions the spec allows (besides "any -> RESET" and "any -> ERR").
constexpr std::pair<const char*, const char*> kEdges[] = {
    {"RESET", "INIT"}, {"INIT", "RTR"}, {"RTR", "RTS"}, {"RTS", "SQD"},
    {"SQD", "RTS"},    {"RTS", "SQE"},  {"SQE", "RTS"}, {"RTS", "ERR"},
};

const Node* find(const std::string& name) {
  for (const Node& n : kNodes)
    if (name == n.name) return &n;
  return nullptr;
}

}  // namespace

void draw_qp_diagram(const std::string& state, const std::string& prev, float w, float h) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 o = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("qp_diagram", {w, h});
  bool hovered = ImGui::IsItemHovered();
  const float node_w = std::min(56.0f, w / 6.0f), node_h = std::min(20.0f, h / 2.6f);
  auto centre = [&](const Node& n) {
    return ImVec2{o.x + node_w / 2 + 2 + n.col * (w - node_w - 4) / 4.0f,
                  o.y + node_h / 2 + 2 + n.row * (h - node_h - 4)};
  };
  auto arrow = [&](ImVec2 a, ImVec2 b, ImU32 col, float thick) {
    float dx = b.x - a.x, dy = b.y - a.y, len = std::sqrt(dx * dx + dy * dy);
    if (len < 1) return;
    dx /= len, dy /= len;
    // Stop at the node boxes' edges (roughly).
    float trim = std::abs(dx) > std::abs(dy) ? node_w / 2 : node_h / 2;
    ImVec2 s{a.x + dx * trim, a.y + dy * trim}, e{b.x - dx * trim, b.y - dy * trim};
    dl->AddLine(s, e, col, thick);
    dl->AddTriangleFilled(e, {e.x - dx * 7 - dy * 4, e.y - dy * 7 + dx * 4},
                          {e.x - dx * 7 + dy * 4, e.y - dy * 7 - dx * 4}, col);
  };
  for (auto [from, to] : kEdges) {
    // Two-way pairs are drawn slightly apart.
    ImVec2 a = centre(*find(from)), b = centre(*find(to));
    bool back = std::strcmp(from, "SQD") == 0 || std::strcmp(from, "SQE") == 0;
    float off = back ? 5.0f : (std::strcmp(to, "SQD") == 0 || std::strcmp(to, "SQE") == 0) ? -5.0f : 0.0f;
    arrow({a.x + off, a.y}, {b.x + off, b.y}, kDim, 1.5f);
  }
  const Node* cur = find(state);
  const Node* was = find(prev);
  if (cur && was && cur != was) arrow(centre(*was), centre(*cur), kHighlight, 3.0f);
  const char* tip = nullptr;
  for (const Node& n : kNodes) {
    ImVec2 c = centre(n);
    ImVec2 a{c.x - node_w / 2, c.y - node_h / 2}, b{c.x + node_w / 2, c.y + node_h / 2};
    bool is_cur = cur == &n;
    ImU32 fill = is_cur
                     ? (std::strcmp(n.name, "ERR") == 0 || std::strcmp(n.name, "SQE") == 0 ? IM_COL32(231, 76, 60, 255)
                                                                                           : kHighlight)
                     : IM_COL32(50, 55, 70, 255);
    dl->AddRectFilled(a, b, fill, 5);
    dl->AddRect(a, b, was == &n && !is_cur ? kHighlight : IM_COL32(130, 130, 140, 255), 5);
    ImVec2 ts = ImGui::CalcTextSize(n.name);
    dl->AddText({c.x - ts.x / 2, c.y - ts.y / 2}, is_cur ? IM_COL32(0, 0, 0, 255) : kText, n.name);
    ImVec2 m = ImGui::GetMousePos();
    if (hovered && m.x >= a.x && m.x <= b.x && m.y >= a.y && m.y <= b.y) tip = n.help;
  }
  if (tip) ImGui::SetTooltip("%s", tip);
}

}  // namespace simnic::viz
