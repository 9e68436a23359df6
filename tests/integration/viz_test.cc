// The trace as simnic-viz sees it, from real NICs: a recorded exchange rebuilds into the
// expected QP states, CQEs and packet flights; simnic-viz renders a replay to PNG (under Xvfb)
// that is not blank and changes with the event shown; and it attaches live to running NICs.
#include <gtest/gtest.h>

#include <stb_image.h>

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness.h"
#include "viz/model/moment.h"
#include "viz/model/packet_class.h"
#include "viz/model/timeline.h"
#include "viz/model/trace_sources.h"
#include "viz/model/wire_layout.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

// Records the trace of one simnic-verbs-check round (SEND, WRITE, READ, atomics) between two NICs.
// With loss, the run itself may fail as on real hardware (a lost NAK for the deliberately bad
// rkey ends in RETRY_EXC_ERR once the responder QP is in ERR), so only a clean run must pass.
std::string record_exchange(const std::string& dir, const std::vector<std::string>& extra_up = {},
                            bool must_pass = true) {
  std::vector<std::string> up = {"--trace", dir};
  up.insert(up.end(), extra_up.begin(), extra_up.end());
  Nics nics(2, up);
  EXPECT_TRUE(nics.ok()) << nics.up_result().output;
  Result r =
      nics.run({bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic1", "-n", "1", "-s", "3000"}, 120s);
  if (must_pass) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
  return dir;  // `simnic down` (Nics' destructor) flushes and closes the files
}

viz::Timeline load(const std::string& dir) {
  viz::Timeline tl;
  std::string error;
  size_t skipped = 0;
  EXPECT_TRUE(viz::load_trace_files({dir + "/simnic0.jsonl", dir + "/simnic1.jsonl"}, &tl, &error, &skipped)) << error;
  EXPECT_EQ(skipped, 0u);
  return tl;
}

// With --trace-steps, the engines' walks reach the trace and the event log; and every packet
// simnicd traces carries its opcode table flags, which classify it as its name always did.
TEST(VizTrace, EngineStepsAndOpcodeFlagsFromRealNics) {
  ScratchDir scratch("viz-steps");
  std::string dir = record_exchange(scratch.path(), {"--trace-steps"});
  viz::Timeline tl = load(dir);
  std::map<std::string, int> walks;  // "nic engine"
  size_t packets = 0;
  for (size_t p = tl.first_pos(); p < tl.end_pos(); ++p) {
    const viz::Event& e = tl.at(p);
    if (e.kind == "engine_steps") {
      ++walks[e.nic + " " + e.s("engine")];
      EXPECT_EQ(e.s("steps").rfind("CHECK_STATE", 0), 0u) << viz::summarize(e);  // every walk starts there
      EXPECT_NE(viz::summarize(e).find(e.s("steps")), std::string::npos);
    }
    if ((e.kind != "pkt_tx" && e.kind != "pkt_rx") || e.has("cm")) continue;
    ++packets;
    ASSERT_TRUE(e.has("op_flags")) << viz::summarize(e);
    viz::Event by_name = e;
    by_name.fields.erase("op_flags");
    EXPECT_EQ(viz::classify_packet(e), viz::classify_packet(by_name)) << viz::summarize(e) << " " << e.s("op_flags");
    EXPECT_EQ(viz::packet_label(e), viz::packet_label(by_name)) << viz::summarize(e) << " " << e.s("op_flags");
  }
  EXPECT_GT(packets, 20u);
  for (const char* w : {"simnic0 completer", "simnic1 responder"}) EXPECT_GT(walks[w], 0) << w;
}

TEST(VizTrace, ARecordedExchangeRebuildsIntoStatesCompletionsAndFlights) {
  ScratchDir scratch("viz-trace");
  std::string dir = record_exchange(scratch.path());
  viz::Timeline tl = load(dir);
  ASSERT_GT(tl.end_pos(), 100u);

  // Both QPs went RESET -> INIT -> RTR -> RTS, in that order, before any packet.
  for (const char* nic : {"simnic0", "simnic1"}) {
    std::vector<std::string> states;
    size_t first_packet = tl.end_pos(), rts_at = tl.end_pos();
    std::map<std::string, int> kinds;
    for (size_t p = tl.first_pos(); p < tl.end_pos(); ++p) {
      const viz::Event& e = tl.at(p);
      if (e.nic != nic) continue;
      kinds[e.kind]++;
      if (e.kind == "qp_state" && states.size() < 3) {
        states.push_back(e.s("to"));
        if (e.s("to") == "RTS") rts_at = p;
      }
      if (e.kind == "pkt_tx" && first_packet == tl.end_pos()) first_packet = p;
    }
    EXPECT_EQ(states, (std::vector<std::string>{"INIT", "RTR", "RTS"})) << nic;
    EXPECT_LT(rts_at, first_packet) << nic;
    for (const char* k : {"nic_up", "ctx_open", "mr_create", "cq_create", "qp_create", "doorbell", "wqe_posted",
                          "pkt_tx", "pkt_rx", "dma", "cqe", "qp_destroy", "ctx_close"})
      EXPECT_GT(kinds[k], 0) << nic << " has no " << k;
  }

  // Midway, the rebuilt state has the QPs in RTS and every CQE so far successful.
  size_t mid = tl.first_pos() + (tl.end_pos() - tl.first_pos()) / 2;
  viz::World w = tl.state_at(mid);
  for (const char* nic : {"simnic0", "simnic1"}) {
    ASSERT_TRUE(w.count(nic));
    ASSERT_FALSE(w.at(nic).qps.empty()) << nic;
    EXPECT_EQ(w.at(nic).qps.begin()->second.state, "RTS") << nic;
  }
  // Every CQE is a success until simnic-verbs-check's deliberate bad rkey at the end: that
  // WRITE completes with REM_ACCESS_ERR (10), the QP goes to ERR, the next WR is flushed (5).
  std::vector<uint64_t> statuses;
  std::string err_state, err_rule;
  for (size_t p = tl.first_pos(); p < tl.end_pos(); ++p) {
    const viz::Event& e = tl.at(p);
    if (e.kind == "cqe") statuses.push_back(e.u("status_num"));
    // The responder's NAK names the broken rule; the requester's error points to it.
    if (e.kind == "nak" && err_rule.empty()) err_rule = e.s("rule");
    if (e.kind == "qp_state" && e.s("to") == "ERR" && err_state.empty()) err_state = e.s("cause");
  }
  ASSERT_GE(statuses.size(), 10u);
  size_t first_bad = std::find_if(statuses.begin(), statuses.end(), [](uint64_t s) { return s != 0; }) -
                     statuses.begin();
  EXPECT_GE(first_bad, 8u);
  ASSERT_LT(first_bad + 1, statuses.size());
  EXPECT_EQ(statuses[first_bad], 10u);     // IBV_WC_REM_ACCESS_ERR
  EXPECT_EQ(statuses[first_bad + 1], 5u);  // IBV_WC_WR_FLUSH_ERR
  EXPECT_NE(err_rule.find("rkey"), std::string::npos) << err_rule;
  EXPECT_FALSE(err_state.empty());

  // No loss: every packet sent was received, never before it was sent.
  ASSERT_FALSE(tl.flights().empty());
  for (const viz::Flight& f : tl.flights()) {
    ASSERT_NE(f.rx_pos, viz::Flight::kNever) << viz::summarize(tl.at(f.tx_pos));
    EXPECT_LT(f.tx_pos, f.rx_pos);
    EXPECT_NE(f.from_nic, f.to_nic);
    EXPECT_FALSE(f.dropped);
  }
}

TEST(VizTrace, LossShowsAsDroppedPacketsAndRetransmissions) {
  ScratchDir scratch("viz-loss");
  std::string dir = record_exchange(scratch.path(), {"--loss", "0.15", "--seed", "7"}, /*must_pass=*/false);
  viz::Timeline tl = load(dir);
  size_t dropped = 0, retransmitted = 0, unmatched_not_dropped = 0;
  for (const viz::Flight& f : tl.flights()) {
    dropped += f.dropped;
    retransmitted += f.retransmission;
    if (!f.dropped && f.rx_pos == viz::Flight::kNever) ++unmatched_not_dropped;
  }
  EXPECT_GT(dropped, 0u);
  EXPECT_GT(retransmitted, 0u);
  EXPECT_EQ(unmatched_not_dropped, 0u);
  viz::World end = tl.state_at(tl.end_pos());
  EXPECT_GT(end.at("simnic0").counters["retransmit"] + end.at("simnic1").counters["retransmit"], 0u);
}

struct Png {
  int w = 0, h = 0;
  std::vector<unsigned char> px;  // RGBA
};

Png read_png(const std::string& path) {
  Png p;
  int n = 0;
  unsigned char* data = stbi_load(path.c_str(), &p.w, &p.h, &n, 4);
  if (data) {
    p.px.assign(data, data + size_t(p.w) * size_t(p.h) * 4);
    stbi_image_free(data);
  }
  return p;
}

size_t distinct_colours(const Png& p) {
  std::set<uint32_t> c;
  for (size_t i = 0; i + 3 < p.px.size(); i += 4 * 7)
    c.insert(uint32_t(p.px[i]) << 16 | uint32_t(p.px[i + 1]) << 8 | p.px[i + 2]);
  return c.size();
}

bool have_viz() { return ::access((bin_dir() + "/simnic-viz").c_str(), X_OK) == 0 && have_program("xvfb-run"); }

std::vector<std::string> under_xvfb(std::vector<std::string> argv) {
  std::vector<std::string> x = {"xvfb-run", "-a", "-s", "-screen 0 1280x800x24"};
  x.insert(x.end(), argv.begin(), argv.end());
  return x;
}

// What simnic-viz's --layout-dump wrote: the wire's label boxes as drawn.
struct DumpedLayout {
  std::vector<viz::Rect> rects;
  size_t packets = 0, bursts = 0;
  bool labels_fit = true;
};

DumpedLayout read_layout(const std::string& path) {
  DumpedLayout d;
  std::ifstream in(path);
  std::string l;
  while (std::getline(in, l)) {
    auto j = nlohmann::json::parse(l);
    d.rects.push_back({j["x0"].get<float>(), j["y0"].get<float>(), j["x1"].get<float>(), j["y1"].get<float>()});
    d.packets += j["packets"].get<size_t>();
    d.bursts += j["packets"].get<size_t>() > 1;
    d.labels_fit &= j["label_w"].get<float>() <= j["x1"].get<float>() - j["x0"].get<float>();
  }
  return d;
}

TEST(VizScreenshot, AReplayRendersAndChangesWithTheEventShown) {
  if (!have_viz()) GTEST_SKIP() << "simnic-viz or xvfb-run missing (scripts/setup.sh installs them)";
  ScratchDir scratch("viz-shot");
  std::string dir = record_exchange(scratch.path());
  viz::Timeline tl = load(dir);
  // Two positions: early (QPs being set up) and when a packet is on the wire.
  ASSERT_FALSE(tl.flights().empty());
  size_t mid_flight = tl.flights()[tl.flights().size() / 2].tx_pos + 1;
  std::string a = dir + "/early.png", b = dir + "/flight.png";
  for (auto [png, at] : {std::pair{a, std::string("@12")}, std::pair{b, "@" + std::to_string(mid_flight)}}) {
    Result r = run(under_xvfb({bin_dir() + "/simnic-viz", "--replay", dir + "/simnic0.jsonl", dir + "/simnic1.jsonl",
                               "--screenshot", png, "--at", at, "--layout-dump", png + ".layout"}),
                   {}, 60s);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("wrote " + png), std::string::npos) << r.output;
    EXPECT_FALSE(viz::overlapping_blocks(read_layout(png + ".layout").rects).has_value()) << at;
  }
  Png pa = read_png(a), pb = read_png(b);
  ASSERT_EQ(pa.w, 1280);
  ASSERT_EQ(pa.h, 800);
  ASSERT_EQ(pb.w, pa.w);
  ASSERT_EQ(pb.h, pa.h);
  EXPECT_GT(distinct_colours(pa), 20u) << "blank screenshot";
  EXPECT_GT(distinct_colours(pb), 20u) << "blank screenshot";
  size_t differ = 0;
  for (size_t i = 0; i < pa.px.size(); i += 4)
    differ += pa.px[i] != pb.px[i] || pa.px[i + 1] != pb.px[i + 1] || pa.px[i + 2] != pb.px[i + 2];
  EXPECT_GT(differ, 2000u) << "the two positions render the same";

  // A bad --at is refused, not rendered.
  Result bad = run(under_xvfb({bin_dir() + "/simnic-viz", "--replay", dir + "/simnic0.jsonl", "--screenshot",
                               dir + "/bad.png", "--at", "simnic0:99999999"}),
                   {}, 60s);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
}

// --screenshot without --at shows the last data transfer, not the teardown's empty panels, and
// at the default 1280x800 no part of a NIC's column (QPs, CQ ring, MR table, counters) is cut
// off: what each part's content used is within its room (issue 24 point 8).
TEST(VizScreenshot, WithoutAtTheLastTransferIsShownAndNothingIsCutOff) {
  if (!have_viz()) GTEST_SKIP() << "simnic-viz or xvfb-run missing (scripts/setup.sh installs them)";
  ScratchDir scratch("viz-default");
  std::string dir = record_exchange(scratch.path());
  viz::Timeline tl = load(dir);
  const size_t moment = viz::last_transfer_pos(tl);
  ASSERT_LT(moment, tl.end_pos()) << "the recorded run ends with its teardown";
  ASSERT_TRUE(viz::is_data_transfer(tl.at(moment - 1)));
  viz::World shown = tl.state_at(moment), end = tl.state_at(tl.end_pos());
  EXPECT_FALSE(shown.at("simnic0").qps.empty());
  EXPECT_TRUE(end.at("simnic0").qps.empty()) << "the end is the teardown";
  std::string png = dir + "/default.png", panels = dir + "/default.panels";
  Result r = run(under_xvfb({bin_dir() + "/simnic-viz", "--replay", dir + "/simnic0.jsonl", dir + "/simnic1.jsonl",
                             "--screenshot", png, "--panel-dump", panels}),
                 {}, 60s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("event position " + std::to_string(moment) + " of " + std::to_string(tl.end_pos())),
            std::string::npos)
      << r.output;
  Png p = read_png(png);
  EXPECT_EQ(p.w, 1280);
  EXPECT_EQ(p.h, 800);
  std::ifstream in(panels);
  std::string l;
  std::set<std::string> seen;
  while (std::getline(in, l)) {
    auto j = nlohmann::json::parse(l);
    const std::string name = j["panel"].get<std::string>();
    seen.insert(name);
    EXPECT_LE(j["used"].get<float>(), j["room"].get<float>()) << name << " is cut off: " << l;
    EXPECT_LE(j["x1"].get<float>(), 1280.0f) << l;
    EXPECT_LE(j["y1"].get<float>(), 800.0f) << l;
  }
  EXPECT_EQ(seen, (std::set<std::string>{"simnic0/qps", "simnic0/side", "simnic0/mrs", "simnic1/qps", "simnic1/side",
                                         "simnic1/mrs"}));
}

TEST(VizScreenshot, AttachesLiveToRunningNics) {
  if (!have_viz()) GTEST_SKIP() << "simnic-viz or xvfb-run missing (scripts/setup.sh installs them)";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  ScratchDir scratch("viz-live");
  std::string dir = scratch.path();
  // simnic viz (the CLI) starts simnic-viz on this SIMNIC_DIR; traffic starts once it watches.
  std::string png = dir + "/live.png";
  Process viz(under_xvfb({bin_dir() + "/simnic", "viz", "--screenshot", png, "--wait-ms", "4000"}), nics.env());
  std::this_thread::sleep_for(1000ms);
  Result t = nics.run({bin_dir() + "/simnic-stress", "-a", "simnic0", "-b", "simnic1", "-t", "8"}, 120s);
  Result r = viz.wait(60s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(t.exit_code, 0) << t.output;
  // "wrote PNG (WxH, event position P of N, K packets)": it saw events and packets.
  unsigned long long pos = 0, total = 0, packets = 0;
  auto at = r.output.find("event position");
  ASSERT_NE(at, std::string::npos) << r.output;
  ASSERT_EQ(std::sscanf(r.output.c_str() + at, "event position %llu of %llu, %llu packets", &pos, &total, &packets), 3)
      << r.output;
  EXPECT_GT(total, 10u) << r.output;
  EXPECT_GT(packets, 0u) << r.output;
  EXPECT_GT(distinct_colours(read_png(png)), 20u);
}

// A recorded dense burst, as ib_write_bw makes one: `n` RDMA WRITE packets from simnic0 within
// 1 ms, received by simnic1 only after the last one left (all in flight at once), then ACKs.
// Returns the merged position right after the last transmission.
size_t write_dense_burst(const std::string& dir, size_t n) {
  const uint64_t wall0 = 1'700'000'000'000'000'000ull;
  std::ofstream f0(dir + "/simnic0.jsonl"), f1(dir + "/simnic1.jsonl");
  uint64_t seq0 = 0, seq1 = 0;
  auto line = [](std::ofstream& f, uint64_t* seq, const char* nic, uint64_t t, const char* kind,
                 nlohmann::ordered_json x) {
    nlohmann::ordered_json j{{"seq", ++*seq}, {"t_ns", t}, {"nic", nic}, {"kind", kind}};
    for (auto it = x.begin(); it != x.end(); ++it) j[it.key()] = it.value();
    f << j.dump() << "\n";
  };
  const uint32_t qp0 = 0x3a1f2c, qp1 = 0x5b9e07, psn0 = 0x7c0de0;
  for (int i = 0; i < 2; ++i) {
    std::ofstream& f = i ? f1 : f0;
    uint64_t* seq = i ? &seq1 : &seq0;
    const char* nic = i ? "simnic1" : "simnic0";
    uint32_t me = i ? qp1 : qp0, peer = i ? qp0 : qp1;
    line(f, seq, nic, 1000, "nic_up",
         {{"addr", i ? "127.0.0.2" : "127.0.0.1"}, {"port", 4791}, {"mtu", 4096}, {"wall_ns", wall0 + 1000}});
    line(f, seq, nic, 2000, "cq_create", {{"ctx", 1}, {"cq", 1}, {"cqe", 255}, {"entries", 256}});
    line(f, seq, nic, 3000, "qp_create",
         {{"ctx", 1},
          {"qp", me},
          {"type", "RC"},
          {"sq_entries", 128},
          {"rq_entries", 128},
          {"send_cq", 1},
          {"recv_cq", 1}});
    const char* path[] = {"RESET", "INIT", "RTR", "RTS"};
    for (int k = 0; k < 3; ++k)
      line(f, seq, nic, 4000 + uint64_t(k), "qp_state",
           {{"qp", me},
            {"from", path[k]},
            {"to", path[k + 1]},
            {"cause", "modify_qp"},
            {"attr",
             {{"dest_qp", k ? peer : 0},
              {"sq_psn", i ? 0x1234 : psn0},
              {"rq_psn", i ? psn0 : 0x1234},
              {"mtu", 4096},
              {"dgid", i ? "127.0.0.1" : "127.0.0.2"},
              {"access", "REMOTE_WRITE"},
              {"timeout", 14},
              {"retry_cnt", 7},
              {"rnr_retry", 7},
              {"min_rnr_timer", 12}}}});
  }
  line(f0, &seq0, "simnic0", 9000, "wqe_posted",
       {{"qp", qp0}, {"queue", "sq"}, {"index", 0}, {"wr_id", 1}, {"opcode", "RDMA_WRITE"}, {"length", n * 4096}});
  auto pkt = [&](uint64_t psn, const char* op, int num) {
    return nlohmann::ordered_json{{"qp", qp0},         {"src", "127.0.0.1"}, {"dst", "127.0.0.2"}, {"opcode", op},
                                  {"opcode_num", num}, {"psn", psn},         {"dest_qp", qp1},     {"payload", 4096}};
  };
  for (size_t k = 0; k < n; ++k) {
    const char* op = k == 0 ? "RC_RDMA_WRITE_FIRST" : k + 1 == n ? "RC_RDMA_WRITE_LAST" : "RC_RDMA_WRITE_MIDDLE";
    int num = k == 0 ? 6 : k + 1 == n ? 8 : 7;
    line(f0, &seq0, "simnic0", 10'000 + k * 1'000'000 / n, "pkt_tx", pkt((psn0 + k) & 0xFFFFFF, op, num));
  }
  for (size_t k = 0; k < n; ++k) {
    const char* op = k == 0 ? "RC_RDMA_WRITE_FIRST" : k + 1 == n ? "RC_RDMA_WRITE_LAST" : "RC_RDMA_WRITE_MIDDLE";
    int num = k == 0 ? 6 : k + 1 == n ? 8 : 7;
    auto p = pkt((psn0 + k) & 0xFFFFFF, op, num);
    p["qp"] = qp1;
    line(f1, &seq1, "simnic1", 1'100'000 + k * 100, "pkt_rx", p);
  }
  return 2 * 6 + 1 + n;  // both NICs: nic_up, cq_create, qp_create, 3 qp_state; the WQE; every pkt_tx
}

TEST(VizScreenshot, ADenseBurstHasNoOverlappingLabelsAtAnyZoom) {
  if (!have_viz()) GTEST_SKIP() << "simnic-viz or xvfb-run missing (scripts/setup.sh installs them)";
  ScratchDir scratch("viz-burst");
  std::string dir = scratch.path();
  const size_t n = 3000;
  size_t at = write_dense_burst(dir, n);
  viz::Timeline tl = load(dir);
  ASSERT_EQ(tl.flights().size(), n);
  ASSERT_EQ(tl.flights_at(double(at)).size(), n) << "every packet is in flight at the shown position";
  for (const char* zoom : {"1", "8", "300"}) {
    std::string png = dir + "/burst-" + zoom + ".png", layout = dir + "/burst-" + zoom + ".jsonl";
    Result r = run(under_xvfb({bin_dir() + "/simnic-viz", "--replay", dir + "/simnic0.jsonl", dir + "/simnic1.jsonl",
                               "--screenshot", png, "--at", "@" + std::to_string(at), "--zoom", zoom, "--layout-dump",
                               layout}),
                   {}, 60s);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    DumpedLayout d = read_layout(layout);
    ASSERT_FALSE(d.rects.empty()) << "zoom " << zoom;
    auto clash = viz::overlapping_blocks(d.rects);
    EXPECT_FALSE(clash.has_value()) << "zoom " << zoom << ": label boxes " << clash->first << " and " << clash->second
                                    << " overlap";
    EXPECT_TRUE(d.labels_fit) << "zoom " << zoom;
    if (std::string(zoom) == "1") {
      EXPECT_EQ(d.packets, n) << "at zoom 1 every packet is in some block";
      EXPECT_GE(d.bursts, 1u) << "back-to-back packets aggregate";
    } else {
      EXPECT_GT(d.packets, 0u);
      EXPECT_LT(d.packets, n) << "zoomed in, only part of the wire is shown";
    }
    EXPECT_GT(distinct_colours(read_png(png)), 20u);
  }
}

}  // namespace
}  // namespace simnic::it
