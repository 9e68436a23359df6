// A live viewer sees what happened before it attached: simnicd keeps a bounded ring of its
// recent trace events and replays it to each new telemetry subscriber, before the snapshot of
// what exists now (simnic/io/trace_hub.h). Checked with simnic-viz's own model (LiveFeed ->
// Timeline): attach after a short program has finished, and attach mid-run.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "harness.h"
#include "viz/model/timeline.h"
#include "viz/model/trace_sources.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

// Attaches the model to every NIC's telemetry socket and polls until `done` says the timeline
// has what the test needs (or 40 s pass: a loaded machine replays 100,000 events slowly).
template <typename Done>
bool watch(const Nics& nics, viz::Timeline* tl, Done done) {
  viz::LiveFeed feed;
  std::string error;
  for (const char* nic : {"simnic0", "simnic1"})
    if (!feed.attach(nics.dir(), nic, &error)) {
      ADD_FAILURE() << error;
      return false;
    }
  auto deadline = std::chrono::steady_clock::now() + 40s;
  while (std::chrono::steady_clock::now() < deadline) {
    feed.poll(tl);
    if (done(*tl)) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

struct Seen {
  std::map<std::string, std::set<uint64_t>> qps_created;  // nic -> QPNs
  std::map<std::string, size_t> packets_sent;
  std::map<std::string, size_t> snapshot_lines;
  bool nic_up_first = true;
};

// Adds the events from `from` on to `s`, and returns where it stopped, so a poll loop scans
// each event once (rescanning 100,000 replayed events every 20 ms fell behind a busy machine).
size_t scan_from(const viz::Timeline& tl, size_t from, Seen& s, std::set<std::string>& started) {
  for (size_t p = std::max(from, tl.first_pos()); p < tl.end_pos(); ++p) {
    const viz::Event& e = tl.at(p);
    if (!started.count(e.nic) && e.kind != "nic_up") s.nic_up_first = false;
    started.insert(e.nic);
    if (e.b("snapshot")) {
      s.snapshot_lines[e.nic]++;
      continue;
    }
    if (e.kind == "qp_create") s.qps_created[e.nic].insert(e.u("qp"));
    if (e.kind == "pkt_tx") s.packets_sent[e.nic]++;
  }
  return tl.end_pos();
}

Seen scan(const viz::Timeline& tl) {
  Seen s;
  std::set<std::string> started;
  scan_from(tl, 0, s, started);
  return s;
}

// The same, kept up to date across polls.
struct Scanner {
  Seen seen;
  std::set<std::string> started;
  size_t pos = 0;
  Seen& operator()(const viz::Timeline& tl) {
    pos = scan_from(tl, pos, seen, started);
    return seen;
  }
};

TEST(VizLiveHistory, AViewerAttachingAfterAShortProgramSeesWhatItDid) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r =
      nics.run({bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic1", "-n", "1", "-s", "3000"}, 120s);
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // The program is gone: without the history, a viewer would see two idle NICs.
  viz::Timeline tl;
  bool complete = watch(nics, &tl, [](const viz::Timeline& t) {
    Seen s = scan(t);
    return s.snapshot_lines["simnic0"] && s.snapshot_lines["simnic1"] && s.packets_sent["simnic0"] &&
           s.packets_sent["simnic1"];
  });
  ASSERT_TRUE(complete) << "history incomplete after 20 s: " << tl.end_pos() << " events";
  Seen s = scan(tl);
  EXPECT_TRUE(s.nic_up_first) << "each NIC's history starts with its nic_up";
  for (const char* nic : {"simnic0", "simnic1"}) {
    ASSERT_FALSE(s.qps_created[nic].empty()) << nic;
    EXPECT_GT(s.packets_sent[nic], 5u) << nic;
  }
  // The rebuilt end state: the program's QPs were destroyed (and say so), their packets were
  // matched to their receptions, and on the way the QPs were connected with their attributes.
  viz::World end = tl.state_at(tl.end_pos());
  for (const char* nic : {"simnic0", "simnic1"}) {
    const viz::NicState& n = end.at(nic);
    EXPECT_TRUE(n.qps.empty()) << nic;
    size_t destroyed_qps = 0;
    for (const viz::Destroyed& d : n.destroyed) destroyed_qps += d.what == "QP" && s.qps_created[nic].count(d.id);
    EXPECT_EQ(destroyed_qps, s.qps_created[nic].size()) << nic;
  }
  size_t matched = 0;
  for (const viz::Flight& f : tl.flights()) matched += f.rx_pos != viz::Flight::kNever;
  EXPECT_GT(matched, 10u);
  bool saw_rts_with_peer = false;
  for (size_t p = tl.first_pos(); p < tl.end_pos() && !saw_rts_with_peer; ++p) {
    const viz::Event& e = tl.at(p);
    if (e.kind != "qp_state" || e.s("to") != "RTS") continue;
    viz::World w = tl.state_at(p + 1);
    const viz::QpInfo& q = w.at(e.nic).qps.at(uint32_t(e.u("qp")));
    saw_rts_with_peer = q.attr.known && q.attr.dest_qp != 0 && !q.attr.dgid.empty();
  }
  EXPECT_TRUE(saw_rts_with_peer) << "the history's qp_state events carry the QP attributes";
}

TEST(VizLiveHistory, AViewerAttachingMidRunSeesTheSetupAndTheLiveTraffic) {
  // Every packet leaves 500 us late (the NICs' fault injector), so a round trip takes at least
  // 1 ms whatever the data path's speed: the history (100,000 events) then spans several
  // seconds, and the setup is still in it when the viewer under test attaches, even on a busy
  // machine where attaching takes a while. Without the delay, round trips of 30-40 us filled the
  // ring within a second, and a slow attach beside other tests found the setup gone.
  Nics nics(2, {"--delay", "500"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  // Still running when the viewer's checks are made: one 4 KiB slot, so each round waits for
  // the previous one's credit; 3,072 rounds of at least 1 ms (about 8 s here).
  auto prog =
      nics.start({bin_dir() + "/simnic-stress", "-a", "simnic0", "-b", "simnic1", "-t", "12", "-c", "4096", "-d", "1"});
  // A first viewer waits until the program is connected and sending on both NICs; then the
  // viewer under test attaches, mid-run.
  viz::Timeline probe;
  Scanner probe_scan;
  bool sending = watch(nics, &probe, [&](const viz::Timeline& t) {
    Seen& s = probe_scan(t);
    return s.packets_sent["simnic0"] > 20 && s.packets_sent["simnic1"] > 20;
  });
  ASSERT_TRUE(sending) << "simnic-stress did not start sending";

  viz::Timeline tl;
  size_t events_at_snapshot = 0;
  Scanner tl_scan;
  bool done = watch(nics, &tl, [&](const viz::Timeline& t) {
    Seen& s = tl_scan(t);
    if (!s.snapshot_lines["simnic0"] || !s.snapshot_lines["simnic1"]) return false;
    if (!events_at_snapshot) events_at_snapshot = t.end_pos();
    return t.end_pos() > events_at_snapshot + 50;  // live events after the history and snapshot
  });
  ASSERT_TRUE(done) << tl.end_pos() << " events";
  // The history holds the setup: the QPs' creation and RESET -> INIT -> RTR -> RTS (not only the
  // snapshot's "RESET -> RTS"), before the snapshot lines.
  for (const char* nic : {"simnic0", "simnic1"}) {
    std::vector<std::string> path;
    size_t first_snapshot = tl.end_pos(), created = tl.end_pos();
    for (size_t p = tl.first_pos(); p < tl.end_pos(); ++p) {
      const viz::Event& e = tl.at(p);
      if (e.nic != nic) continue;
      if (e.b("snapshot")) {
        first_snapshot = std::min(first_snapshot, p);
        continue;
      }
      if (e.kind == "qp_create" && created == tl.end_pos()) created = p;
      if (e.kind == "qp_state" && path.size() < 3) path.push_back(e.s("to"));
    }
    EXPECT_LT(created, first_snapshot) << nic;
    EXPECT_EQ(path, (std::vector<std::string>{"INIT", "RTR", "RTS"})) << nic;
  }
  // The state at the live end has the running QPs in RTS with their peer, and work in flight.
  viz::World now = tl.state_at(tl.end_pos());
  for (const char* nic : {"simnic0", "simnic1"}) {
    ASSERT_FALSE(now.at(nic).qps.empty()) << nic;
    const viz::QpInfo& q = now.at(nic).qps.begin()->second;
    EXPECT_EQ(q.state, "RTS") << nic;
    EXPECT_NE(q.attr.dest_qp, 0u) << nic;
    EXPECT_GT(q.sq.producer + q.rq.producer, 0u) << nic << ": the rings show the WQEs posted before the attach";
  }
  Result r = prog->wait(120s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// The history is bounded (100,000 events or 16 MiB per NIC): after a longer run a new subscriber gets the
// newest events, preceded by the NIC's own nic_up (its address and clock), then the snapshot.
TEST(VizLiveHistory, TheHistoryIsBoundedAndStartsWithTheNicsOwnNicUp) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  // 16 MiB at MTU 256: some 65,000 packets each way, well over 100,000 events per NIC.
  Result r = nics.run({bin_dir() + "/simnic-stress", "-a", "simnic0", "-b", "simnic1", "-t", "16", "-m", "256"}, 180s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  viz::Timeline tl;
  Scanner tl_scan;
  bool complete = watch(nics, &tl, [&](const viz::Timeline& t) {
    Seen& s = tl_scan(t);
    return s.snapshot_lines["simnic0"] && s.snapshot_lines["simnic1"];
  });
  ASSERT_TRUE(complete) << tl.end_pos() << " events";
  std::map<std::string, size_t> history;
  std::map<std::string, std::vector<uint64_t>> first_seqs;
  for (size_t p = tl.first_pos(); p < tl.end_pos(); ++p) {
    const viz::Event& e = tl.at(p);
    if (e.b("snapshot")) continue;
    ++history[e.nic];
    if (first_seqs[e.nic].size() < 2) first_seqs[e.nic].push_back(e.seq);
    if (first_seqs[e.nic].size() == 1) {
      EXPECT_EQ(e.kind, "nic_up") << e.nic;
    }
  }
  for (const char* nic : {"simnic0", "simnic1"}) {
    // At most 100,000 events or 16 MiB (whichever is reached first; here lines of ~190 bytes
    // reach 16 MiB first), plus the NIC's first nic_up.
    EXPECT_LE(history[nic], 100'001u) << nic;
    EXPECT_GT(history[nic], 50'000u) << nic << ": the ring keeps the newest events";
    ASSERT_EQ(first_seqs[nic].size(), 2u);
    EXPECT_EQ(first_seqs[nic][0], 1u) << nic;
    EXPECT_GT(first_seqs[nic][1], 1000u) << nic << ": older events left the ring";
  }
  size_t matched = 0;
  for (const viz::Flight& f : tl.flights()) matched += f.rx_pos != viz::Flight::kNever;
  EXPECT_GT(matched, 1000u) << "the packets of the history's window still pair up";
}

}  // namespace
}  // namespace simnic::it
