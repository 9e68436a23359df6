// simnic-viz must read right for a student (issue 16): the QP panel shows the attributes the
// application set with ibv_modify_qp (not the last packet's fields), destroyed objects say so,
// numbers read in hex as in the NIC's logs and perftest, a live viewer's history + snapshot
// rebuild one consistent state, and no two labels on the wire ever overlap.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "viz/model/format.h"
#include "viz/model/timeline.h"
#include "viz/model/wire_layout.h"

namespace simnic::viz {
namespace {

Event ev(const std::string& nic, uint64_t seq, const std::string& kind, nlohmann::ordered_json extra = {}) {
  nlohmann::ordered_json j{{"seq", seq}, {"t_ns", seq * 10}, {"nic", nic}, {"kind", kind}};
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  auto e = parse_event_line(j.dump());
  EXPECT_TRUE(e.has_value()) << j.dump();
  return *e;
}

nlohmann::ordered_json attr(uint32_t dest_qp, uint32_t sq_psn, uint32_t rq_psn) {
  return {{"dest_qp", dest_qp},
          {"sq_psn", sq_psn},
          {"rq_psn", rq_psn},
          {"mtu", 1024},
          {"dgid", "127.0.0.2"},
          {"qkey", 0},
          {"access", "REMOTE_WRITE|REMOTE_READ"},
          {"timeout", 14},
          {"retry_cnt", 7},
          {"rnr_retry", 6},
          {"min_rnr_timer", 12},
          {"max_rd_atomic", 1},
          {"max_dest_rd_atomic", 1}};
}

std::vector<Event> connected_qp() {
  std::vector<Event> v;
  uint64_t s = 0;
  v.push_back(ev("n0", ++s, "nic_up", {{"addr", "127.0.0.1"}, {"mtu", 4096}}));
  v.push_back(ev("n0", ++s, "cq_create", {{"ctx", 1}, {"cq", 3}, {"cqe", 15}, {"entries", 16}}));
  v.push_back(ev("n0", ++s, "qp_create",
                 {{"ctx", 1},
                  {"qp", 0x1a2b3c},
                  {"type", "RC"},
                  {"sq_entries", 8},
                  {"rq_entries", 8},
                  {"send_cq", 3},
                  {"recv_cq", 3}}));
  v.push_back(
      ev("n0", ++s, "qp_state",
         {{"qp", 0x1a2b3c}, {"from", "RESET"}, {"to", "INIT"}, {"cause", "modify_qp"}, {"attr", attr(0, 0, 0)}}));
  v.push_back(ev("n0", ++s, "qp_state",
                 {{"qp", 0x1a2b3c},
                  {"from", "INIT"},
                  {"to", "RTR"},
                  {"cause", "modify_qp"},
                  {"attr", attr(0x4d5e6f, 0, 0xabcdef)}}));
  v.push_back(ev("n0", ++s, "qp_state",
                 {{"qp", 0x1a2b3c},
                  {"from", "RTR"},
                  {"to", "RTS"},
                  {"cause", "modify_qp"},
                  {"attr", attr(0x4d5e6f, 0x123456, 0xabcdef)}}));
  return v;
}

TEST(VizQpAttributes, ThePanelShowsWhatModifyQpSetNotTheLastPacket) {
  Timeline tl;
  tl.append(connected_qp());
  // Before any packet, a connected QP shows its peer and PSNs (the old panel said "remote QP 0").
  World w = tl.state_at(tl.end_pos());
  const QpInfo& q = w.at("n0").qps.at(0x1a2b3c);
  ASSERT_TRUE(q.attr.known);
  EXPECT_EQ(q.state, "RTS");
  EXPECT_EQ(q.attr.dest_qp, 0x4d5e6fu);
  EXPECT_EQ(q.attr.sq_psn, 0x123456u);
  EXPECT_EQ(q.attr.rq_psn, 0xabcdefu);
  EXPECT_EQ(q.attr.mtu, 1024u);
  EXPECT_EQ(q.attr.dgid, "127.0.0.2");
  EXPECT_EQ(q.attr.timeout, 14u);
  EXPECT_EQ(q.attr.retry_cnt, 7u);
  EXPECT_EQ(q.attr.rnr_retry, 6u);
  EXPECT_EQ(q.attr.min_rnr_timer, 12u);
  EXPECT_EQ(q.attr.access, "REMOTE_WRITE|REMOTE_READ");
  EXPECT_FALSE(q.has_tx);

  // A packet moves "last packet sent", never the attributes; an attribute-only modify (from ==
  // to) changes the attributes and keeps the state.
  std::vector<Event> more;
  more.push_back(ev("n0", 7, "pkt_tx",
                    {{"qp", 0x1a2b3c},
                     {"src", "127.0.0.1"},
                     {"dst", "127.0.0.2"},
                     {"opcode", "RC_SEND_ONLY"},
                     {"opcode_num", 4},
                     {"psn", 0x123456},
                     {"dest_qp", 0x4d5e6f}}));
  auto a = attr(0x4d5e6f, 0x123456, 0xabcdef);
  a["timeout"] = 20;
  more.push_back(
      ev("n0", 8, "qp_state", {{"qp", 0x1a2b3c}, {"from", "RTS"}, {"to", "RTS"}, {"cause", "modify_qp"}, {"attr", a}}));
  tl.append(more);
  World w2 = tl.state_at(tl.end_pos());
  const QpInfo& q2 = w2.at("n0").qps.at(0x1a2b3c);
  EXPECT_TRUE(q2.has_tx);
  EXPECT_EQ(q2.last_tx_psn, 0x123456u);
  EXPECT_EQ(q2.last_tx_dest_qp, 0x4d5e6fu);
  EXPECT_EQ(q2.attr.timeout, 20u);
  EXPECT_EQ(q2.state, "RTS");
  // Scrubbing back shows the attributes as they were then.
  EXPECT_EQ(tl.state_at(4).at("n0").qps.at(0x1a2b3c).attr.dest_qp, 0u);  // INIT: no peer yet
}

TEST(VizDestroyed, DestroyedObjectsAreRememberedAsDestroyed) {
  Timeline tl;
  auto v = connected_qp();
  v.push_back(ev("n0", 7, "qp_destroy", {{"ctx", 1}, {"qp", 0x1a2b3c}, {"type", "RC"}}));
  v.push_back(ev("n0", 8, "cq_destroy", {{"ctx", 1}, {"cq", 3}}));
  tl.append(v);
  World w = tl.state_at(tl.end_pos());
  const NicState& n = w.at("n0");
  EXPECT_TRUE(n.qps.empty());
  EXPECT_TRUE(n.cqs.empty());
  ASSERT_EQ(n.destroyed.size(), 2u);
  EXPECT_EQ(n.destroyed[0].what, "QP");
  EXPECT_EQ(n.destroyed[0].id, 0x1a2b3cu);
  EXPECT_EQ(n.destroyed[0].detail, "RC, was RTS");
  EXPECT_EQ(n.destroyed[1].what, "CQ");
  EXPECT_EQ(n.destroyed[1].id, 3u);
  // Before the destroy, nothing was.
  EXPECT_TRUE(tl.state_at(6).at("n0").destroyed.empty());
  // A QP the viewer never saw created (its history began later) is destroyed all the same.
  tl.append({ev("n0", 9, "qp_destroy", {{"ctx", 1}, {"qp", 0x777}, {"type", "UD"}})});
  World w2 = tl.state_at(tl.end_pos());
  ASSERT_EQ(w2.at("n0").destroyed.size(), 3u);
  EXPECT_EQ(w2.at("n0").destroyed[2].id, 0x777u);
  EXPECT_EQ(w2.at("n0").destroyed[2].detail, "UD");
}

TEST(VizFormat, QpnsPsnsAndKeysReadInHex) {
  EXPECT_EQ(hex(0x1a2b3c), "0x1a2b3c");
  EXPECT_EQ(hex(0), "0x0");
  EXPECT_EQ(hex_dec(0x292), "0x292 (658)");
  for (const char* k : {"qp", "dest_qp", "psn", "rkey", "lkey", "sq_psn", "rq_psn"}) EXPECT_TRUE(is_hex_field(k)) << k;
  for (const char* k : {"length", "payload", "index", "wr_id", "mtu"}) EXPECT_FALSE(is_hex_field(k)) << k;
  Event tx =
      ev("n0", 1, "pkt_tx", {{"qp", 0x11}, {"opcode", "RC_SEND_ONLY"}, {"psn", 0xabcdef}, {"dest_qp", 0x1a2b3c}});
  EXPECT_EQ(summarize(tx), "pkt_tx RC_SEND_ONLY psn 0xabcdef -> qp 0x1a2b3c");
  Event st = ev("n0", 2, "qp_state", {{"qp", 0x11}, {"from", "INIT"}, {"to", "RTR"}});
  EXPECT_EQ(summarize(st), "qp_state qp 0x11 INIT -> RTR");
}

// What a live subscriber receives: the NIC's recent history (its original events), then a
// snapshot of what exists now (marked "snapshot"), then live events. The snapshot must not
// undo what the history built (rings, the transition into RTS).
TEST(VizLiveHistory, ASnapshotAfterTheHistoryKeepsWhatTheHistoryBuilt) {
  Timeline tl;
  auto v = connected_qp();
  v.push_back(ev("n0", 7, "wqe_posted",
                 {{"qp", 0x1a2b3c}, {"queue", "rq"}, {"index", 0}, {"wr_id", 5}, {"opcode", "RECV"}, {"length", 64}}));
  // The snapshot: nic_up, the CQ, the QP and its state now.
  v.push_back(ev("n0", 8, "nic_up", {{"addr", "127.0.0.1"}, {"mtu", 4096}, {"snapshot", true}}));
  v.push_back(ev("n0", 9, "cq_create", {{"ctx", 1}, {"cq", 3}, {"cqe", 15}, {"entries", 16}, {"snapshot", true}}));
  v.push_back(ev("n0", 10, "qp_create",
                 {{"ctx", 1},
                  {"qp", 0x1a2b3c},
                  {"type", "RC"},
                  {"sq_entries", 8},
                  {"rq_entries", 8},
                  {"send_cq", 3},
                  {"recv_cq", 3},
                  {"snapshot", true}}));
  v.push_back(ev("n0", 11, "qp_state",
                 {{"qp", 0x1a2b3c},
                  {"from", "RESET"},
                  {"to", "RTS"},
                  {"cause", "snapshot"},
                  {"attr", attr(0x4d5e6f, 0x123456, 0xabcdef)},
                  {"snapshot", true}}));
  // An MR the history did not show (registered before the history window): the snapshot adds it.
  v.push_back(ev("n0", 12, "mr_create",
                 {{"ctx", 1},
                  {"pd", 1},
                  {"mr", 4},
                  {"lkey", 0x381},
                  {"rkey", 0x381},
                  {"addr", "0x1000"},
                  {"length", 64},
                  {"access", "LOCAL_WRITE"},
                  {"snapshot", true}}));
  tl.append(v);
  World w = tl.state_at(tl.end_pos());
  const NicState& n = w.at("n0");
  const QpInfo& q = n.qps.at(0x1a2b3c);
  EXPECT_EQ(q.state, "RTS");
  EXPECT_EQ(q.prev_state, "RTR");  // the history's transition, not the snapshot's "RESET -> RTS"
  EXPECT_EQ(q.rq.posted.size(), 1u);
  EXPECT_EQ(q.rq.producer, 1u);
  EXPECT_EQ(q.attr.dest_qp, 0x4d5e6fu);
  EXPECT_EQ(n.mrs.count(4), 1u);
  EXPECT_EQ(n.counters.at("qp_create"), 1u);  // the snapshot's copy is not counted again

  // Without any history (a NIC whose ring was empty), the snapshot alone builds the QP.
  Timeline only_snapshot;
  only_snapshot.append({v.begin() + 7, v.end()});
  World w3 = only_snapshot.state_at(only_snapshot.end_pos());
  const QpInfo& q3 = w3.at("n0").qps.at(0x1a2b3c);
  EXPECT_EQ(q3.state, "RTS");
  EXPECT_EQ(q3.attr.rq_psn, 0xabcdefu);
}

// A dense burst: `n` packets spread over the wire as if sent within a millisecond.
std::vector<WirePacket> burst(size_t n, bool both_lanes) {
  std::vector<WirePacket> v;
  for (size_t i = 0; i < n; ++i) {
    WirePacket p;
    p.id = i;
    p.u = 0.05 + 0.9 * double(i) / double(n);
    p.rightward = !both_lanes || i % 3 != 0;
    p.cls = p.rightward ? PacketClass::kWrite : PacketClass::kAck;
    p.label = (p.rightward ? "WRITE M " : "ACK ") + hex(0x100000 + i);
    p.retransmission = i % 97 == 0;
    p.dropped = i % 101 == 0;
    v.push_back(p);
  }
  return v;
}

void expect_no_overlap(const std::vector<WirePacket>& pk, const WireView& view) {
  auto blocks = layout_wire(pk, view);
  std::vector<Rect> rects;
  size_t placed = 0, visible = 0;
  for (const WireBlock& b : blocks) {
    rects.push_back(b.rect(view));
    placed += b.members.size();
    EXPECT_GE(b.x1 - b.x0, label_width(b.label, view)) << b.label << " does not fit its block";
    EXPECT_FALSE(b.members.empty());
  }
  for (const WirePacket& p : pk) {
    double x = view.x_of(p.u);
    visible += x > 60 && x < view.width - 60;  // well inside the view: certainly placed
  }
  auto clash = overlapping_blocks(rects);
  EXPECT_FALSE(clash.has_value()) << "zoom " << view.zoom << ": '" << blocks[clash->first].label << "' overlaps '"
                                  << blocks[clash->second].label << "'";
  EXPECT_GE(placed, visible) << "zoom " << view.zoom;
  EXPECT_LE(placed, pk.size());
}

TEST(VizWireLayout, NoTwoLabelsOverlapAtAnyZoomOrDensity) {
  for (size_t n : {1u, 2u, 7u, 100u, 10000u}) {
    for (bool both : {false, true}) {
      auto pk = burst(n, both);
      for (double zoom : {1.0, 2.0, 8.0, 64.0, 1000.0, 100000.0}) {
        for (float width : {640.0f, 1280.0f, 2560.0f}) {
          WireView view;
          view.zoom = zoom;
          view.width = width;
          view.centre = 0.37;
          expect_no_overlap(pk, view);
        }
      }
    }
  }
}

TEST(VizWireLayout, ABurstAggregatesIntoOneCountedBlockAndZoomingSpreadsIt) {
  auto pk = burst(10000, false);
  WireView view;
  auto blocks = layout_wire(pk, view);
  // At zoom 1 the 10,000 back-to-back WRITEs are one labelled block, nothing dropped.
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].members.size(), 10000u);
  EXPECT_EQ(blocks[0].label,
            "X R WRITE \xC3\x97"
            "10000");  // some were dropped, some resent
  EXPECT_EQ(blocks[0].cls, PacketClass::kWrite);
  // Zoomed in far enough, each packet has its own label.
  view.zoom = 20000;
  view.centre = pk[5000].u;
  blocks = layout_wire(pk, view);
  ASSERT_FALSE(blocks.empty());
  for (const WireBlock& b : blocks) EXPECT_EQ(b.members.size(), 1u) << b.label;
  // zoom_to (a click on a block) centres its packets and zooms in.
  WireView z = zoom_to(layout_wire(pk, WireView{})[0], pk, WireView{});
  EXPECT_GT(z.zoom, 1.0);
  EXPECT_NEAR(z.centre, 0.5, 0.01);
}

TEST(VizWireLayout, PacketsFarApartKeepTheirOwnLabels) {
  std::vector<WirePacket> pk(3);
  for (size_t i = 0; i < 3; ++i) {
    pk[i].id = i;
    pk[i].u = 0.2 + 0.3 * double(i);
    pk[i].cls = PacketClass::kSend;
    pk[i].label = "SEND F " + hex(i);
  }
  pk[1].retransmission = true;
  auto blocks = layout_wire(pk, WireView{});
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].label, "SEND F 0x0");
  EXPECT_EQ(blocks[1].label, "R SEND F 0x1");
  EXPECT_EQ(blocks[0].row, 0);
}

}  // namespace
}  // namespace simnic::viz
