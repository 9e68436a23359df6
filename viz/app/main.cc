// simnic-viz: watch simulated NICs live, or replay their recorded traces.
//
//   simnic-viz [--dir DIR] [NIC...]             attach to running NICs (default: all in DIR)
//   simnic-viz --replay FILE... [--screenshot OUT.png --at SEQ|NIC:SEQ|@POS] [--size WxH]
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "simnic/abi/paths.h"
#include "simnic/client/nic_client.h"
#include "viz/app/viz_app.h"
#include "viz/model/moment.h"

using simnic::viz::VizApp;
using simnic::viz::VizOptions;

namespace {

const char* kUsage =
    "usage: simnic-viz [--dir DIR] [NIC...]          watch running NICs live (default: all)\n"
    "       simnic-viz --replay FILE...               replay recorded traces (simnic up --trace DIR)\n"
    "options:\n"
    "  --screenshot OUT.png   render one frame to a PNG and exit (live: after --wait-ms)\n"
    "  --wait-ms MS           live screenshot: watch this long first (default 1500)\n"
    "  --at SEQ | NIC:SEQ | @POS   the event to show: SEQ of the first NIC, NIC's SEQ, or\n"
    "                         the position in the merged timeline (default: the last data\n"
    "                         transfer, a data packet or a completion; not the teardown)\n"
    "  --select SEQ | NIC:SEQ | @POS   open this event in the inspector\n"
    "  --size WxH             window size (default 1280x800)\n"
    "  --zoom Z               the wire panel's zoom (default 1: the whole wire)\n"
    "  --legend               open the legend window (also: F1, View > Legend)\n"
    "  --big-inspector        start with the inspector enlarged (also: F2)\n"
    "  --layout-dump FILE     with --screenshot: write the wire's label boxes as JSON lines\n"
    "  --panel-dump FILE      with --screenshot: write each NIC panel part's height used and\n"
    "                         available as JSON lines (a part that overflows is cut off)\n";

bool parse_args(int argc, char** argv, VizOptions* o) {
  bool replay = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--replay") {
      replay = true;
    } else if (a == "--dir") {
      if (!value(&o->simnic_dir)) return false;
    } else if (a == "--screenshot") {
      if (!value(&o->screenshot)) return false;
    } else if (a == "--wait-ms") {
      std::string v;
      if (!value(&v)) return false;
      o->wait_ms = std::atoi(v.c_str());
    } else if (a == "--select") {
      if (!value(&o->select)) return false;
    } else if (a == "--layout-dump") {
      if (!value(&o->layout_dump)) return false;
    } else if (a == "--panel-dump") {
      if (!value(&o->panel_dump)) return false;
    } else if (a == "--zoom") {
      std::string v;
      if (!value(&v)) return false;
      o->zoom = std::max(1.0, std::atof(v.c_str()));
    } else if (a == "--legend") {
      o->legend = true;
    } else if (a == "--big-inspector") {
      o->big_inspector = true;
    } else if (a == "--at") {
      if (!value(&o->at)) return false;
    } else if (a == "--size") {
      std::string s;
      if (!value(&s) || std::sscanf(s.c_str(), "%dx%d", &o->width, &o->height) != 2) return false;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "simnic-viz: unknown option %s\n", a.c_str());
      return false;
    } else {
      (replay ? o->trace_files : o->live_nics).push_back(a);
    }
  }
  if (o->simnic_dir.empty()) o->simnic_dir = simnic::abi::simnic_dir();
  if (!replay && o->live_nics.empty()) o->live_nics = simnic::client::list_nics(o->simnic_dir);
  if (replay && o->trace_files.empty()) return false;
  return true;
}

// The wire's label boxes as drawn in the screenshot, one JSON line each, so that a test can
// check them with the layout code's own overlap test (not by looking at pixels).
bool write_layout(const std::string& path, const VizApp& app) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  for (const simnic::viz::WireBlock& b : app.wire_blocks) {
    simnic::viz::Rect r = b.rect(app.wire_view);
    nlohmann::json j{{"x0", r.x0},
                     {"y0", r.y0},
                     {"x1", r.x1},
                     {"y1", r.y1},
                     {"label", b.label},
                     {"packets", b.members.size()},
                     {"label_w", simnic::viz::label_width(b.label, app.wire_view)}};
    std::fprintf(f, "%s\n", j.dump().c_str());
  }
  return std::fclose(f) == 0;
}

// Each NIC panel part as drawn: its rect, the height its content used and the room it had, so
// that a test can tell that nothing was cut off.
bool write_panels(const std::string& path, const VizApp& app) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  for (const VizApp::PanelFit& p : app.panel_fits) {
    nlohmann::json j{{"panel", p.panel}, {"x0", p.x0},     {"y0", p.y0},    {"x1", p.x1},
                     {"y1", p.y1},       {"used", p.used}, {"room", p.room}};
    std::fprintf(f, "%s\n", j.dump().c_str());
  }
  return std::fclose(f) == 0;
}

bool write_png(const std::string& path, int w, int h) {
  std::vector<unsigned char> px(size_t(w) * size_t(h) * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
  stbi_flip_vertically_on_write(1);  // OpenGL's rows go bottom-up
  return stbi_write_png(path.c_str(), w, h, 4, px.data(), w * 4) != 0;
}

// Where the screenshot is taken (--at) and what the inspector shows (--select); 0, or the
// exit code when either names no event.
int place_cursor(VizApp& app, const VizOptions& opt) {
  if (!opt.screenshot.empty() && !app.live()) {
    // Not told when: the last data transfer, not the teardown's empty panels.
    auto at = opt.at.empty() ? std::optional<double>(double(simnic::viz::last_transfer_pos(app.timeline)))
                             : app.resolve_at(opt.at);
    if (!at) {
      std::fprintf(stderr, "simnic-viz: --at %s names no event of this trace\n", opt.at.c_str());
      return 2;
    }
    app.pos = *at;
  }
  if (!opt.select.empty()) {
    auto sel = app.resolve_at(opt.select);
    if (!sel || *sel < 1) {
      std::fprintf(stderr, "simnic-viz: --select %s names no event of this trace\n", opt.select.c_str());
      return 2;
    }
    app.selected = size_t(*sel) - 1;
  }
  return 0;
}

// A window with ImGui on OpenGL 3 (hidden for a screenshot), or nullptr.
GLFWwindow* open_window(const VizOptions& opt, bool hidden) {
  glfwSetErrorCallback(
      [](int code, const char* what) { std::fprintf(stderr, "simnic-viz: GLFW %d: %s\n", code, what); });
  if (!glfwInit()) {
    std::fprintf(stderr, "simnic-viz: no display (set DISPLAY, or run under xvfb-run)\n");
    return nullptr;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
  if (hidden) glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
  GLFWwindow* window = glfwCreateWindow(opt.width, opt.height, "simnic-viz", nullptr, nullptr);
  if (!window) {
    glfwTerminate();
    return nullptr;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(1);
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // the layout is computed, nothing to remember
  ImGui::StyleColorsDark();
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 130");
  return window;
}

void close_window(GLFWwindow* window) {
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
}

// Draws one frame of the app into the back buffer; its size in *fw, *fh.
void draw_frame(GLFWwindow* window, VizApp& app, float dt, int* fw, int* fh) {
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  ImGui::NewFrame();
  glfwGetFramebufferSize(window, fw, fh);
  app.frame(dt, float(*fw), float(*fh));
  ImGui::Render();
  glViewport(0, 0, *fw, *fh);
  glClearColor(0.08f, 0.09f, 0.11f, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
}

// The drawn frame to --screenshot, and the dumps asked for; the exit code.
int write_screenshot(const VizOptions& opt, const VizApp& app, int fw, int fh) {
  if (!write_png(opt.screenshot, fw, fh)) {
    std::fprintf(stderr, "simnic-viz: cannot write %s\n", opt.screenshot.c_str());
    return 1;
  }
  if (!opt.layout_dump.empty() && !write_layout(opt.layout_dump, app)) {
    std::fprintf(stderr, "simnic-viz: cannot write %s\n", opt.layout_dump.c_str());
    return 1;
  }
  if (!opt.panel_dump.empty() && !write_panels(opt.panel_dump, app)) {
    std::fprintf(stderr, "simnic-viz: cannot write %s\n", opt.panel_dump.c_str());
    return 1;
  }
  std::printf("simnic-viz: wrote %s (%dx%d, event position %.0f of %zu, %zu packets)\n", opt.screenshot.c_str(), fw, fh,
              app.pos, app.timeline.end_pos(), app.timeline.flights().size());
  return 0;
}

// Draws frames until the window closes, or until the screenshot is written; the exit code.
int run_frames(GLFWwindow* window, VizApp& app, const VizOptions& opt) {
  bool shot = !opt.screenshot.empty();
  int frames = 0;
  double last = glfwGetTime();
  while (!glfwWindowShouldClose(window)) {
    glfwPollEvents();
    double now = glfwGetTime();
    float dt = shot && !app.live() ? 0.0f : float(now - last);
    last = now;
    int fw, fh;
    draw_frame(window, app, dt, &fw, &fh);
    // ImGui settles its layout (window sizes, table columns) over the first frames.
    ++frames;
    // A live screenshot waits for events to arrive, then shows everything that did.
    bool shot_now = shot && (app.live() ? now * 1000 >= opt.wait_ms && frames >= 4 : frames == 4);
    if (shot && app.live() && now * 1000 >= opt.wait_ms && app.pos < double(app.timeline.end_pos())) {
      app.pos = double(app.timeline.end_pos());  // catch up, draw once more, then shoot
      shot_now = false;
    }
    if (shot_now) return write_screenshot(opt, app, fw, fh);
    glfwSwapBuffers(window);
    if (!shot && !app.playing && !app.live()) glfwWaitEventsTimeout(0.05);  // idle replay: don't spin
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  VizOptions opt;
  if (!parse_args(argc, argv, &opt)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  if (opt.live_nics.empty() && opt.trace_files.empty()) {
    std::fprintf(stderr, "simnic-viz: no NIC is running in %s (start some with `simnic up`), and no --replay file\n",
                 opt.simnic_dir.c_str());
    return 1;
  }
  VizApp app(opt);
  std::string error;
  if (!app.start(&error)) {
    std::fprintf(stderr, "simnic-viz: %s\n", error.c_str());
    return 1;
  }
  if (int rc = place_cursor(app, opt)) return rc;
  GLFWwindow* window = open_window(opt, !opt.screenshot.empty());
  if (!window) return 1;
  int rc = run_frames(window, app, opt);
  close_window(window);
  return rc;
}
