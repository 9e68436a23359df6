// One NIC's column: each QP with its state diagram and its SQ and RQ rings, the CQs as rings
// of CQEs, the MR table and the counters.
#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "viz/app/palette.h"
#include "viz/app/qp_diagram.h"
#include "viz/app/ring_view.h"
#include "viz/app/viz_app.h"
#include "viz/model/format.h"
#include "viz/model/panel_layout.h"

namespace simnic::viz {

namespace {

RingSpec ring_of(const char* name, const WorkQueue& wq) {
  RingSpec r;
  r.entries = wq.entries;
  r.producer = wq.producer;
  r.consumer = wq.consumer;
  r.title = name;
  r.count = std::to_string(wq.posted.size()) + "/" + std::to_string(wq.entries);
  for (const auto& [idx, s] : wq.posted)
    r.slots.push_back({idx, wqe_colour(s.opcode),
                       std::string(name) + "[" + std::to_string(idx % std::max<uint32_t>(1, wq.entries)) + "] " +
                           s.opcode + "\nwr_id " + std::to_string(s.wr_id) + " (" + hex(s.wr_id) + "), " +
                           std::to_string(s.length) + " B" + (s.flags.empty() ? "" : ", " + s.flags),
                       s.event_pos});
  return r;
}

void pick(VizApp& app, size_t p) {
  if (p != ~size_t(0)) app.selected = p;
}

// IBA 9.7.6.1.3: the local ACK timeout is 4.096 us * 2^timeout; 0 means infinite.
std::string timeout_text(uint32_t t) {
  if (t == 0) return "timeout 0 (infinite)";
  double ms = 4.096e-3 * double(1ull << std::min<uint32_t>(t, 31));
  char b[64];
  std::snprintf(b, sizeof b, "timeout %u (%.3g ms)", t, ms);
  return b;
}

// The QP's header: what ibv_modify_qp set (the peer, the PSNs, MTU, timer and retries), and,
// apart and greyed, the PSNs of the latest packets, which move with the traffic.
void qp_header(uint32_t qpn, const QpInfo& qp) {
  ImGui::Text("QP %s  %s  %s", hex(qpn).c_str(), qp.type.c_str(), qp.state.c_str());
  if (!qp.attr.known || qp.state == "RESET" || qp.state == "INIT") {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyle().Colors[ImGuiCol_TextDisabled]);
    ImGui::TextWrapped("not connected yet (the peer and PSNs are set on the move to RTR/RTS)");
    ImGui::PopStyleColor();
  } else {
    const QpAttr& a = qp.attr;
    std::string peer = qp.type == "UD"
                           ? std::string("datagrams (UD): each WR names its peer")
                           : "peer " + (a.dgid.empty() ? std::string("?") : a.dgid) + " QP " + hex(a.dest_qp);
    ImGui::TextWrapped("%s   SQ PSN %s   RQ PSN %s   MTU %u", peer.c_str(), hex(a.sq_psn).c_str(),
                       hex(a.rq_psn).c_str(), a.mtu);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip(
          "As set by ibv_modify_qp: dest_qp (the peer's QPN), sq_psn (the first PSN this QP sends),\n"
          "rq_psn (the first PSN it expects from the peer), path_mtu.");
    ImGui::TextWrapped("%s   retry %u   rnr_retry %u   min RNR timer %u   access %s", timeout_text(a.timeout).c_str(),
                       a.retry_cnt, a.rnr_retry, a.min_rnr_timer, a.access.empty() ? "none" : a.access.c_str());
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip(
          "timeout: how long to wait for an ACK before resending; retry_cnt: how many times;\n"
          "rnr_retry: resends after an RNR NAK (7 = forever); min_rnr_timer: how long the peer asks\n"
          "senders to wait when no RECV is posted; access: what the peer may do remotely.");
  }
  std::string last =
      "last packet sent: " + (qp.has_tx ? "PSN " + hex(qp.last_tx_psn) + " to QP " + hex(qp.last_tx_dest_qp) : "none") +
      "   last packet received: " + (qp.has_rx ? "PSN " + hex(qp.last_rx_psn) : "none");
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyle().Colors[ImGuiCol_TextDisabled]);
  ImGui::TextWrapped("%s", last.c_str());  // wrapped: a narrow column must not cut it
  ImGui::PopStyleColor();
}

// Objects the program destroyed, so an empty panel says why it is empty.
void destroyed_line(const NicState& nic) {
  if (nic.destroyed.empty()) return;
  std::string s = "destroyed:";
  size_t shown = 0;
  for (auto it = nic.destroyed.rbegin(); it != nic.destroyed.rend() && shown < 8; ++it, ++shown) {
    const Destroyed& d = *it;
    s += " " + d.what + " " + (d.what == "QP" || d.what == "MW" ? hex(d.id) : "#" + std::to_string(d.id)) +
         (d.detail.empty() ? "" : " (" + d.detail + ")") + ",";
  }
  s.pop_back();
  if (nic.destroyed.size() > shown) s += ", ...";
  ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(150, 150, 160, 255));
  ImGui::TextWrapped("%s", s.c_str());
  ImGui::PopStyleColor();
}

// A CQ as a ring of its newest CQEs: bright, older ones fading; green success, red error.
RingSpec ring_of_cq(uint32_t h, const CqInfo& cq) {
  RingSpec r;
  r.entries = cq.entries;
  r.producer = cq.produced;
  r.show_consumer = false;               // the application's poll index lives in its own memory
  r.title = "CQ #" + std::to_string(h);  // a handle, not a count (the legend says so)
  r.count = std::to_string(cq.produced) + " CQEs";
  // The newest CQEs, bright, older ones fading.
  size_t n = cq.recent.size(), k = 0;
  for (const CqeRecord& c : cq.recent) {
    ImU32 col = status_colour(c.status_num == 0);
    float age = n > 1 ? float(n - 1 - k) / float(n) : 0;
    col = (col & 0x00FFFFFF) | (ImU32(255 - 170 * age) << 24);
    r.slots.push_back({c.index, col,
                       "CQE[" + std::to_string(c.index % std::max<uint32_t>(1, cq.entries)) + "] " + c.opcode + " " +
                           c.status + "\nqp " + hex(c.qp) + ", wr_id " + std::to_string(c.wr_id) + ", byte_len " +
                           std::to_string(c.byte_len),
                       c.event_pos});
    ++k;
  }
  return r;
}

// Each QP: its attributes, state diagram and SQ/RQ rings; destroyed ones listed.
void draw_qps(VizApp& app, const NicState& nic, float avail, float ring) {
  bool qp_destroyed =
      std::any_of(nic.destroyed.begin(), nic.destroyed.end(), [](const Destroyed& d) { return d.what == "QP"; });
  if (nic.qps.empty()) ImGui::TextDisabled(qp_destroyed ? "no QPs now: every QP was destroyed" : "no QPs yet");
  destroyed_line(nic);
  for (const auto& [qpn, qp] : nic.qps) {
    ImGui::PushID(int(qpn));
    ImGui::Separator();
    qp_header(qpn, qp);
    if (!qp.last_error.empty()) {  // the whole sentence, wrapped: it names the rule broken
      ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1, 0.35f, 0.3f, 1));
      ImGui::TextWrapped("error: %s", qp.last_error.c_str());
      ImGui::PopStyleColor();
    }
    draw_qp_diagram(qp.state, qp.prev_state, std::max(120.0f, avail - 2 * ring - 24), ring * 0.8f);
    ImGui::SameLine();
    pick(app, draw_ring(ring_of("SQ", qp.sq), ring));
    ImGui::SameLine();
    pick(app, draw_ring(ring_of("RQ", qp.rq), ring));
    ImGui::PopID();
  }
}

// The CQs, as many rings a row as fit.
void draw_cqs(VizApp& app, const NicState& nic, float avail, float ring) {
  if (nic.cqs.empty()) return;
  const int per_row = std::max(1, int((avail + 4) / (ring + ImGui::GetStyle().ItemSpacing.x)));
  int shown = 0;
  for (const auto& [h, cq] : nic.cqs) {
    ImGui::PushID(int(h) + 100000);
    if (shown++ % per_row) ImGui::SameLine();
    pick(app, draw_ring(ring_of_cq(h, cq), ring));
    ImGui::PopID();
  }
}

// The MR table: the first four columns as wide as their widest cell (plan_nic_column), the
// rights wrapped in the rest, so no cell is cut.
void draw_mr_table(const NicState& nic, const NicColumnPlan& plan) {
  ImGui::TextDisabled("Memory regions and windows");
  if (!ImGui::BeginTable("mrs", 5, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit))
    return;
  const char* headers[4] = {"MR", "lkey/rkey", "range", "length"};
  const float cell_pad = 2 * ImGui::GetStyle().CellPadding.x;
  for (int i = 0; i < 4; ++i)
    ImGui::TableSetupColumn(headers[i], ImGuiTableColumnFlags_WidthFixed, plan.mr_fixed_w[i] - cell_pad);
  ImGui::TableSetupColumn("rights", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableHeadersRow();
  const std::vector<MrRow> rows = mr_rows(nic);
  for (const MrRow& r : rows) {
    ImGui::TableNextRow();
    for (int i = 0; i < 5; ++i) {
      ImGui::TableNextColumn();
      if (i == 2 && !r.bound) ImGui::TextDisabled("%s", r.cells[i].c_str());
      else if (i == 4) ImGui::TextWrapped("%s", r.cells[i].c_str());
      else ImGui::TextUnformatted(r.cells[i].c_str());
    }
  }
  if (rows.empty()) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextDisabled("none");
  }
  ImGui::EndTable();
}

// The counters, "name=N" pairs wrapped to the width: a table of one per line would not fit.
void draw_counters(const NicState& nic) {
  ImGui::TextDisabled("Counters");
  ImGui::TextWrapped("%s", counters_text(nic).c_str());
}

// Where the part drawn in the current child window ended, against its height (--panel-dump).
void note_fit(VizApp& app, const std::string& panel) {
  const ImVec2 at = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
  const float used = ImGui::GetCursorPosY() - ImGui::GetStyle().ItemSpacing.y;
  app.panel_fits.push_back({panel, at.x, at.y, at.x + size.x, at.y + size.y, used, size.y});
}

}  // namespace

// Sized by plan_nic_column so that every part fits the column: the QPs, and beside them the CQs
// and the counters; the MR table under both, the column's whole width.
void draw_nic(VizApp& app, const NicState& nic, float x, float y, float w, float h) {
  ImGui::SetNextWindowPos({x, y});
  ImGui::SetNextWindowSize({w, h});
  std::string title = nic.name + "  (" + nic.addr + ", MTU " + std::to_string(nic.mtu) + ")" +
                      (nic.paused ? "  HELD" : "") + "###" + nic.name;
  if (!ImGui::Begin(title.c_str(), nullptr,
                    ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoCollapse |
                        ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoScrollbar)) {
    ImGui::End();
    return;
  }
  ImGui::PushID(nic.name.c_str());
  const ImGuiStyle& style = ImGui::GetStyle();
  TextMetrics m;
  m.line_h = ImGui::GetTextLineHeightWithSpacing();
  m.char_w = ImGui::CalcTextSize("M").x;
  m.title_h = ImGui::GetFrameHeight();
  m.pad = style.WindowPadding.x;
  const NicColumnPlan plan = plan_nic_column(nic, w, h, m);
  const float body_h = ImGui::GetContentRegionAvail().y;
  const float mr_h = std::min(body_h * 0.5f, plan.mr_h + style.ItemSpacing.y);
  const float upper_h = body_h - mr_h - style.ItemSpacing.y;
  ImGui::BeginChild("qps", {plan.left_w, upper_h}, false);
  draw_qps(app, nic, ImGui::GetContentRegionAvail().x, plan.qp_ring);
  note_fit(app, nic.name + "/qps");
  ImGui::EndChild();
  ImGui::SameLine(0, style.ItemSpacing.x * 2);
  ImGui::BeginChild("side", {0, upper_h}, false);
  draw_cqs(app, nic, ImGui::GetContentRegionAvail().x, plan.cq_ring);
  draw_counters(nic);
  note_fit(app, nic.name + "/side");
  ImGui::EndChild();
  ImGui::BeginChild("mrs", {0, mr_h}, false);
  draw_mr_table(nic, plan);
  note_fit(app, nic.name + "/mrs");
  ImGui::EndChild();
  ImGui::PopID();
  ImGui::End();
}

}  // namespace simnic::viz
