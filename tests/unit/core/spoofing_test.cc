// Issue 29, a classmate on the same host (points 2, 4 and 6): forged packets from a QP's peer
// address but another UDP port are dropped and counted; a flood of packets for QPNs that do
// not exist writes a bounded log, still counts every packet and leaves room for the next real
// error; a sweep for a UD QP's QPN and Q_Key wastes its guesses once the NIC sees it, while a
// peer that already talks to the QP goes on. Each test checks bytes, completions, counters
// and log lines.
#include <gtest/gtest.h>

#include <numeric>

#include "qp_pair.h"
#include "simnic/proto/psn.h"

namespace simnic::testing {
namespace {

constexpr uint16_t kRocePort = 4791;
constexpr uint16_t kOtherPort = 40000;        // where a classmate's socket sends from
constexpr uint32_t kIpStranger = 0x7f000063;  // 127.0.0.99: an address no NIC of the test has

class Spoofing : public QpPair {
 protected:
  // A well-formed packet (valid ICRC for the addresses and ports it travels with).
  static std::vector<uint8_t> forge(const proto::PacketHeaders& h, std::span<const uint8_t> payload, uint32_t src_ip,
                                    uint32_t dst_ip, uint16_t src_port) {
    std::vector<uint8_t> out = packet_bytes(h, payload, proto::IpUdpInfo{src_ip, dst_ip, src_port, kRocePort});
    EXPECT_GT(out.size(), 0u);
    return out;
  }
  // An RDMA WRITE ONLY into B's MR at `off`, exactly what B's QP expects next from A.
  std::vector<uint8_t> forged_write(size_t off, std::span<const uint8_t> payload, uint16_t src_port) {
    proto::PacketHeaders h{};
    h.bth.opcode = proto::kRcWriteOnly;
    h.bth.dest_qp = b->qp->qpn;
    h.bth.psn = b->qp->resp.epsn;
    h.bth.pkey = 0xffff;
    h.reth.va = mem.addr(b->pid, off);
    h.reth.rkey = b->mr->rkey;
    h.reth.dma_len = uint32_t(payload.size());
    return forge(h, payload, kIpA, kIpB, src_port);
  }
  // A UD SEND ONLY to `qpn` with Q_Key `qkey`.
  std::vector<uint8_t> forged_datagram(uint32_t qpn, uint32_t qkey, std::span<const uint8_t> payload, uint32_t src_ip,
                                       uint16_t src_port) {
    proto::PacketHeaders h{};
    h.bth.opcode = proto::kUdSendOnly;
    h.bth.dest_qp = qpn;
    h.bth.pkey = 0xffff;
    h.deth.qkey = qkey;
    h.deth.src_qp = 0x123456;
    return forge(h, payload, src_ip, kIpB, src_port);
  }
  size_t log_bytes(Host& h) {
    return std::accumulate(h.logger.lines.begin(), h.logger.lines.end(), size_t(0),
                           [](size_t n, const std::string& l) { return n + l.size() + 1; });
  }
  uint32_t ah_to(Host& h, Host& peer) {
    ibv_ah_attr attr{};
    attr.is_global = 1;
    attr.port_num = 1;
    attr.grh.dgid = peer.dev.addressing().gid0();
    uint32_t handle = 0;
    EXPECT_EQ(h.dev.memory_verbs().create_ah(h.ctx, h.pd, attr, &handle), 0);
    return handle;
  }
  abi::SendWqe ud_send(Host& h, Host& peer, uint64_t wr_id, size_t off, uint32_t len) {
    return ud_wqe(h, ah_to(h, peer), peer, wr_id, off, len);
  }
  void deliver_all() {
    fabric.deliver_all(now);
    run_pending();
  }
};

// --- point 2: source spoofing on the same host ---

// The classmate knows everything (QPN, PSN, rkey, va) and sends from A's address, but from a
// port of its own: A's port 4791 is A's NIC's. B drops it, counts it and leaves memory as it was.
TEST_F(Spoofing, ConnectedQpDropsAPacketFromItsPeersAddressButAnotherPort) {
  start();
  std::vector<uint8_t> evil(64, 0xee);
  std::memset(mem.ptr(b->pid, 4096), 0x11, 64);
  b->dev.on_packet(kIpA, kOtherPort, forged_write(4096, evil, kOtherPort), now);
  run_pending();
  EXPECT_EQ(counter(*b, "rx_drop_wrong_source"), 1u);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(mem.ptr(b->pid, 4096)[i], 0x11) << i;
  EXPECT_TRUE(b->logger.contains("UDP port 4791")) << "the drop says why";
  EXPECT_TRUE(fabric.queue.empty()) << "no ACK, no NAK to a forger";

  // Genuine traffic from A's NIC (port 4791) is unaffected: a WRITE lands, bytes compared.
  fill(*a, 0, 3000, 9);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 7, 0, 3000, 8192));
  deliver_all();
  EXPECT_TRUE(same(*a, 0, *b, 8192, 3000));
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(counter(*b, "rx_drop_wrong_source"), 1u);

  // The same forged bytes from port 4791 would be taken: it is the port that stopped them.
  b->dev.on_packet(kIpA, kRocePort, forged_write(4096, evil, kRocePort), now);
  run_pending();
  EXPECT_EQ(mem.ptr(b->pid, 4096)[0], 0xee);
}

// UD and the CM's QP1 are checked the same way on loopback: a NIC sends from its port only.
TEST_F(Spoofing, UdDatagramAndCmMadFromAnotherPortAreDroppedOnLoopback) {
  start(HostOptions{.type = IBV_QPT_UD});
  post_recv(*b, 70, 65536, 40 + 100);
  std::vector<uint8_t> payload(100, 0x5a);
  b->dev.on_packet(kIpA, kOtherPort, forged_datagram(b->qp->qpn, kQkey, payload, kIpA, kOtherPort), now);
  b->dev.on_packet(kIpA, kOtherPort, forged_datagram(proto::cm::kGsiQpn, 0x80010000, payload, kIpA, kOtherPort), now);
  run_pending();
  EXPECT_EQ(counter(*b, "rx_drop_wrong_source"), 2u);
  EXPECT_TRUE(poll(*b).empty()) << "the datagram was not delivered";
  // From port 4791 the same datagram is delivered.
  b->dev.on_packet(kIpA, kRocePort, forged_datagram(b->qp->qpn, kQkey, payload, kIpA, kRocePort), now);
  run_pending();
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(mem.ptr(b->pid, 65536 + 40), payload.data(), payload.size()), 0);
}

// --- point 4: log flooding ---

// 100,000 packets for QPNs that do not exist, over 10 s: every one counted, the log bounded,
// a summary says how many lines were held back, and a real error afterwards is still logged.
TEST_F(Spoofing, SweepOfDistinctQpnsWritesABoundedLogAndCountsEveryPacket) {
  start();
  const size_t before = log_bytes(*b);
  proto::PacketHeaders h{};
  h.bth.opcode = proto::kRcSendOnly;
  h.bth.pkey = 0xffff;
  std::vector<uint8_t> payload(8, 0);
  uint64_t sent = 0;
  for (uint32_t i = 0; i < 100'000; ++i) {
    h.bth.dest_qp = 0x100000 + i;
    if (h.bth.dest_qp == b->qp->qpn || h.bth.dest_qp == a->qp->qpn) continue;
    b->dev.on_packet(kIpA, kRocePort, forge(h, payload, kIpA, kIpB, kRocePort), now);
    ++sent;
    now += 100 * kUs;
  }
  EXPECT_EQ(counter(*b, "rx_drop_no_qp"), sent);
  const size_t flood_bytes = log_bytes(*b) - before;
  EXPECT_LT(flood_bytes, 64u * 1024) << "the flood wrote " << flood_bytes << " bytes of log";
  EXPECT_GT(flood_bytes, 0u) << "the flood is still reported";
  EXPECT_TRUE(b->logger.contains("more log lines suppressed")) << "a summary says how much was held back";

  // A legitimate error a second later: A SENDs, B has no receive posted, B RNR-NAKs and says so.
  now += 1000 * kMs;
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 16));
  deliver_one();
  EXPECT_TRUE(b->logger.contains("sent an RNR NAK")) << "a real error after the flood is logged";
}

// The same budget for code with a Logger of its own (the CM agent's REQ complaints): 100,000
// lines of one kind over 10 s and as many of kinds that vary (more kinds than the budget keeps
// apart) write a bounded log, a summary counts the rest, and a line of another kind a second
// after the flood is written.
TEST(LogBudgetAlone, FloodsOfOneKindOrManyStayBoundedAndCounted) {
  core::LogBudget budget;
  CapturingLogger logger;
  static const char* kKinds[] = {"cm_req", "a", "b", "c",  "d",  "e",  "f",  "g",  "h",  "i",  "j",  "k",
                                 "l",      "m", "n", "o",  "p",  "q",  "r",  "s",  "t",  "u",  "v",  "w",
                                 "x",      "y", "z", "aa", "bb", "cc", "dd", "ee", "ff", "gg", "hh", "ii"};
  uint64_t now = 1000 * kMs;
  for (uint32_t i = 0; i < 200'000; ++i) {
    const char* kind = i % 2 ? kKinds[i % std::size(kKinds)] : "cm_req";
    core::log_within_budget(logger, budget, core::LogLevel::kWarn, kind, now, [&] {
      return std::string(110, 'x');  // a CM REQ line is about 110 bytes
    });
    now += 50 * kUs;
  }
  size_t bytes = 0;
  for (auto& l : logger.lines) bytes += l.size() + 1;
  EXPECT_LT(bytes, 64u * 1024) << logger.lines.size() << " lines";
  EXPECT_TRUE(logger.contains("more log lines suppressed"));
  EXPECT_GT(budget.suppressed_total(), 190'000u) << "what was not written was counted";
  now += 1000 * kMs;
  const size_t before = logger.lines.size();
  core::log_within_budget(logger, budget, core::LogLevel::kError, "legit", now,
                          [] { return std::string("real error"); });
  EXPECT_TRUE(logger.contains("real error"));
  EXPECT_GT(logger.lines.size(), before);
}

// --- point 6: UD Q_Key guessing ---

// A classmate sweeps QPNs with the well-known Q_Key at 100,000 datagrams a second from an
// address of its own. Past 256 misses in a second the NIC drops datagrams of new senders
// unseen: the right QPN, when the sweep reaches it, is wasted; A, which delivered a datagram
// before, still gets through during the sweep; once the sweep stops, new senders are heard.
TEST_F(Spoofing, UdSweepForQpnAndQkeyIsThrottledAndKnownPeersCarryOn) {
  start(HostOptions{.type = IBV_QPT_UD});
  for (int i = 0; i < 4; ++i) post_recv(*b, 100 + i, 65536 + i * 4096, 4096);
  fill(*a, 0, 100, 3);
  post_send(*a, ud_send(*a, *b, 1, 0, 100));  // A is a known peer of B
  deliver_all();
  ASSERT_EQ(poll(*b).size(), 1u);

  std::vector<uint8_t> payload(32, 0x66);
  const uint32_t sweep = 1'000'000;  // 10 s at 100,000 a second
  const uint32_t hit_at = 500'000;   // where the sweep names B's QPN
  bool a_sent = false;
  uint64_t misses = 0;  // datagrams of the sweep that name no QP of B
  for (uint32_t i = 0; i < sweep; ++i) {
    const uint32_t qpn = i == hit_at ? b->qp->qpn : (b->qp->qpn + 1 + i) & proto::kPsnMask;
    // (QP1 is the CM's and 0xFFFFFF multicast: other paths, not this test's)
    if (qpn == a->qp->qpn || qpn == proto::cm::kGsiQpn || qpn == core::kMulticastQpn || qpn == 0) continue;
    b->dev.on_packet(kIpStranger, kRocePort, forged_datagram(qpn, kQkey, payload, kIpStranger, kRocePort), now);
    misses += i != hit_at;
    if (i == hit_at + 1000 && !a_sent) {  // A, mid-sweep: delivered
      post_send(*a, ud_send(*a, *b, 2, 0, 100));
      deliver_all();
      a_sent = true;
    }
    now += 10 * kUs;
  }
  run_pending();
  const uint64_t looked_at = counter(*b, "rx_drop_no_qp");
  const uint64_t throttled = counter(*b, "rx_drop_ud_throttled");
  EXPECT_EQ(looked_at + throttled, misses + 1) << "every datagram is counted (the hit as throttled)";
  // At most 256 guesses are looked at per closed second: 2^24 QPNs then take 18 hours, not 170 s.
  EXPECT_LE(looked_at, 256u * 11);
  const double full_sweep_s = double(1u << 24) / (double(looked_at) / 10.0);
  std::printf("guesses looked at: %llu of %u in 10 s; a full 2^24 sweep would take %.0f s\n",
              (unsigned long long)looked_at, sweep, full_sweep_s);
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u) << "the sweep's hit was wasted; only A's datagram arrived";
  EXPECT_EQ(wcs[0].wr_id, 101u);
  EXPECT_EQ(wcs[0].src_qp, a->qp->qpn);
  EXPECT_TRUE(same(*a, 0, *b, 65536 + 4096 + 40, 100));
  EXPECT_TRUE(b->logger.contains("sweep for a UD QP's QPN and Q_Key"));

  // The sweep is over: two seconds later a new sender with the right QPN and Q_Key is heard.
  now += 2000 * kMs;
  b->dev.on_packet(kIpStranger, kRocePort, forged_datagram(b->qp->qpn, kQkey, payload, kIpStranger, kRocePort), now);
  run_pending();
  wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(mem.ptr(b->pid, 65536 + 2 * 4096 + 40), payload.data(), payload.size()), 0);
}

// Bad Q_Keys count as misses too: a sweep of Q_Keys for a known QPN is throttled the same way.
TEST_F(Spoofing, UdQkeySweepForAKnownQpnIsThrottled) {
  start(HostOptions{.type = IBV_QPT_UD});
  post_recv(*b, 100, 65536, 4096);
  std::vector<uint8_t> payload(32, 0x77);
  for (uint32_t i = 0; i < 100'000; ++i) {
    const uint32_t qkey = i == 50'000 ? kQkey : 0x20000000 + i;
    b->dev.on_packet(kIpStranger, kRocePort, forged_datagram(b->qp->qpn, qkey, payload, kIpStranger, kRocePort), now);
    now += 10 * kUs;
  }
  run_pending();
  EXPECT_EQ(counter(*b, "rx_drop_qkey") + counter(*b, "rx_drop_ud_throttled"), 100'000u)
      << "every datagram is counted (the right Q_Key as throttled)";
  EXPECT_LE(counter(*b, "rx_drop_qkey"), 256u * 2);
  EXPECT_TRUE(poll(*b).empty()) << "the right Q_Key came while the guard was closed";
}

}  // namespace
}  // namespace simnic::testing
