// One NIC's column: each QP with its state diagram and its SQ and RQ rings, the CQs as rings
// of CQEs, the MR table and the counters.
#include <imgui.h>

#include <string>

#include "viz/app/palette.h"
#include "viz/app/qp_diagram.h"
#include "viz/app/ring_view.h"
#include "viz/app/viz_app.h"

namespace simnic::viz {

namespace {

RingSpec ring_of(const char* name, const WorkQueue& wq) {
  RingSpec r;
  r.entries = wq.entries;
  r.producer = wq.producer;
  r.consumer = wq.consumer;
  r.title = std::string(name) + " " + std::to_string(wq.posted.size()) + "/" + std::to_string(wq.entries);
  for (const auto& [idx, s] : wq.posted)
    r.slots.push_back({idx, wqe_colour(s.opcode),
                       std::string(name) + "[" + std::to_string(idx % std::max<uint32_t>(1, wq.entries)) + "] " + s.opcode +
                           "\nwr_id " + std::to_string(s.wr_id) + ", " + std::to_string(s.length) + " B" +
                           (s.flags.empty() ? "" : ", " + s.flags),
                       s.event_pos});
  return r;
}

void pick(VizApp& app, size_t p) {
  if (p != ~size_t(0)) app.selected = p;
}

}  // namespace

void draw_nic(VizApp& app, const NicState& nic, float x, float y, float w, float h) {
  ImGui::SetNextWindowPos({x, y});
  ImGui::SetNextWindowSize({w, h});
  std::string title = nic.name + "  (" + nic.addr + ", MTU " + std::to_string(nic.mtu) + ")" + (nic.paused ? "  HELD" : "") +
                      "###" + nic.name;
  if (!ImGui::Begin(title.c_str(), nullptr, ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoCollapse)) {
    ImGui::End();
    return;
  }
  ImGui::PushID(nic.name.c_str());
  float avail = ImGui::GetContentRegionAvail().x;
  if (nic.qps.empty()) ImGui::TextDisabled("no QPs (yet)");
  for (const auto& [qpn, qp] : nic.qps) {
    ImGui::PushID(int(qpn));
    ImGui::Text("QP %u %s -> remote QP %u   sq psn %llu  rq psn %llu", qpn, qp.type.c_str(), qp.dest_qp,
                static_cast<unsigned long long>(qp.last_tx_psn), static_cast<unsigned long long>(qp.last_rx_psn));
    if (!qp.last_error.empty()) ImGui::TextColored({1, 0.35f, 0.3f, 1}, "error: %s", qp.last_error.c_str());
    float ring = std::min(110.0f, avail * 0.22f);
    draw_qp_diagram(qp.state, qp.prev_state, std::max(120.0f, avail - 2 * ring - 24), ring * 0.8f);
    ImGui::SameLine();
    pick(app, draw_ring(ring_of("SQ", qp.sq), ring));
    ImGui::SameLine();
    pick(app, draw_ring(ring_of("RQ", qp.rq), ring));
    ImGui::PopID();
  }

  if (!nic.cqs.empty()) {
    ImGui::Separator();
    float ring = std::min(96.0f, avail * 0.2f);
    int shown = 0;
    for (const auto& [h, cq] : nic.cqs) {
      ImGui::PushID(int(h) + 100000);
      RingSpec r;
      r.entries = cq.entries;
      r.producer = cq.produced;
      r.show_consumer = false;  // the application's poll index lives in its own memory
      r.title = "CQ " + std::to_string(h);
      // The newest CQEs, bright, older ones fading.
      size_t n = cq.recent.size(), k = 0;
      for (const CqeRecord& c : cq.recent) {
        ImU32 col = status_colour(c.status_num == 0);
        float age = n > 1 ? float(n - 1 - k) / float(n) : 0;
        col = (col & 0x00FFFFFF) | (ImU32(255 - 170 * age) << 24);
        r.slots.push_back({c.index, col,
                           "CQE[" + std::to_string(c.index % std::max<uint32_t>(1, cq.entries)) + "] " + c.opcode + " " +
                               c.status + "\nqp " + std::to_string(c.qp) + ", wr_id " + std::to_string(c.wr_id) +
                               ", byte_len " + std::to_string(c.byte_len),
                           c.event_pos});
        ++k;
      }
      if (shown++ % 4) ImGui::SameLine();
      pick(app, draw_ring(r, ring));
      ImGui::PopID();
    }
  }

  if (ImGui::CollapsingHeader("Memory regions and windows", ImGuiTreeNodeFlags_DefaultOpen)) {
    if (ImGui::BeginTable("mrs", 5, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
      ImGui::TableSetupColumn("MR");
      ImGui::TableSetupColumn("lkey/rkey");
      ImGui::TableSetupColumn("range");
      ImGui::TableSetupColumn("length");
      ImGui::TableSetupColumn("rights");
      ImGui::TableHeadersRow();
      for (const auto& [handle, mr] : nic.mrs) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("%u", handle);
        ImGui::TableNextColumn();
        ImGui::Text("0x%x", mr.lkey);
        ImGui::TableNextColumn();
        ImGui::Text("0x%llx", static_cast<unsigned long long>(mr.addr));
        ImGui::TableNextColumn();
        ImGui::Text("%llu", static_cast<unsigned long long>(mr.length));
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(mr.access.empty() ? "LOCAL_READ" : mr.access.c_str());
      }
      // Memory windows: remote access to part of an MR under their own rkey.
      for (const auto& [handle, mw] : nic.mws) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("MW %u (type %u)", handle, mw.type);
        ImGui::TableNextColumn();
        ImGui::Text("rkey 0x%x", mw.rkey);
        ImGui::TableNextColumn();
        if (mw.mr) ImGui::Text("0x%llx in MR %u", static_cast<unsigned long long>(mw.addr), mw.mr);
        else ImGui::TextDisabled("not bound");
        ImGui::TableNextColumn();
        ImGui::Text("%llu", static_cast<unsigned long long>(mw.length));
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(mw.mr ? mw.access.c_str() : "-");
      }
      ImGui::EndTable();
    }
  }
  if (ImGui::CollapsingHeader("Counters")) {
    for (const auto& [name, v] : nic.counters) ImGui::Text("%-22s %llu", name.c_str(), static_cast<unsigned long long>(v));
  }
  ImGui::PopID();
  ImGui::End();
}

}  // namespace simnic::viz
