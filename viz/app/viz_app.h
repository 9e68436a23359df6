// simnic-viz's application state: the timeline, the playhead, what is selected, filters, and
// the live connection. Panels (one file each) read it and draw; this file draws nothing.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "viz/model/timeline.h"
#include "viz/model/trace_sources.h"
#include "viz/model/wire_layout.h"

namespace simnic::viz {

struct VizOptions {
  std::vector<std::string> trace_files;  // replay these
  std::vector<std::string> live_nics;    // or attach to these
  std::string simnic_dir;                // where live NICs' sockets are
  std::string screenshot;                // render one frame to this PNG and exit
  std::string at;                        // with --screenshot: "SEQ", "NIC:SEQ" or "@POS"
  std::string select;                    // open this event in the inspector ("SEQ", "NIC:SEQ", "@POS")
  int wait_ms = 1500;                    // live --screenshot: watch this long first
  std::string layout_dump;               // with --screenshot: write the wire's label blocks here
  std::string panel_dump;                // with --screenshot: write each NIC part's room and use here
  double zoom = 1;                       // the wire's initial zoom
  bool legend = false;                   // open the legend window at start
  bool big_inspector = false;            // start with the inspector enlarged
  int width = 1280, height = 800;
};

class VizApp {
 public:
  explicit VizApp(VizOptions opt) : opt_(std::move(opt)) {
    show_legend = opt_.legend;
    inspector_big = opt_.big_inspector;
    wire_view.zoom = opt_.zoom;
  }
  bool start(std::string* error);  // loads or attaches
  // Per frame: pulls live events, advances the playhead by dt seconds, draws every panel.
  void frame(float dt, float width, float height);

  // The playhead: `pos` events are applied (fractional part: animation between events).
  double pos = 0;
  bool playing = false;
  bool follow_live = true;
  float speed = 6.0f;  // events per second while playing

  // The selection the inspector shows: an event position (a WQE's, packet's or CQE's event).
  std::optional<size_t> selected;

  Timeline timeline;
  bool live() const { return live_ != nullptr; }
  const VizOptions& options() const { return opt_; }
  // Resolves --at: "SEQ" (the only NIC's, or the first NIC's), "NIC:SEQ", or "@POS" (merged
  // position). Returns the playhead that shows that event applied.
  std::optional<double> resolve_at(const std::string& at) const;
  // Step mode of live NICs, through their control sockets.
  std::string step(const std::string& nic, const std::string& cmd);
  struct StepStatus {
    bool paused = false;
    uint64_t held = 0;
  };
  std::vector<std::pair<std::string, StepStatus>> step_status;
  std::string last_message;

  // The wire panel's zoom, the blocks it drew last frame (for --layout-dump), and the burst
  // whose packets the right-click list shows.
  WireView wire_view;
  std::vector<WireBlock> wire_blocks;
  std::vector<size_t> burst_members;
  // Each NIC column's parts as drawn last frame: their rect, and the height their content took
  // (`used`) against what they have (`room`), for --panel-dump.
  struct PanelFit {
    std::string panel;  // "simnic0/qps", "simnic0/side"
    float x0, y0, x1, y1;
    float used, room;
  };
  std::vector<PanelFit> panel_fits;
  bool show_legend = false;
  bool inspector_big = false;  // the inspector over the NIC columns, for long values

  // Filters of the event log.
  char filter_nic[32] = "";
  char filter_qp[16] = "";
  char filter_kind[32] = "";

  // The state at the playhead, cached until the playhead moves to another whole event.
  const World& world();

 private:
  void advance(float dt);
  void refresh_step_status();
  VizOptions opt_;
  std::unique_ptr<LiveFeed> live_;
  World world_;
  size_t world_pos_ = ~size_t(0);
  size_t world_end_ = 0;
  double step_status_age_ = 1e9;
};

// Panels: each draws one window from the app's state.
void draw_timeline_bar(VizApp& app, float x, float y, float w, float h);
void draw_wire(VizApp& app, float x, float y, float w, float h);
void draw_nic(VizApp& app, const NicState& nic, float x, float y, float w, float h);
void draw_event_log(VizApp& app, float x, float y, float w, float h);
void draw_inspector(VizApp& app, float x, float y, float w, float h);
void draw_legend(VizApp& app, float x, float y, float w, float h);
// The menu bar (View: legend, inspector size); returns its height.
float draw_menu(VizApp& app);

}  // namespace simnic::viz
