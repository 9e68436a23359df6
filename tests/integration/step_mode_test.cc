// Step mode on real NICs: `simnic step on` holds every input (doorbells, packets, timers),
// nothing moves and simulated time stands still until `simnic step next`, which performs
// exactly one held input; `simnic step off` lets the run finish normally.
#include <gtest/gtest.h>

#include <thread>

#include "harness.h"
#include "viz/model/timeline.h"
#include "viz/model/trace_sources.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

std::map<std::string, std::string> step(const Nics& nics, const std::string& nic, const std::string& cmd) {
  Result r = run({bin_dir() + "/simnic", "step", nic, cmd}, nics.env(), 10s);
  std::map<std::string, std::string> kv;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(nic + ": ", 0) == 0) line = line.substr(nic.size() + 2);
    auto sp = line.find(' ');
    if (sp != std::string::npos) kv[line.substr(0, sp)] = line.substr(sp + 1);
  }
  kv["exit"] = std::to_string(r.exit_code);
  return kv;
}

uint64_t num(std::map<std::string, std::string>& kv, const char* key) {
  return std::stoull(kv[key].empty() ? "0" : kv[key]);
}

// Reads what the NIC's telemetry socket sent until `until` returns true (bounded).
template <class Pred>
bool pump(viz::LiveFeed& feed, viz::Timeline& tl, std::chrono::milliseconds limit, Pred until) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    feed.poll(&tl);
    if (until()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST(StepMode, HoldsTheNicUntilSteppedThenReleasesOneInputAtATime) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  for (const char* nic : {"simnic0", "simnic1"}) ASSERT_EQ(step(nics, nic, "on")["paused"], "1");

  viz::LiveFeed feed;
  viz::Timeline tl;
  std::string error;
  ASSERT_TRUE(feed.attach(nics.dir(), "simnic1", &error)) << error;

  const std::string port = std::to_string(free_tcp_port());
  auto srv =
      nics.start({"ibv_rc_pingpong", "-d", "simnic0", "-g", "0", "-p", port, "-n", "2", "-s", "4000", "-m", "1024"});
  ASSERT_TRUE(wait_for_listener(std::stoi(port), 10s)) << srv->output();
  auto cli = nics.start(
      {"ibv_rc_pingpong", "-d", "simnic1", "-g", "0", "-p", port, "-n", "2", "-s", "4000", "-m", "1024", "127.0.0.1"});

  // The client connects (the slow path is not held), reaches RTS and rings its doorbell:
  // simnic1 holds that (and the engine work RTS started).
  std::map<std::string, std::string> st;
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    st = step(nics, "simnic1", "status");
    if (num(st, "held") >= 1) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_GE(num(st, "held"), 1u) << "nothing was ever held";
  std::this_thread::sleep_for(500ms);  // let the client post its SEND and ring

  // Nothing moves while held: no trace event, no simulated time, no packet.
  auto before = step(nics, "simnic1", "status");
  auto server_before = step(nics, "simnic0", "status");
  std::this_thread::sleep_for(600ms);
  auto after = step(nics, "simnic1", "status");
  auto server_after = step(nics, "simnic0", "status");
  EXPECT_EQ(before["trace_seq"], after["trace_seq"]);
  EXPECT_EQ(before["sim_time_ns"], after["sim_time_ns"]) << "simulated time moved while paused";
  EXPECT_EQ(before["held"], after["held"]);
  EXPECT_EQ(server_before["trace_seq"], server_after["trace_seq"]);
  feed.poll(&tl);
  for (size_t p = tl.first_pos(); p < tl.end_pos(); ++p)
    EXPECT_NE(tl.at(p).kind, "pkt_tx") << "a packet left a held NIC";
  EXPECT_EQ(cli->output().find("iters in"), std::string::npos) << "the client finished while its NIC was held";

  // Step simnic1 one held action at a time until its 4000-byte SEND (four 1024-byte MTU
  // packets) is on the wire: every step performs one action (at most one input and at most
  // one packet), so the message is walked packet by packet, and the trace shows the SEND's WQE
  // picked up before its first packet leaves.
  uint64_t last_seq = num(after, "trace_seq");
  bool packet_out = false, wqe_seen = false;
  int packets = 0, steps_with_a_packet = 0;
  for (int i = 0; i < 30 && packets < 4; ++i) {
    auto stepped = step(nics, "simnic1", "next");
    ASSERT_EQ(stepped["exit"], "0");
    uint64_t seq = num(stepped, "trace_seq");
    ASSERT_TRUE(
        pump(feed, tl, 5s, [&] { return seq == last_seq || (!tl.empty() && tl.at(tl.end_pos() - 1).seq >= seq); }))
        << "step " << i << ": trace_seq " << seq << ", last seen " << (tl.empty() ? 0 : tl.at(tl.end_pos() - 1).seq)
        << ", events " << tl.end_pos() << ", connected " << feed.any_connected();
    int inputs = 0, sent = 0;
    std::string what;
    for (size_t p = tl.first_pos(); p < tl.end_pos(); ++p) {
      const viz::Event& e = tl.at(p);
      if (e.seq <= last_seq) continue;
      what += viz::summarize(e) + "\n";
      if (e.kind == "doorbell" || e.kind == "pkt_rx" || (e.kind == "timer" && e.s("action") == "fired")) ++inputs;
      if (e.kind == "wqe_posted" && e.s("opcode") == "SEND") wqe_seen = true;
      if (e.kind == "pkt_tx") {
        ++sent, packet_out = true;
        EXPECT_TRUE(wqe_seen) << "packet before its WQE\n" << what;
      }
    }
    EXPECT_LE(inputs, 1) << "step " << i << " performed more than one input:\n" << what;
    EXPECT_LE(sent, 1) << "step " << i << " sent more than one packet:\n" << what;
    packets += sent;
    steps_with_a_packet += sent > 0;
    last_seq = seq;
  }
  ASSERT_TRUE(packet_out) << "thirty steps and the SEND never left";
  EXPECT_EQ(packets, 4) << "the 4000-byte SEND is four packets";
  EXPECT_EQ(steps_with_a_packet, 4) << "one packet per step";

  // The packet now waits at the held receiver, which has not acted on it.
  std::map<std::string, std::string> server_now;
  deadline = std::chrono::steady_clock::now() + 5s;
  do {
    server_now = step(nics, "simnic0", "status");
    if (server_now["next"] == "packet" || num(server_now, "held") > num(server_after, "held")) break;
    std::this_thread::sleep_for(20ms);
  } while (std::chrono::steady_clock::now() < deadline);
  EXPECT_GT(num(server_now, "held"), num(server_after, "held")) << "the packet should wait at the held receiver";
  EXPECT_EQ(server_now["trace_seq"], server_after["trace_seq"]) << "the receiver must not act on it yet";

  // Release both: the run completes as if never paused (no spurious ACK timeouts).
  for (const char* nic : {"simnic0", "simnic1"}) EXPECT_EQ(step(nics, nic, "off")["paused"], "0");
  Result c = cli->wait(60s), s = srv->wait(60s);
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_EQ(s.exit_code, 0) << s.output;
  // The ACK timer did not fire for the time the user spent stepping: no timeout, no resend.
  auto status = nics.status("simnic1");
  ASSERT_TRUE(status.count("retransmits") && status.count("timeouts")) << "status lacks the counters";
  EXPECT_EQ(status["retransmits"], "0");
  EXPECT_EQ(status["timeouts"], "0");
}

}  // namespace
}  // namespace simnic::it
