#include "viz/app/viz_app.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "simnic/abi/control.h"
#include "simnic/client/nic_client.h"
#include "viz/model/panel_layout.h"

namespace simnic::viz {

bool VizApp::start(std::string* error) {
  if (!opt_.trace_files.empty()) {
    size_t skipped = 0;
    if (!load_trace_files(opt_.trace_files, &timeline, error, &skipped)) return false;
    if (timeline.empty()) {
      *error = "no trace events in the given file(s)";
      return false;
    }
    if (skipped) last_message = std::to_string(skipped) + " malformed or over-long (1 MiB) line(s) skipped";
    pos = double(timeline.first_pos());
    follow_live = false;
    return true;
  }
  live_ = std::make_unique<LiveFeed>();
  for (const auto& nic : opt_.live_nics)
    if (!live_->attach(opt_.simnic_dir, nic, error)) return false;
  return true;
}

std::optional<double> VizApp::resolve_at(const std::string& at) const {
  if (timeline.empty() || at.empty()) return std::nullopt;
  char* end = nullptr;
  if (at[0] == '@') {
    unsigned long long p = std::strtoull(at.c_str() + 1, &end, 10);
    if (*end) return std::nullopt;
    return double(std::min<size_t>(p, timeline.end_pos()));
  }
  std::string nic;
  std::string num = at;
  if (auto colon = at.rfind(':'); colon != std::string::npos) nic = at.substr(0, colon), num = at.substr(colon + 1);
  else nic = timeline.at(timeline.first_pos()).nic;
  unsigned long long seq = std::strtoull(num.c_str(), &end, 10);
  if (*end || num.empty()) return std::nullopt;
  size_t p = timeline.find(nic, seq);
  if (p == timeline.end_pos()) return std::nullopt;
  return double(p + 1);
}

const World& VizApp::world() {
  size_t p = size_t(std::floor(pos));
  if (p != world_pos_ || (p == timeline.end_pos() && world_end_ != timeline.end_pos())) {
    world_ = timeline.state_at(p);
    world_pos_ = p;
    world_end_ = timeline.end_pos();
  }
  return world_;
}

std::string VizApp::step(const std::string& nic, const std::string& cmd) {
  std::string text;
  int st = client::query_nic(opt_.simnic_dir, nic, unsigned(abi::Op::Step), cmd, &text);
  step_status_age_ = 1e9;  // refresh soon
  if (st != 0) return nic + ": " + (text.empty() ? std::string(std::strerror(st)) : text);
  return "";
}

void VizApp::refresh_step_status() {
  step_status.clear();
  for (const auto& nic : live_->nics()) {
    std::string text;
    StepStatus s;
    if (client::query_nic(opt_.simnic_dir, nic, unsigned(abi::Op::Step), "status", &text) == 0) {
      auto kv = client::parse_kv(text);
      s.paused = kv["paused"] == "1";
      s.held = std::strtoull(kv["held"].c_str(), nullptr, 10);
    }
    step_status.emplace_back(nic, s);
  }
}

void VizApp::advance(float dt) {
  if (live_) {
    live_->poll(&timeline);
    timeline.trim(400'000);
    if ((step_status_age_ += dt) > 0.5) {
      refresh_step_status();
      step_status_age_ = 0;
    }
  }
  double end = double(timeline.end_pos());
  pos = std::max(pos, double(timeline.first_pos()));
  if (live_ && follow_live) {
    // Chase the live end: at the chosen speed when close, faster when far behind.
    double gap = end - pos;
    pos = std::min(end, pos + dt * std::max<double>(speed, gap * 2.0));
  } else if (playing) {
    pos = std::min(end, pos + dt * speed);
    if (pos >= end && !live_) playing = false;
  }
}

void VizApp::frame(float dt, float width, float height) {
  advance(dt);
  panel_fits.clear();
  const float menu_h = draw_menu(*this);
  const World& w = world();
  const PanelRects r = layout_panels(width, height, menu_h, w.size(), inspector_big);
  draw_timeline_bar(*this, r.timeline.x0, r.timeline.y0, r.timeline.x1 - r.timeline.x0, r.timeline.y1 - r.timeline.y0);
  draw_wire(*this, r.wire.x0, r.wire.y0, r.wire.x1 - r.wire.x0, r.wire.y1 - r.wire.y0);
  size_t i = 0;
  for (const auto& [name, nic] : w) {
    const Rect& c = r.nics[i++];
    draw_nic(*this, nic, c.x0, c.y0, c.x1 - c.x0, c.y1 - c.y0);
  }
  draw_event_log(*this, r.log.x0, r.log.y0, r.log.x1 - r.log.x0, r.log.y1 - r.log.y0);
  draw_inspector(*this, r.inspector.x0, r.inspector.y0, r.inspector.x1 - r.inspector.x0,
                 r.inspector.y1 - r.inspector.y0);
  if (show_legend) draw_legend(*this, width * 0.3f, menu_h + 20, width * 0.55f, height * 0.8f);
}

}  // namespace simnic::viz
