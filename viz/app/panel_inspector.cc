// The inspector: the selected WQE, packet or CQE event with every field decoded and a
// one-line explanation of what each field means.
#include <imgui.h>

#include "viz/app/viz_app.h"
#include "viz/model/field_help.h"
#include "viz/model/format.h"

namespace simnic::viz {

namespace {

void field_row(const std::string& kind, const std::string& key, const nlohmann::ordered_json& v,
               const std::string& path) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TextWrapped("%s", path.c_str());
  ImGui::TableNextColumn();
  std::string text = v.is_string() ? v.get<std::string>() : v.dump();
  // QPNs, PSNs and keys in hex as everywhere else, with the decimal value beside.
  if (v.is_number_unsigned() && is_hex_field(key)) text = hex_dec(v.get<uint64_t>());
  ImGui::TextWrapped("%s", text.c_str());  // long values (a rule, an access list) wrap, never cut
  ImGui::TableNextColumn();
  std::string help = explain_field(kind, path);
  if (help.empty()) help = explain_field(kind, key);
  if (path == "aeth.syndrome" && v.is_number_unsigned()) help += " -> " + explain_syndrome(unsigned(v.get<uint64_t>()));
  ImGui::TextWrapped("%s", help.c_str());
}

}  // namespace

void draw_inspector(VizApp& app, float x, float y, float w, float h) {
  ImGui::SetNextWindowPos({x, y});
  ImGui::SetNextWindowSize({w, h});
  if (app.inspector_big) ImGui::SetNextWindowBgAlpha(1.0f);  // over the NIC columns: opaque
  if (!ImGui::Begin(app.inspector_big ? "Inspector (enlarged: F2 or 'shrink' to restore)###Inspector"
                                      : "Inspector###Inspector",
                    nullptr, ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoCollapse)) {
    ImGui::End();
    return;
  }
  const Timeline& tl = app.timeline;
  if (!app.selected || *app.selected < tl.first_pos() || *app.selected >= tl.end_pos()) {
    ImGui::TextWrapped(
        "Click a packet on the wire, a slot of a ring (WQE or CQE) or a row of the event log to see "
        "every field, decoded and explained.");
    ImGui::End();
    return;
  }
  const Event& e = tl.at(*app.selected);
  if (ImGui::SmallButton("go to this event"))
    app.pos = double(*app.selected + 1), app.playing = false, app.follow_live = false;
  ImGui::SameLine();
  if (ImGui::SmallButton(app.inspector_big ? "shrink (F2)" : "enlarge (F2)")) app.inspector_big = !app.inspector_big;
  ImGui::TextWrapped("%s", summarize(e).c_str());
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyle().Colors[ImGuiCol_TextDisabled]);
  ImGui::TextWrapped("%s", explain_kind(e.kind).c_str());
  ImGui::PopStyleColor();
  if (ImGui::BeginTable("fields", 3,
                        ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                            ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_Resizable)) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("field", ImGuiTableColumnFlags_WidthStretch, 0.8f);
    ImGui::TableSetupColumn("value", ImGuiTableColumnFlags_WidthStretch, 1.3f);
    ImGui::TableSetupColumn("what it means", ImGuiTableColumnFlags_WidthStretch, 2.2f);
    ImGui::TableHeadersRow();
    // What this event is about first (headers, WQE, CQE fields), the bookkeeping last.
    auto common = [](const std::string& k) { return k == "seq" || k == "t_ns" || k == "nic" || k == "kind"; };
    for (bool bookkeeping : {false, true}) {
      for (auto it = e.fields.begin(); it != e.fields.end(); ++it) {
        if (common(it.key()) != bookkeeping) continue;
        if (it->is_object()) {
          for (auto sub = it->begin(); sub != it->end(); ++sub)
            field_row(e.kind, sub.key(), sub.value(), it.key() + "." + sub.key());
        } else {
          field_row(e.kind, it.key(), it.value(), it.key());
        }
      }
    }
    ImGui::EndTable();
  }
  ImGui::End();
}

}  // namespace simnic::viz
