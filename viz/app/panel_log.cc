// The event log: every event of the timeline, filterable by NIC, QP and kind; the event at the
// playhead is highlighted, clicking one selects it (the inspector shows it) and moves there.
#include <imgui.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "viz/app/viz_app.h"

namespace simnic::viz {

namespace {

bool matches(const VizApp& app, const Event& e) {
  if (app.filter_nic[0] && e.nic.find(app.filter_nic) == std::string::npos) return false;
  if (app.filter_kind[0] && e.kind.find(app.filter_kind) == std::string::npos) return false;
  if (app.filter_qp[0]) {
    uint64_t qp = std::strtoull(app.filter_qp, nullptr, 0);
    if (!e.has("qp") || e.u("qp") != qp) return false;
  }
  return true;
}

// The header row, each column with a tooltip: the time column above all needs one (it is each
// NIC's own clock, and the merged rows may step back in it).
void header_row_with_tips() {
  static const char* kTips[] = {
      "position in the merged timeline of all NICs (--at @POS)", "the NIC, and its own event number (seq)",
      "the NIC's own simulated clock: ms since that NIC started, stopped while it is held.\n"
      "Each NIC has its own clock. Rows of several NICs are merged by wall-clock time, with one rule\n"
      "on top: a packet is received after it was sent. So this column can step back when the\n"
      "row's NIC changes; within one NIC it never goes back.",
      "what happened (QPNs, PSNs and keys in hex); red: errors, NAKs, drops, retransmissions"};
  ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
  for (int c = 0; c < 4; ++c) {
    if (!ImGui::TableSetColumnIndex(c)) continue;
    ImGui::TableHeader(ImGui::TableGetColumnName(c));
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", kTips[c]);
  }
}

}  // namespace

void draw_event_log(VizApp& app, float x, float y, float w, float h) {
  ImGui::SetNextWindowPos({x, y});
  ImGui::SetNextWindowSize({w, h});
  if (!ImGui::Begin("Event log", nullptr,
                    ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoCollapse |
                        ImGuiWindowFlags_NoBringToFrontOnFocus)) {
    ImGui::End();
    return;
  }
  ImGui::SetNextItemWidth(90);
  ImGui::InputTextWithHint("##nic", "NIC", app.filter_nic, sizeof app.filter_nic);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(70);
  ImGui::InputTextWithHint("##qp", "QP", app.filter_qp, sizeof app.filter_qp);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(110);
  ImGui::InputTextWithHint("##kind", "kind", app.filter_kind, sizeof app.filter_kind);
  ImGui::SameLine();
  static bool only_until_playhead = true;
  ImGui::Checkbox("up to playhead", &only_until_playhead);

  const Timeline& tl = app.timeline;
  size_t cur = size_t(std::floor(app.pos));
  size_t last = only_until_playhead ? cur : tl.end_pos();
  // Rows that pass the filter (positions), newest last.
  // Without a filter every position is a row: no need to build the list (long live traces).
  bool filtered = app.filter_nic[0] || app.filter_qp[0] || app.filter_kind[0];
  static std::vector<size_t> rows;
  rows.clear();
  if (filtered)
    for (size_t p = tl.first_pos(); p < last; ++p)
      if (matches(app, tl.at(p))) rows.push_back(p);
  size_t row_count = filtered ? rows.size() : last - tl.first_pos();
  auto row_pos = [&](size_t r) { return filtered ? rows[r] : tl.first_pos() + r; };

  if (ImGui::BeginTable("log", 4,
                        ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                            ImGuiTableFlags_SizingFixedFit)) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("#", ImGuiTableColumnFlags_WidthFixed, 52);
    ImGui::TableSetupColumn("nic/seq", ImGuiTableColumnFlags_WidthFixed, 100);
    ImGui::TableSetupColumn("t (ms) (?)", ImGuiTableColumnFlags_WidthFixed, 78);
    ImGui::TableSetupColumn("event", ImGuiTableColumnFlags_WidthStretch);
    header_row_with_tips();
    ImGuiListClipper clipper;
    clipper.Begin(int(row_count));
    while (clipper.Step()) {
      for (int r = clipper.DisplayStart; r < clipper.DisplayEnd; ++r) {
        size_t p = row_pos(size_t(r));
        const Event& e = tl.at(p);
        ImGui::TableNextRow();
        if (p + 1 == cur) ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg0, IM_COL32(110, 95, 20, 255));
        ImGui::TableNextColumn();
        char id[32];
        std::snprintf(id, sizeof id, "%zu", p + 1);
        bool sel = app.selected && *app.selected == p;
        if (ImGui::Selectable(id, sel, ImGuiSelectableFlags_SpanAllColumns)) app.selected = p;
        ImGui::TableNextColumn();
        ImGui::Text("%s #%llu", e.nic.c_str(), static_cast<unsigned long long>(e.seq));
        ImGui::TableNextColumn();
        ImGui::Text("%.3f", double(e.t_ns) / 1e6);
        ImGui::TableNextColumn();
        bool bad = e.kind == "error" || e.kind == "nak" || e.kind == "pkt_drop" || e.kind == "retransmit" ||
                   (e.kind == "cqe" && e.u("status_num") != 0) || (e.kind == "pkt_tx" && e.s("fault") == "drop");
        if (bad) ImGui::TextColored({1, 0.45f, 0.35f, 1}, "%s", summarize(e).c_str());
        else ImGui::TextUnformatted(summarize(e).c_str());
      }
    }
    // Keep the playhead's row (the last one shown) in view whenever the playhead moves.
    static size_t last_cur = ~size_t(0);
    if (only_until_playhead && cur != last_cur && row_count) ImGui::SetScrollHereY(1.0f);
    last_cur = cur;
    ImGui::EndTable();
  }
  ImGui::End();
}

}  // namespace simnic::viz
