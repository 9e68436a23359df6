// The trace as simnic-viz sees it, from real NICs: a recorded exchange rebuilds into the
// expected QP states, CQEs and packet flights; simnic-viz renders a replay to PNG (under Xvfb)
// that is not blank and changes with the event shown; and it attaches live to running NICs.
#include <gtest/gtest.h>

#include <stb_image.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <thread>
#include <unistd.h>

#include "harness.h"
#include "viz/model/timeline.h"
#include "viz/model/trace_sources.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

std::string temp_dir(const char* what) {
  std::string d = "/tmp/simnic-it-" + std::string(what) + "-" + std::to_string(::getpid());
  run({"rm", "-rf", d});
  run({"mkdir", "-p", d});
  return d;
}

// Records the trace of one simnic-verbs-check round (SEND, WRITE, READ, atomics) between two NICs.
// With loss, the run itself may fail as on real hardware (a lost NAK for the deliberately bad
// rkey ends in RETRY_EXC_ERR once the responder QP is in ERR), so only a clean run must pass.
std::string record_exchange(const char* name, const std::vector<std::string>& extra_up = {}, bool must_pass = true) {
  std::string dir = temp_dir(name);
  std::vector<std::string> up = {"--trace", dir};
  up.insert(up.end(), extra_up.begin(), extra_up.end());
  Nics nics(2, up);
  EXPECT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic1", "-n", "1", "-s", "3000"}, 120s);
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

TEST(VizTrace, ARecordedExchangeRebuildsIntoStatesCompletionsAndFlights) {
  std::string dir = record_exchange("viz-trace");
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
    for (const char* k : {"nic_up", "ctx_open", "mr_create", "cq_create", "qp_create", "doorbell", "wqe_posted", "pkt_tx",
                          "pkt_rx", "dma", "cqe", "qp_destroy", "ctx_close"})
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
  size_t first_bad = std::find_if(statuses.begin(), statuses.end(), [](uint64_t s) { return s != 0; }) - statuses.begin();
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
  run({"rm", "-rf", dir});
}

TEST(VizTrace, LossShowsAsDroppedPacketsAndRetransmissions) {
  std::string dir = record_exchange("viz-loss", {"--loss", "0.15", "--seed", "7"}, /*must_pass=*/false);
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
  run({"rm", "-rf", dir});
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
  for (size_t i = 0; i + 3 < p.px.size(); i += 4 * 7) c.insert(uint32_t(p.px[i]) << 16 | uint32_t(p.px[i + 1]) << 8 | p.px[i + 2]);
  return c.size();
}

bool have_viz() { return ::access((bin_dir() + "/simnic-viz").c_str(), X_OK) == 0 && have_program("xvfb-run"); }

std::vector<std::string> under_xvfb(std::vector<std::string> argv) {
  std::vector<std::string> x = {"xvfb-run", "-a", "-s", "-screen 0 1280x800x24"};
  x.insert(x.end(), argv.begin(), argv.end());
  return x;
}

TEST(VizScreenshot, AReplayRendersAndChangesWithTheEventShown) {
  if (!have_viz()) GTEST_SKIP() << "simnic-viz or xvfb-run missing (scripts/setup.sh installs them)";
  std::string dir = record_exchange("viz-shot");
  viz::Timeline tl = load(dir);
  // Two positions: early (QPs being set up) and when a packet is on the wire.
  ASSERT_FALSE(tl.flights().empty());
  size_t mid_flight = tl.flights()[tl.flights().size() / 2].tx_pos + 1;
  std::string a = dir + "/early.png", b = dir + "/flight.png";
  for (auto [png, at] : {std::pair{a, std::string("@12")}, std::pair{b, "@" + std::to_string(mid_flight)}}) {
    Result r = run(under_xvfb({bin_dir() + "/simnic-viz", "--replay", dir + "/simnic0.jsonl", dir + "/simnic1.jsonl",
                               "--screenshot", png, "--at", at}), {}, 60s);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("wrote " + png), std::string::npos) << r.output;
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
                               dir + "/bad.png", "--at", "simnic0:99999999"}), {}, 60s);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  run({"rm", "-rf", dir});
}

TEST(VizScreenshot, AttachesLiveToRunningNics) {
  if (!have_viz()) GTEST_SKIP() << "simnic-viz or xvfb-run missing (scripts/setup.sh installs them)";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  std::string dir = temp_dir("viz-live");
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
  run({"rm", "-rf", dir});
}

}  // namespace
}  // namespace simnic::it
