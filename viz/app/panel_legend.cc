// The legend: every abbreviation, marker and colour simnic-viz draws, in one window reachable
// from the menu (View > Legend) and from the top bar. docs/viz.md has the same list.
#include <GLFW/glfw3.h>
#include <imgui.h>

#include "viz/app/palette.h"
#include "viz/app/viz_app.h"

namespace simnic::viz {

namespace {

// Each section is a two-column table: the mark (a colour swatch or a term), what it means.
bool begin_terms(const char* id) {
  if (!ImGui::BeginTable(id, 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) return false;
  ImGui::TableSetupColumn("mark", ImGuiTableColumnFlags_WidthFixed, 150);
  ImGui::TableSetupColumn("meaning", ImGuiTableColumnFlags_WidthStretch);
  return true;
}

void swatch(ImU32 col, const char* name, const char* meaning) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImVec2 p = ImGui::GetCursorScreenPos();
  float s = ImGui::GetTextLineHeight();
  ImGui::GetWindowDrawList()->AddRectFilled({p.x, p.y + 1}, {p.x + s, p.y + s - 1}, col, 2);
  ImGui::Dummy({s + 2, s});
  ImGui::SameLine();
  ImGui::TextWrapped("%s", name);
  ImGui::TableNextColumn();
  ImGui::TextWrapped("%s", meaning);
}

void term(const char* name, const char* meaning) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 221, 0, 255));
  ImGui::TextWrapped("%s", name);
  ImGui::PopStyleColor();
  ImGui::TableNextColumn();
  ImGui::TextWrapped("%s", meaning);
}

void legend_packets() {
  swatch(packet_colour(PacketClass::kSend), "SEND", "a message for the peer's posted RECV (ibv_post_send IBV_WR_SEND)");
  swatch(packet_colour(PacketClass::kWrite), "WRITE",
         "RDMA WRITE: data put straight into the peer's memory (its rkey)");
  swatch(packet_colour(PacketClass::kReadRequest), "READ req", "RDMA READ request: asks the peer for its memory");
  swatch(packet_colour(PacketClass::kReadResponse), "READ resp / RESP", "the data a READ asked for, coming back");
  swatch(packet_colour(PacketClass::kAtomic), "ATOMIC",
         "compare-and-swap, fetch-and-add or ATOMIC WRITE on 8 bytes of the peer's memory");
  swatch(packet_colour(PacketClass::kAck), "ACK", "the responder confirms every packet up to this PSN");
  swatch(packet_colour(PacketClass::kNak), "NAK / RNR",
         "negative ACK (PSN out of sequence, bad rkey, ...); RNR = receiver not ready (no RECV posted)");
  swatch(packet_colour(PacketClass::kOther), "grey", "a burst that mixes several kinds");
  term("F / M / L", "first / middle / last packet of a message longer than the MTU; no letter = the only packet");
  term("0x1a2b3c", "the packet's PSN (packet sequence number, 24 bits, hex as in the NIC's logs and perftest)");
  term(
      "SEND \xC3\x97"
      "12",
      "12 packets sent back to back, one block; click it to zoom in, right-click to list them");
  term("R", "retransmission (orange frame): a PSN sent again after a NAK or an ACK timeout");
  term("X",
       "(faded, red frame) dropped on the wire by the fault injector (simnic fault loss=...); "
       "the sender resends it when its ACK timer fires or the receiver NAKs the gap");
  term("upper / lower", "upper lane: left NIC to right NIC; lower lane: right to left");
}

void legend_qps() {
  term("RESET INIT RTR RTS", "the QP's states as ibv_modify_qp moves it: RTR = ready to receive, RTS = ready to send");
  term("SQD", "send queue drain: in-flight requests finish, new ones wait");
  term("SQE", "send queue error (UC/UD): the send queue is flushed, receives go on");
  term("ERR", "error: every outstanding and later work request completes with WR_FLUSH_ERR");
  term("lit / bold", "the current state is lit (red for ERR/SQE); the bold arrow is the last transition");
  term("peer, PSNs",
       "the QP header shows the attributes ibv_modify_qp set: peer QP (dest_qp) and address, "
       "SQ PSN (first PSN this QP sends), RQ PSN (first PSN it expects), MTU, timeout, retries");
  term("last packet", "greyed below the attributes: the PSN of the latest packet sent / received (moves with traffic)");
  term("destroyed", "a QP, CQ or MR the program destroyed (ibv_destroy_qp, ...)");
}

void legend_rings() {
  term("SQ 1/8", "send queue: 1 work request (WQE) outstanding of 8 slots");
  term("RQ 2/8", "receive queue: 2 posted RECVs waiting for a SEND, of 8 slots");
  term("CQ #3", "completion queue with handle 3 (a name, not a count); its slots are completions (CQEs)");
  term("P", "producer index: where the next entry goes (the application posts WQEs; the NIC writes CQEs)");
  term("C", "consumer index: the oldest entry the NIC has not finished yet");
  term("P=C", "producer and consumer at the same slot: the ring is empty");
  swatch(status_colour(true), "green CQE", "completed successfully (older ones fade)");
  swatch(status_colour(false), "red CQE", "completed with an error status (click it: the status and why)");
  swatch(wqe_colour("RECV"), "light blue slot", "a posted RECV; other WQE slots take their packet's colour");
}

void legend_log() {
  term("#", "position in the merged timeline (what --at @POS names)");
  term("nic/seq", "which NIC, and its own event number");
  term("t (ms)",
       "that NIC's own simulated clock (ms since it started; stops while it is held). Rows of "
       "several NICs are merged by wall clock, with one rule on top: a packet is always received "
       "after it was sent. So t may step back when the row's NIC changes: each NIC has its own clock.");
  term("red rows", "errors, NAKs, drops, retransmissions, error completions");
  term("QPN, PSN, keys",
       "in hex (0x...), as the NIC's logs, ibv_rc_pingpong and perftest print them; the "
       "inspector adds the decimal value");
}

}  // namespace

void draw_legend(VizApp& app, float x, float y, float w, float h) {
  ImGui::SetNextWindowPos({x, y}, ImGuiCond_Appearing);
  ImGui::SetNextWindowSize({w, h}, ImGuiCond_Appearing);
  ImGui::SetNextWindowBgAlpha(1.0f);  // over the panels: nothing may show through the text
  if (!ImGui::Begin("Legend (F1)", &app.show_legend)) {
    ImGui::End();
    return;
  }
  if (ImGui::CollapsingHeader("Packets on the wire", ImGuiTreeNodeFlags_DefaultOpen) && begin_terms("legend_packets")) {
    legend_packets();
    ImGui::EndTable();
  }
  if (ImGui::CollapsingHeader("QP states and attributes", ImGuiTreeNodeFlags_DefaultOpen) &&
      begin_terms("legend_qps")) {
    legend_qps();
    ImGui::EndTable();
  }
  if (ImGui::CollapsingHeader("Rings: SQ, RQ, CQ", ImGuiTreeNodeFlags_DefaultOpen) && begin_terms("legend_rings")) {
    legend_rings();
    ImGui::EndTable();
  }
  if (ImGui::CollapsingHeader("Event log and numbers", ImGuiTreeNodeFlags_DefaultOpen) && begin_terms("legend_log")) {
    legend_log();
    ImGui::EndTable();
  }
  ImGui::End();
}

float draw_menu(VizApp& app) {
  float h = 0;
  if (ImGui::BeginMainMenuBar()) {
    if (ImGui::BeginMenu("View")) {
      ImGui::MenuItem("Legend (what every label and colour means)", "F1", &app.show_legend);
      ImGui::MenuItem("Enlarge the inspector", "F2", &app.inspector_big);
      if (ImGui::MenuItem("Fit the whole wire")) app.wire_view.zoom = 1, app.wire_view.centre = 0.5;
      ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("Help")) {
      ImGui::MenuItem("Legend", "F1", &app.show_legend);
      ImGui::TextDisabled("docs/viz.md: how to use simnic-viz");
      ImGui::EndMenu();
    }
    h = ImGui::GetWindowSize().y;
    ImGui::EndMainMenuBar();
  }
  // Dear ImGui 1.86 indexes keys by the GLFW backend's native key codes.
  if (ImGui::IsKeyPressed(GLFW_KEY_F1, false)) app.show_legend = !app.show_legend;
  if (ImGui::IsKeyPressed(GLFW_KEY_F2, false)) app.inspector_big = !app.inspector_big;
  return h;
}

}  // namespace simnic::viz
