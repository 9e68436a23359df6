// The visualizer's model, apart from any drawing: it must rebuild QP states, rings and CQs
// from a trace, order two NICs' events so that no packet arrives before it left, match
// packets to their receptions (or mark them lost), and answer "what was the state at event N".
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "viz/model/field_help.h"
#include "viz/model/moment.h"
#include "viz/model/packet_class.h"
#include "viz/model/panel_layout.h"
#include "viz/model/timeline.h"
#include "viz/model/timeline_merge.h"

namespace simnic::viz {
namespace {

// A tiny trace writer: each call appends one event line of `nic` with the next seq.
struct TraceBuilder {
  std::map<std::string, uint64_t> seq;
  std::vector<Event> events;
  Event& add(const std::string& nic, uint64_t t_ns, const std::string& kind, nlohmann::ordered_json extra = {}) {
    nlohmann::ordered_json j;
    j["seq"] = ++seq[nic];
    j["t_ns"] = t_ns;
    j["nic"] = nic;
    j["kind"] = kind;
    if (extra.is_object())
      for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
    auto e = parse_event_line(j.dump());
    EXPECT_TRUE(e.has_value()) << j.dump();
    events.push_back(*e);
    return events.back();
  }
  // A packet from `from` (ip a) to `to` (ip b).
  nlohmann::ordered_json pkt(const char* src, const char* dst, const char* opcode, int opnum, uint64_t psn, uint64_t qp,
                             uint64_t dest_qp, const char* fault = nullptr) {
    nlohmann::ordered_json j{{"qp", qp},   {"src", src},        {"dst", dst}, {"opcode", opcode}, {"opcode_num", opnum},
                             {"psn", psn}, {"dest_qp", dest_qp}};
    if (fault) j["fault"] = fault;
    return j;
  }
};

TEST(VizEvent, MalformedLinesAreRejectedNotThrown) {
  EXPECT_FALSE(parse_event_line("").has_value());
  EXPECT_FALSE(parse_event_line("{\"seq\":1,\"nic\":\"a\"").has_value());  // cut mid-line
  EXPECT_FALSE(parse_event_line("[1,2]").has_value());
  EXPECT_FALSE(parse_event_line("{\"seq\":-1,\"nic\":\"a\",\"kind\":\"x\"}").has_value());
  auto e = parse_event_line(R"({"seq":7,"t_ns":9,"nic":"simnic0","kind":"future_kind","extra":{"x":1}})");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->seq, 7u);
  EXPECT_EQ(e->kind, "future_kind");
  EXPECT_EQ(e->addr("missing"), 0u);
}

// ibv_resize_cq: the ring view takes the new size; the CQEs keep their indices.
TEST(VizNicState, AResizedCqKeepsItsCompletionsInTheNewRing) {
  TraceBuilder tb;
  tb.add("n0", 1, "cq_create", {{"ctx", 1}, {"cq", 3}, {"cqe", 7}, {"entries", 8}});
  tb.add("n0", 2, "cqe",
         {{"cq", 3},
          {"qp", 17},
          {"index", 0},
          {"wr_id", 100},
          {"status", "success"},
          {"status_num", 0},
          {"opcode", "SEND"},
          {"byte_len", 8}});
  tb.add("n0", 3, "cq_resize", {{"ctx", 1}, {"cq", 3}, {"cqe", 63}, {"entries", 64}, {"pending", 1}});
  Timeline tl;
  tl.append(tb.events);
  World end = tl.state_at(tl.end_pos());
  const CqInfo& cq = end.at("n0").cqs.at(3);
  EXPECT_EQ(cq.entries, 64u);
  EXPECT_EQ(cq.produced, 1u);
  ASSERT_EQ(cq.recent.size(), 1u);
  EXPECT_EQ(cq.recent[0].wr_id, 100u);
  EXPECT_EQ(tl.state_at(2).at("n0").cqs.at(3).entries, 8u);
}

TEST(VizNicState, RebuildsQpStateRingsAndCq) {
  TraceBuilder tb;
  tb.add("n0", 1, "nic_up", {{"addr", "127.0.0.1"}, {"mtu", 1024}});
  tb.add("n0", 2, "cq_create", {{"ctx", 1}, {"cq", 3}, {"cqe", 7}, {"entries", 8}});
  tb.add("n0", 3, "qp_create",
         {{"qp", 17}, {"type", "RC"}, {"sq_entries", 4}, {"rq_entries", 4}, {"send_cq", 3}, {"recv_cq", 3}});
  tb.add("n0", 4, "qp_state", {{"qp", 17}, {"from", "RESET"}, {"to", "INIT"}});
  tb.add("n0", 5, "qp_state", {{"qp", 17}, {"from", "INIT"}, {"to", "RTR"}});
  tb.add("n0", 6, "qp_state", {{"qp", 17}, {"from", "RTR"}, {"to", "RTS"}});
  for (int i = 0; i < 3; ++i)
    tb.add("n0", 7, "wqe_posted",
           {{"qp", 17}, {"queue", "sq"}, {"index", i}, {"wr_id", 100 + i}, {"opcode", "RDMA_WRITE"}, {"length", 64}});
  tb.add("n0", 8, "wqe_done", {{"qp", 17}, {"queue", "sq"}, {"index", 0}});
  tb.add("n0", 8, "cqe",
         {{"cq", 3},
          {"qp", 17},
          {"index", 0},
          {"wr_id", 100},
          {"status", "success"},
          {"status_num", 0},
          {"opcode", "RDMA_WRITE"},
          {"byte_len", 64}});
  tb.add("n0", 9, "error",
         {{"qp", 17}, {"status", "remote access error"}, {"rule", "rkey 0x99 not valid for REMOTE_WRITE"}});
  tb.add("n0", 9, "qp_state", {{"qp", 17}, {"from", "RTS"}, {"to", "ERR"}, {"cause", "remote access error"}});
  tb.add("n0", 9, "cqe",
         {{"cq", 3},
          {"qp", 17},
          {"index", 1},
          {"wr_id", 101},
          {"status", "remote access error"},
          {"status_num", 10},
          {"opcode", "RDMA_WRITE"},
          {"byte_len", 0}});

  Timeline tl;
  tl.append(tb.events);
  World end = tl.state_at(tl.end_pos());
  const NicState& n = end.at("n0");
  EXPECT_EQ(n.addr, "127.0.0.1");
  const QpInfo& qp = n.qps.at(17);
  EXPECT_EQ(qp.state, "ERR");
  EXPECT_EQ(qp.prev_state, "RTS");
  EXPECT_EQ(qp.last_cause, "remote access error");
  EXPECT_EQ(qp.last_error, "rkey 0x99 not valid for REMOTE_WRITE");
  EXPECT_EQ(qp.sq.producer, 3u);
  EXPECT_EQ(qp.sq.consumer, 1u);
  ASSERT_EQ(qp.sq.posted.size(), 2u);
  EXPECT_EQ(qp.sq.posted.at(1).wr_id, 101u);
  EXPECT_EQ(qp.sq.posted.at(2).opcode, "RDMA_WRITE");
  const CqInfo& cq = n.cqs.at(3);
  EXPECT_EQ(cq.entries, 8u);
  EXPECT_EQ(cq.produced, 2u);
  ASSERT_EQ(cq.recent.size(), 2u);
  EXPECT_EQ(cq.recent[1].status_num, 10u);
  EXPECT_EQ(n.counters.at("cqe_error"), 1u);

  // Going back in time: after the 6th event the QP was in RTS with empty rings.
  World early = tl.state_at(6);
  EXPECT_EQ(early.at("n0").qps.at(17).state, "RTS");
  EXPECT_EQ(early.at("n0").qps.at(17).sq.posted.size(), 0u);
  EXPECT_EQ(tl.state_at(7).at("n0").qps.at(17).sq.posted.size(), 1u);
}

// A live viewer can miss events; the ring must still never show more WQEs than it has slots.
TEST(VizNicState, MissedWqeDoneEventsDoNotOverfillTheRing) {
  TraceBuilder tb;
  tb.add("n0", 1, "qp_create", {{"qp", 5}, {"type", "RC"}, {"sq_entries", 4}, {"rq_entries", 4}});
  for (int i = 0; i < 4; ++i)
    tb.add("n0", 2, "wqe_posted", {{"qp", 5}, {"queue", "rq"}, {"index", i}, {"opcode", "RECV"}});
  tb.add("n0", 3, "wqe_done", {{"qp", 5}, {"queue", "rq"}, {"index", 2}});  // the done of 0 and 1 was missed
  for (int i = 4; i < 7; ++i)
    tb.add("n0", 4, "wqe_posted", {{"qp", 5}, {"queue", "rq"}, {"index", i}, {"opcode", "RECV"}});
  Timeline tl;
  tl.append(tb.events);
  const World end = tl.state_at(tl.end_pos());  // kept: q refers into it
  const QpInfo& q = end.at("n0").qps.at(5);
  EXPECT_EQ(q.rq.consumer, 3u);
  EXPECT_EQ(q.rq.producer, 7u);
  ASSERT_EQ(q.rq.posted.size(), 4u) << "slots 3..6: 0 and 1 are below the consumer";
  EXPECT_EQ(q.rq.posted.begin()->first, 3u);
}

TEST(VizNicState, ResetEmptiesTheRings) {
  TraceBuilder tb;
  tb.add("n0", 1, "qp_create", {{"qp", 5}, {"type", "RC"}, {"sq_entries", 4}, {"rq_entries", 4}});
  tb.add("n0", 2, "wqe_posted", {{"qp", 5}, {"queue", "rq"}, {"index", 0}, {"opcode", "RECV"}});
  tb.add("n0", 3, "qp_state", {{"qp", 5}, {"from", "ERR"}, {"to", "RESET"}});
  Timeline tl;
  tl.append(tb.events);
  const World end = tl.state_at(tl.end_pos());  // kept: q refers into it
  const QpInfo& q = end.at("n0").qps.at(5);
  EXPECT_TRUE(q.rq.posted.empty());
  EXPECT_EQ(q.rq.producer, 0u);
}

TEST(VizNicState, MemoryWindowsAreBoundAndInvalidated) {
  TraceBuilder tb;
  tb.add("n0", 1, "mr_create",
         {{"ctx", 1},
          {"pd", 2},
          {"mr", 3},
          {"lkey", 0x301},
          {"rkey", 0x301},
          {"addr", "0x1000"},
          {"length", 8192},
          {"access", "LOCAL_WRITE|MW_BIND"}});
  tb.add("n0", 2, "mw_create", {{"ctx", 1}, {"pd", 2}, {"mw", 4}, {"rkey", 0x4a0}, {"type", 2}});
  tb.add("n0", 3, "mw_bind",
         {{"qp", 17},
          {"mw", 4},
          {"rkey", 0x4a1},
          {"mr", 3},
          {"addr", "0x1800"},
          {"length", 512},
          {"access", "REMOTE_READ"}});
  tb.add("n0", 4, "mw_invalidate", {{"qp", 17}, {"mw", 4}, {"rkey", 0x4a1}, {"by", "SEND_WITH_INV"}});
  tb.add("n0", 5, "mw_destroy", {{"ctx", 1}, {"mw", 4}, {"rkey", 0x4a1}});
  Timeline tl;
  tl.append(tb.events);
  EXPECT_EQ(tl.state_at(2).at("n0").mws.at(4).rkey, 0x4a0u);
  EXPECT_EQ(tl.state_at(2).at("n0").mws.at(4).mr, 0u);
  const MwInfo bound = tl.state_at(3).at("n0").mws.at(4);
  EXPECT_EQ(bound.rkey, 0x4a1u);
  EXPECT_EQ(bound.mr, 3u);
  EXPECT_EQ(bound.addr, 0x1800u);
  EXPECT_EQ(bound.length, 512u);
  EXPECT_EQ(bound.access, "REMOTE_READ");
  EXPECT_EQ(bound.type, 2u);
  const MwInfo freed = tl.state_at(4).at("n0").mws.at(4);
  EXPECT_EQ(freed.mr, 0u);
  EXPECT_EQ(freed.length, 0u);
  EXPECT_TRUE(tl.state_at(tl.end_pos()).at("n0").mws.empty());
  // The event log's one-line summaries name the key, the MR and the range.
  EXPECT_EQ(summarize(tb.events[2]), "mw_bind mw 4 rkey 0x4a1 -> mr 3 0x1800 len 512 REMOTE_READ");
  EXPECT_EQ(summarize(tb.events[3]), "mw_invalidate mw 4 rkey 0x4a1 by SEND_WITH_INV");
}

// Two NICs whose clocks disagree: by t_ns alone, B's reception would come before A's send.
TEST(VizMerge, APacketIsNeverReceivedBeforeItIsSent) {
  TraceBuilder tb;
  tb.add("a", 100, "nic_up", {{"addr", "127.0.0.1"}, {"wall_ns", 1000}});
  tb.add("b", 100, "nic_up", {{"addr", "127.0.0.2"}, {"wall_ns", 1000}});
  tb.add("a", 500, "doorbell");
  tb.add("a", 500, "pkt_tx", tb.pkt("127.0.0.1", "127.0.0.2", "RC_SEND_ONLY", 4, 10, 1, 2));
  tb.add("b", 300, "pkt_rx", tb.pkt("127.0.0.1", "127.0.0.2", "RC_SEND_ONLY", 4, 10, 2, 2));  // skewed clock
  tb.add("b", 310, "cqe", {{"cq", 1}, {"index", 0}});
  TimelineMerge m;
  for (auto& e : tb.events) m.push(e);
  auto out = m.drain(true);
  ASSERT_EQ(out.size(), 6u);
  std::vector<std::string> order;
  for (auto& e : out) order.push_back(e.nic + ":" + e.kind);
  auto at = [&](const std::string& s) { return std::find(order.begin(), order.end(), s) - order.begin(); };
  EXPECT_LT(at("a:pkt_tx"), at("b:pkt_rx"));
  EXPECT_LT(at("b:pkt_rx"), at("b:cqe"));  // each NIC's own order is kept

  Timeline tl;
  tl.append(out);
  ASSERT_EQ(tl.flights().size(), 1u);
  const Flight& f = tl.flights()[0];
  EXPECT_EQ(f.from_nic, "a");
  EXPECT_EQ(f.to_nic, "b");
  EXPECT_EQ(f.tx_pos, size_t(at("a:pkt_tx")));
  EXPECT_EQ(f.rx_pos, size_t(at("b:pkt_rx")));
  // On the wire between the two, and gone once received.
  EXPECT_TRUE(tl.flights_at(double(f.tx_pos)).empty());
  ASSERT_EQ(tl.flights_at(double(f.tx_pos) + 1).size(), 1u);
  EXPECT_GT(tl.flights_at(double(f.tx_pos) + 1)[0].progress, 0.0);
  EXPECT_TRUE(tl.flights_at(double(f.rx_pos) + 1).empty());
}

TEST(VizMerge, WallClockOrdersIndependentEvents) {
  TraceBuilder tb;
  tb.add("a", 0, "nic_up", {{"addr", "127.0.0.1"}, {"wall_ns", 5000}});  // a started later
  tb.add("b", 0, "nic_up", {{"addr", "127.0.0.2"}, {"wall_ns", 1000}});
  tb.add("a", 100, "doorbell");   // wall 5100
  tb.add("b", 3000, "doorbell");  // wall 4000
  TimelineMerge m;
  for (auto& e : tb.events) m.push(e);
  auto out = m.drain(true);
  ASSERT_EQ(out.size(), 4u);
  // b's doorbell (wall 4000) comes before a even started (wall 5000).
  EXPECT_EQ(out[0].nic + ":" + out[0].kind, "b:nic_up");
  EXPECT_EQ(out[1].nic + ":" + out[1].kind, "b:doorbell");
  EXPECT_EQ(out[2].nic + ":" + out[2].kind, "a:nic_up");
  EXPECT_EQ(out[3].nic + ":" + out[3].kind, "a:doorbell");
}

TEST(VizMerge, LostDuplicatedAndRetransmittedPackets) {
  TraceBuilder tb;
  tb.add("a", 0, "nic_up", {{"addr", "127.0.0.1"}, {"wall_ns", 1}});
  tb.add("b", 0, "nic_up", {{"addr", "127.0.0.2"}, {"wall_ns", 1}});
  tb.add("a", 10, "pkt_tx", tb.pkt("127.0.0.1", "127.0.0.2", "RC_RDMA_WRITE_ONLY", 10, 7, 1, 2, "drop"));
  tb.add("a", 90, "retransmit", {{"qp", 1}, {"psn", 7}, {"cause", "timeout"}});
  tb.add("a", 91, "pkt_tx", tb.pkt("127.0.0.1", "127.0.0.2", "RC_RDMA_WRITE_ONLY", 10, 7, 1, 2, "dup"));
  tb.add("b", 95, "pkt_rx", tb.pkt("127.0.0.1", "127.0.0.2", "RC_RDMA_WRITE_ONLY", 10, 7, 2, 2));
  tb.add("b", 96, "pkt_rx", tb.pkt("127.0.0.1", "127.0.0.2", "RC_RDMA_WRITE_ONLY", 10, 7, 2, 2));
  TimelineMerge m;
  for (auto& e : tb.events) m.push(e);
  Timeline tl;
  tl.append(m.drain(true));
  ASSERT_EQ(tl.flights().size(), 2u);
  EXPECT_TRUE(tl.flights()[0].dropped);
  EXPECT_EQ(tl.flights()[0].rx_pos, Flight::kNever);
  EXPECT_FALSE(tl.flights()[0].retransmission);
  EXPECT_TRUE(tl.flights()[1].retransmission);
  EXPECT_NE(tl.flights()[1].rx_pos, Flight::kNever);
  // The dropped packet shows for a moment, then is gone.
  EXPECT_EQ(tl.flights_at(double(tl.flights()[0].tx_pos) + 1).size(), 1u);
  EXPECT_TRUE(tl.flights_at(double(tl.flights()[0].tx_pos) + 1)[0].flight->dropped);
  World w = tl.state_at(tl.end_pos());
  EXPECT_EQ(w.at("a").counters.at("fault_drop"), 1u);
  EXPECT_EQ(w.at("a").counters.at("retransmit"), 1u);
  EXPECT_EQ(w.at("b").counters.at("pkt_rx"), 2u);
}

// Live, a NIC's lines arrive in bursts: a reception read before its sender's line waits.
TEST(VizMerge, LiveReceptionWaitsForItsSender) {
  TraceBuilder tb;
  tb.add("a", 0, "nic_up", {{"addr", "127.0.0.1"}, {"wall_ns", 1}});
  tb.add("b", 0, "nic_up", {{"addr", "127.0.0.2"}, {"wall_ns", 1}});
  Event tx = tb.add("a", 50, "pkt_tx", tb.pkt("127.0.0.1", "127.0.0.2", "RC_SEND_ONLY", 4, 1, 1, 2));
  Event rx = tb.add("b", 40, "pkt_rx", tb.pkt("127.0.0.1", "127.0.0.2", "RC_SEND_ONLY", 4, 1, 2, 2));
  TimelineMerge m(/*hold_ns=*/1000);
  m.push(tb.events[0], 0);
  m.push(tb.events[1], 0);
  m.push(rx, 0);
  auto first = m.drain(false, 2000);  // the rx is ripe but its tx has not been seen
  for (auto& e : first) EXPECT_NE(e.kind, "pkt_rx");
  m.push(tx, 2500);
  auto second = m.drain(false, 4000);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].kind, "pkt_tx");
  EXPECT_EQ(second[1].kind, "pkt_rx");
}

// A UD datagram to a multicast group: one pkt_tx to the group's address, and one pkt_rx on
// every member NIC. Each reception waits for the send, none uses it up for the others.
TEST(VizMerge, EveryMemberReceivesAMulticastPacketAfterItIsSent) {
  TraceBuilder tb;
  tb.add("a", 0, "nic_up", {{"addr", "127.0.0.1"}, {"wall_ns", 1}});
  tb.add("b", 0, "nic_up", {{"addr", "127.0.0.2"}, {"wall_ns", 1}});
  tb.add("c", 0, "nic_up", {{"addr", "127.0.0.3"}, {"wall_ns", 1}});
  Event tx = tb.add("a", 50, "pkt_tx", tb.pkt("127.0.0.1", "239.1.2.3", "UD_SEND_ONLY", 100, 5, 1, 0xffffff));
  Event rb = tb.add("b", 40, "pkt_rx", tb.pkt("127.0.0.1", "239.1.2.3", "UD_SEND_ONLY", 100, 5, 0, 0xffffff));
  Event rc = tb.add("c", 30, "pkt_rx", tb.pkt("127.0.0.1", "239.1.2.3", "UD_SEND_ONLY", 100, 5, 0, 0xffffff));
  TimelineMerge m(/*hold_ns=*/1000);
  for (int i = 0; i < 3; ++i) m.push(tb.events[size_t(i)], 0);
  m.push(rb, 0);
  m.push(rc, 0);
  for (auto& e : m.drain(false, 2000)) EXPECT_NE(e.kind, "pkt_rx") << "ripe, but the send is not in yet";
  m.push(tx, 2500);
  auto out = m.drain(false, 3000);  // well before the 5 * hold_ns a late sender is waited for
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].kind, "pkt_tx");
  EXPECT_EQ(out[1].kind + out[2].kind, "pkt_rxpkt_rx") << "both members' receptions follow at once";
  EXPECT_TRUE(is_multicast_packet(out[0]));

  Timeline tl;
  tl.append(out);
  ASSERT_EQ(tl.flights().size(), 1u);
  EXPECT_EQ(tl.flights()[0].from_nic, "a");
  EXPECT_EQ(tl.flights()[0].to_nic, out[1].nic) << "drawn to the first member that received it";
  EXPECT_EQ(tl.flights()[0].rx_pos, 1u);
  World w = tl.state_at(tl.end_pos());
  EXPECT_EQ(w.at("b").counters.at("pkt_rx"), 1u);
  EXPECT_EQ(w.at("c").counters.at("pkt_rx"), 1u);
}

TEST(VizTimeline, FindAndTrimKeepPositionsAbsolute) {
  TraceBuilder tb;
  tb.add("n0", 0, "qp_create", {{"qp", 1}, {"sq_entries", 4096}, {"rq_entries", 1}});
  for (int i = 0; i < 3000; ++i)
    tb.add("n0", uint64_t(i), "wqe_posted", {{"qp", 1}, {"queue", "sq"}, {"index", i}, {"opcode", "SEND"}});
  Timeline tl;
  tl.append(tb.events);
  EXPECT_EQ(tl.find("n0", 1), 0u);
  EXPECT_EQ(tl.find("n0", 3001), 3000u);
  EXPECT_EQ(tl.state_at(2000).at("n0").qps.at(1).sq.producer, 1999u);
  tl.trim(2000);
  EXPECT_EQ(tl.first_pos(), 2001u);
  EXPECT_EQ(tl.end_pos(), 3001u);
  EXPECT_EQ(tl.find("n0", 1), tl.end_pos());  // trimmed away
  EXPECT_EQ(tl.at(2500).seq, 2501u);
  EXPECT_EQ(tl.state_at(2500).at("n0").qps.at(1).sq.producer, 2499u);  // from the kept base state
}

TEST(VizTeaching, PacketsAreClassifiedAndFieldsExplained) {
  auto pkt = [](const char* op, const char* aeth_class = nullptr) {
    nlohmann::ordered_json j{{"seq", 1}, {"nic", "n"}, {"kind", "pkt_tx"}, {"opcode", op}};
    if (aeth_class) j["aeth"] = {{"class", aeth_class}};
    return *parse_event_line(j.dump());
  };
  EXPECT_EQ(classify_packet(pkt("RC_SEND_FIRST")), PacketClass::kSend);
  EXPECT_EQ(classify_packet(pkt("RC_RDMA_WRITE_MIDDLE")), PacketClass::kWrite);
  EXPECT_EQ(classify_packet(pkt("RC_RDMA_READ_REQUEST")), PacketClass::kReadRequest);
  EXPECT_EQ(classify_packet(pkt("RC_RDMA_READ_RESPONSE_MIDDLE")), PacketClass::kReadResponse);
  EXPECT_EQ(classify_packet(pkt("RC_RDMA_READ_RESPONSE_LAST", "ACK")), PacketClass::kReadResponse);
  EXPECT_EQ(classify_packet(pkt("RC_COMPARE_SWAP")), PacketClass::kAtomic);
  // IBTA 1.5 RDMA ATOMIC WRITE (0x1D) is drawn as an atomic, though its name says WRITE.
  EXPECT_EQ(classify_packet(pkt("RC_RDMA_ATOMIC_WRITE")), PacketClass::kAtomic);
  EXPECT_EQ(packet_label(pkt("RC_RDMA_ATOMIC_WRITE")), "ATOMIC");
  EXPECT_EQ(classify_packet(pkt("RC_ACKNOWLEDGE", "ACK")), PacketClass::kAck);
  EXPECT_EQ(classify_packet(pkt("RC_ACKNOWLEDGE", "NAK")), PacketClass::kNak);
  EXPECT_EQ(packet_label(pkt("RC_ACKNOWLEDGE", "RNR_NAK")), "RNR");
  EXPECT_EQ(packet_label(pkt("RC_SEND_LAST")), "SEND L");
  // A connection manager MAD (UD to QP1) is labelled by its CM message.
  nlohmann::ordered_json mad{{"seq", 2}, {"nic", "n"}, {"kind", "pkt_tx"}, {"opcode", "UD_SEND_ONLY"}, {"cm", "REQ"}};
  EXPECT_EQ(packet_label(*parse_event_line(mad.dump())), "CM REQ");
  EXPECT_NE(summarize(*parse_event_line(mad.dump())).find("CM REQ"), std::string::npos);
  for (const char* f :
       {"psn", "dest_qp", "ack_req", "se", "opcode", "reth.rkey", "reth.va", "aeth.msn", "aeth.syndrome"})
    EXPECT_FALSE(explain_field("pkt_rx", f).empty()) << f;
  for (const char* f : {"wr_id", "status", "byte_len"}) EXPECT_FALSE(explain_field("cqe", f).empty()) << f;
  EXPECT_NE(explain_syndrome(0x60).find("sequence"), std::string::npos);
  EXPECT_NE(explain_syndrome(0x62).find("remote access"), std::string::npos);
  EXPECT_NE(explain_syndrome(0x3f).find("RNR"), std::string::npos);
}

// simnicd's packet events carry the opcode table's kinds (op_flags): the viewer classifies by
// them, whatever the opcode's name says.
TEST(VizTeaching, PacketsAreClassifiedByTheirOpFlags) {
  auto pkt = [](const char* op, const char* flags, bool atomic_ack = false) {
    nlohmann::ordered_json j{{"seq", 1}, {"nic", "n"}, {"kind", "pkt_tx"}, {"opcode", op}, {"op_flags", flags}};
    if (atomic_ack) j["atomic_ack"] = {{"orig", 7}};
    return *parse_event_line(j.dump());
  };
  EXPECT_EQ(classify_packet(pkt("VENDOR_OP", "REQUEST|FIRST|WRITE|RC")), PacketClass::kWrite);
  EXPECT_EQ(packet_label(pkt("VENDOR_OP", "REQUEST|FIRST|WRITE|RC")), "WRITE F");
  // The name says SEND, the flags say READ request: the flags win.
  EXPECT_EQ(classify_packet(pkt("RC_SEND_ONLY", "REQUEST|FIRST|LAST|READ_REQ|RC")), PacketClass::kReadRequest);
  EXPECT_EQ(packet_label(pkt("X", "RESPONSE|MIDDLE|READ_RESP|RC")), "RESP M");
  EXPECT_EQ(classify_packet(pkt("X", "REQUEST|FIRST|LAST|ATOMIC_WRITE|RC")), PacketClass::kAtomic);
  EXPECT_EQ(classify_packet(pkt("X", "RESPONSE|FIRST|LAST|ACK|RC")), PacketClass::kAck);
  EXPECT_EQ(classify_packet(pkt("X", "RESPONSE|FIRST|LAST|ACK|RC", true)), PacketClass::kAtomic);
  EXPECT_EQ(classify_packet(pkt("RC_SEND_ONLY", "")), PacketClass::kOther);  // flags given, none known
  EXPECT_FALSE(explain_field("pkt_rx", "op_flags").empty());
}

// The engines' steps, one event per packet, shown in the event log.
TEST(VizTeaching, EngineStepsAreSummarizedAndExplained) {
  nlohmann::ordered_json j{{"seq", 3},
                           {"nic", "n"},
                           {"kind", "engine_steps"},
                           {"engine", "completer"},
                           {"qp", 17},
                           {"psn", 5},
                           {"steps", "CHECK_STATE>CHECK_PSN>CHECK_MSN>ACK>RUN_REQUESTER"}};
  const std::string s = summarize(*parse_event_line(j.dump()));
  EXPECT_NE(s.find("completer qp 0x11"), std::string::npos) << s;
  EXPECT_NE(s.find("CHECK_STATE>CHECK_PSN>CHECK_MSN>ACK>RUN_REQUESTER"), std::string::npos) << s;
  EXPECT_FALSE(explain_kind("engine_steps").empty());
  EXPECT_FALSE(explain_field("engine_steps", "steps").empty());
}

}  // namespace
TEST(VizTeaching, XrcPacketsAreClassifiedAndTheirXrcethExplained) {
  auto pkt = [](const char* op, const char* aeth_class = nullptr) {
    nlohmann::ordered_json j{{"seq", 1}, {"nic", "n"}, {"kind", "pkt_tx"}, {"opcode", op}, {"xrc_srqn", 0x123456}};
    if (aeth_class) j["aeth"] = {{"class", aeth_class}};
    return *parse_event_line(j.dump());
  };
  EXPECT_EQ(classify_packet(pkt("XRC_SEND_FIRST")), PacketClass::kSend);
  EXPECT_EQ(packet_label(pkt("XRC_SEND_LAST")), "SEND L");
  EXPECT_EQ(classify_packet(pkt("XRC_RDMA_WRITE_ONLY")), PacketClass::kWrite);
  EXPECT_EQ(classify_packet(pkt("XRC_RDMA_READ_RESPONSE_ONLY", "ACK")), PacketClass::kReadResponse);
  EXPECT_EQ(classify_packet(pkt("XRC_ACKNOWLEDGE", "ACK")), PacketClass::kAck);
  EXPECT_EQ(classify_packet(pkt("XRC_ACKNOWLEDGE", "NAK")), PacketClass::kNak);
  EXPECT_NE(explain_field("pkt_rx", "xrc_srqn").find("XRC SRQ"), std::string::npos);
  EXPECT_FALSE(explain_kind("xrcd_open").empty());
  EXPECT_FALSE(explain_field("xrc_srq_create", "srqn").empty());
}

}  // namespace simnic::viz

namespace simnic::viz {
namespace {

// A lab-sized run on two NICs: set-up, one SEND with its ACK and completions, then a
// connection-manager MAD and the teardown that destroys everything (issue 24 point 8).
TraceBuilder run_with_teardown(size_t* last_cqe_pos) {
  TraceBuilder tb;
  const char* addr[2] = {"127.0.0.1", "127.0.0.2"};
  for (int n = 0; n < 2; ++n) {
    const std::string nic = "n" + std::to_string(n);
    tb.add(nic, 1, "nic_up", {{"addr", addr[n]}, {"mtu", 1024}});
    tb.add(nic, 2, "ctx_open", {{"ctx", 1}, {"pid", 42}});
    tb.add(nic, 3, "pd_create", {{"ctx", 1}, {"pd", 1}});
    tb.add(nic, 4, "mr_create",
           {{"ctx", 1},
            {"pd", 1},
            {"mr", 1},
            {"lkey", 0x100},
            {"rkey", 0x100},
            {"addr", "0x7f0000"},
            {"length", 4096},
            {"access", "LOCAL_WRITE|REMOTE_WRITE"}});
    tb.add(nic, 5, "cq_create", {{"ctx", 1}, {"cq", 1}, {"cqe", 15}, {"entries", 16}});
    tb.add(nic, 6, "qp_create",
           {{"ctx", 1},
            {"qp", 17 + n},
            {"type", "RC"},
            {"sq_entries", 16},
            {"rq_entries", 16},
            {"send_cq", 1},
            {"recv_cq", 1}});
    for (const char* to : {"INIT", "RTR", "RTS"})
      tb.add(nic, 7, "qp_state", {{"qp", 17 + n}, {"from", "RESET"}, {"to", to}});
  }
  tb.add("n1", 8, "wqe_posted",
         {{"qp", 18}, {"queue", "rq"}, {"index", 0}, {"wr_id", 1}, {"opcode", "RECV"}, {"length", 64}});
  tb.add("n0", 8, "wqe_posted",
         {{"qp", 17}, {"queue", "sq"}, {"index", 0}, {"wr_id", 2}, {"opcode", "SEND"}, {"length", 64}});
  auto send = tb.pkt("127.0.0.1", "127.0.0.2", "RC_SEND_ONLY", 4, 100, 17, 18);
  send["payload"] = 64;
  tb.add("n0", 9, "pkt_tx", send);
  tb.add("n1", 9, "pkt_rx", send);
  tb.add("n1", 10, "cqe",
         {{"cq", 1},
          {"qp", 18},
          {"index", 0},
          {"wr_id", 1},
          {"status", "success"},
          {"status_num", 0},
          {"opcode", "RECV"},
          {"byte_len", 64}});
  auto ack = tb.pkt("127.0.0.2", "127.0.0.1", "RC_ACK", 17, 100, 18, 17);
  ack["payload"] = 0;
  tb.add("n1", 11, "pkt_tx", ack);
  tb.add("n0", 11, "pkt_rx", ack);
  tb.add("n0", 12, "cqe",
         {{"cq", 1},
          {"qp", 17},
          {"index", 0},
          {"wr_id", 2},
          {"status", "success"},
          {"status_num", 0},
          {"opcode", "SEND"},
          {"byte_len", 64}});
  *last_cqe_pos = tb.events.size() - 1;
  // A receive left posted, flushed when the QP goes to ERR at the end: no data moved.
  tb.add("n1", 12, "qp_state", {{"qp", 18}, {"from", "RTS"}, {"to", "ERR"}, {"cause", "modify_qp"}});
  tb.add("n1", 12, "cqe",
         {{"cq", 1},
          {"qp", 18},
          {"index", 1},
          {"wr_id", 3},
          {"status", "Work Request Flushed Error"},
          {"status_num", 5},
          {"opcode", "RECV"},
          {"byte_len", 0}});
  auto mad = tb.pkt("127.0.0.1", "127.0.0.2", "UD_SEND_ONLY", 100, 1, 1, 1);
  mad["payload"] = 256;
  mad["cm"] = "DREQ";  // connection management, not data
  tb.add("n0", 13, "pkt_tx", mad);
  for (int n = 0; n < 2; ++n) {
    const std::string nic = "n" + std::to_string(n);
    tb.add(nic, 14, "qp_destroy", {{"ctx", 1}, {"qp", 17 + n}});
    tb.add(nic, 14, "cq_destroy", {{"ctx", 1}, {"cq", 1}});
    tb.add(nic, 14, "mr_destroy", {{"ctx", 1}, {"pd", 1}, {"mr", 1}});
    tb.add(nic, 14, "pd_destroy", {{"ctx", 1}, {"pd", 1}});
    tb.add(nic, 15, "ctx_close", {{"ctx", 1}, {"pid", 42}});
  }
  return tb;
}

Timeline merged(const TraceBuilder& tb) {
  TimelineMerge merge;
  for (const Event& e : tb.events) merge.push(e);
  Timeline tl;
  tl.append(merge.drain(true));
  return tl;
}

size_t position_of(const Timeline& tl, const std::string& nic, const std::string& kind, uint64_t wr_id) {
  for (size_t p = tl.first_pos(); p < tl.end_pos(); ++p)
    if (tl.at(p).nic == nic && tl.at(p).kind == kind && tl.at(p).u("wr_id") == wr_id) return p;
  return tl.end_pos();
}

// --screenshot without --at: the last data transfer (the sender's completion here; not the
// flushed receive after it), where the QPs, the CQ ring and the MR table are all still there;
// not the end, where all is destroyed.
TEST(VizMoment, ScreenshotDefaultIsTheLastDataTransferNotTheTeardown) {
  size_t unused = 0;
  Timeline tl = merged(run_with_teardown(&unused));
  const size_t last_cqe = position_of(tl, "n0", "cqe", 2);
  ASSERT_LT(last_cqe, tl.end_pos());
  EXPECT_EQ(last_transfer_pos(tl), last_cqe + 1);
  World shown = tl.state_at(last_transfer_pos(tl));
  for (const char* nic : {"n0", "n1"}) {
    EXPECT_EQ(shown.at(nic).qps.size(), 1u) << nic;
    EXPECT_EQ(shown.at(nic).cqs.at(1).produced, 1u) << nic;
    EXPECT_EQ(shown.at(nic).mrs.size(), 1u) << nic;
  }
  World end = tl.state_at(tl.end_pos());
  EXPECT_TRUE(end.at("n0").qps.empty() && end.at("n0").mrs.empty() && end.at("n0").cqs.empty());
}

TEST(VizMoment, WithoutDataTheMomentIsBeforeTheTeardown) {
  TraceBuilder tb;
  tb.add("n0", 1, "ctx_open", {{"ctx", 1}, {"pid", 42}});
  tb.add("n0", 2, "cq_create", {{"ctx", 1}, {"cq", 1}, {"cqe", 15}, {"entries", 16}});
  tb.add(
      "n0", 3, "qp_create",
      {{"ctx", 1}, {"qp", 17}, {"type", "RC"}, {"sq_entries", 16}, {"rq_entries", 16}, {"send_cq", 1}, {"recv_cq", 1}});
  tb.add("n0", 4, "qp_state", {{"qp", 17}, {"from", "RESET"}, {"to", "INIT"}});
  tb.add("n0", 5, "qp_destroy", {{"ctx", 1}, {"qp", 17}});
  tb.add("n0", 6, "cq_destroy", {{"ctx", 1}, {"cq", 1}});
  Timeline tl = merged(tb);
  EXPECT_EQ(last_transfer_pos(tl), 4u);  // the qp_state applied, the qp_destroy not
  EXPECT_EQ(tl.state_at(last_transfer_pos(tl)).at("n0").qps.at(17).state, "INIT");
  EXPECT_TRUE(is_data_transfer(tb.events[0]) == false);
}

// At the default 1280x800, with two NICs: the panels tile the window, and each NIC column's
// QPs (with a long error sentence), CQ ring, MR table and counters fit without being cut off.
TEST(VizLayout, TwoNicsFitAt1280x800) {
  size_t last = 0;
  TraceBuilder tb = run_with_teardown(&last);
  Timeline tl = merged(tb);
  World w = tl.state_at(last_transfer_pos(tl));
  w.at("n0").qps.at(17).last_error =
      "rkey 0x1234 not valid for REMOTE_WRITE: the MR was registered without IBV_ACCESS_REMOTE_WRITE "
      "(IBA 10.6.3.1, responder class C, remote access error)";
  const PanelRects r = layout_panels(1280, 800, 19, w.size(), false);
  ASSERT_EQ(r.nics.size(), 2u);
  EXPECT_EQ(r.nics[1].x1, 1280);
  EXPECT_EQ(r.log.y1, 800);
  EXPECT_EQ(r.inspector.x1, 1280);
  EXPECT_EQ(r.nics[0].y1, r.log.y0);  // nothing overlaps, nothing is left out
  EXPECT_EQ(r.wire.y1, r.nics[0].y0);
  for (size_t i = 0; i < 2; ++i) {
    const NicState& nic = w.at("n" + std::to_string(i));
    ASSERT_GT(nic.counters.size(), 8u);
    NicColumnPlan p = plan_nic_column(nic, r.nics[i].x1 - r.nics[i].x0, r.nics[i].y1 - r.nics[i].y0);
    EXPECT_TRUE(p.fits()) << "left " << p.left_h << " right " << p.right_h << " of " << p.body_h;
    EXPECT_GE(p.qp_ring, 60.0f);
    EXPECT_GE(p.cq_ring, 60.0f);
  }
  // The estimate is not generous: a column half as high does not fit.
  const NicState& n0 = w.at("n0");
  EXPECT_FALSE(plan_nic_column(n0, 640, 200).fits());
}

}  // namespace
}  // namespace simnic::viz
