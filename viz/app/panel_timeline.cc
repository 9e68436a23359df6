// The top bar: play/pause, step back/forward, speed, the timeline slider; live: follow, and
// the NICs' step mode (hold every event, release one at a time).
#include <imgui.h>

#include <cmath>

#include "viz/app/viz_app.h"

namespace simnic::viz {

void draw_timeline_bar(VizApp& app, float x, float y, float w, float h) {
  ImGui::SetNextWindowPos({x, y});
  ImGui::SetNextWindowSize({w, h});
  if (!ImGui::Begin("Timeline", nullptr,
                    ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoMove |
                        ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoCollapse |
                        ImGuiWindowFlags_NoBringToFrontOnFocus)) {
    ImGui::End();
    return;
  }
  Timeline& tl = app.timeline;
  double first = double(tl.first_pos()), end = double(tl.end_pos());
  size_t whole = size_t(std::floor(app.pos));

  ImGui::TextUnformatted(app.live() ? "LIVE" : "REPLAY");
  ImGui::SameLine();
  if (ImGui::Button("|<")) app.pos = first, app.playing = false, app.follow_live = false;
  ImGui::SameLine();
  if (ImGui::Button("< step"))
    app.pos = std::max(first, std::ceil(app.pos) - 1), app.playing = false, app.follow_live = false;
  ImGui::SameLine();
  if (ImGui::Button(app.playing ? "pause" : "play ")) app.playing = !app.playing, app.follow_live = false;
  ImGui::SameLine();
  if (ImGui::Button("step >"))
    app.pos = std::min(end, std::floor(app.pos) + 1), app.playing = false, app.follow_live = false;
  ImGui::SameLine();
  if (ImGui::Button(">|")) app.pos = end, app.playing = false;
  ImGui::SameLine();
  ImGui::SetNextItemWidth(150);
  ImGui::SliderFloat("events/s", &app.speed, 0.5f, 2000.0f, "%.1f", ImGuiSliderFlags_Logarithmic);
  ImGui::SameLine();
  if (ImGui::Button("legend (F1)")) app.show_legend = !app.show_legend;
  if (app.live()) {
    ImGui::SameLine();
    ImGui::Checkbox("follow", &app.follow_live);
    for (auto& [nic, st] : app.step_status) {
      ImGui::SameLine();
      ImGui::PushID(nic.c_str());
      ImGui::Text("| %s:", nic.c_str());
      ImGui::SameLine();
      if (!st.paused) {
        if (ImGui::SmallButton("hold")) app.last_message = app.step(nic, "on");
      } else {
        if (ImGui::SmallButton("next")) app.last_message = app.step(nic, "next 1");
        ImGui::SameLine();
        if (ImGui::SmallButton("run")) app.last_message = app.step(nic, "off");
        ImGui::SameLine();
        ImGui::Text("held %llu", static_cast<unsigned long long>(st.held));
      }
      ImGui::PopID();
    }
    if (app.step_status.size() > 1) {
      ImGui::SameLine();
      if (ImGui::SmallButton("lockstep next")) {
        for (auto& [nic, st] : app.step_status)
          if (st.paused) app.last_message = app.step(nic, "next 1");
      }
    }
  }

  // The slider works on whole events; the fractional part is animation.
  int cur = int(whole), lo = int(first), hi = int(end);
  ImGui::SetNextItemWidth(w * 0.62f);
  char label[96];
  std::snprintf(label, sizeof label, "event %d of %d", cur, hi);
  if (ImGui::SliderInt("##pos", &cur, lo, std::max(lo, hi), label)) {
    app.pos = double(cur);
    app.follow_live = false;
  }
  ImGui::SameLine();
  if (whole > tl.first_pos() && whole <= tl.end_pos()) {
    const Event& last = tl.at(whole - 1);
    ImGui::Text("%s #%llu  t=%.3f ms  %s", last.nic.c_str(), static_cast<unsigned long long>(last.seq),
                double(last.t_ns) / 1e6, summarize(last).c_str());
  } else if (!app.last_message.empty()) {
    ImGui::TextUnformatted(app.last_message.c_str());
  }
  ImGui::End();
}

}  // namespace simnic::viz
