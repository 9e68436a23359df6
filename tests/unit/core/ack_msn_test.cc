// The requester's MSN check (IBA 9.7.5.1): an ACK or NAK whose MSN could not come from the
// connected responder is dropped and counted, so a forger must guess the MSN as well as the
// QPN and PSN, and a stale ACK from an old connection cannot retire new work.
#include <gtest/gtest.h>

#include "qp_pair.h"
#include "simnic/proto/psn.h"

namespace simnic::testing {
namespace {

using namespace simnic::proto;

class AckMsn : public QpPair {
 protected:
  // B's next packet to A, rebuilt with the MSN changed (a valid ICRC: what a forger can send).
  WirePacket with_msn(const WirePacket& p, uint32_t msn) {
    ParsedPacket pkt = parse(p);
    pkt.h.aeth.msn = msn & proto::kPsnMask;
    const IpUdpInfo ip{p.src_ip, p.dst_ip, 4791, 4791};
    return WirePacket{p.src_ip, p.dst_ip, packet_bytes(pkt.h, {pkt.payload.data(), pkt.payload.size()}, ip)};
  }
  void deliver(const WirePacket& p) {
    a->dev.on_packet(p.src_ip, 4791, p.bytes, now);
    run_pending();
  }
  // Sends `n` one-packet SENDs from A, delivers them to B, and returns B's ACK (not delivered).
  WirePacket acked_sends(int n) {
    for (int i = 0; i < n; ++i) {
      post_recv(*b, 100 + i, 0, 4096);
      post_send(*a, wqe(*a, IBV_WR_SEND, 1 + i, 0, 64));
    }
    while (!fabric.queue.empty() && fabric.queue.front().dst_ip == kIpB) deliver_one();
    EXPECT_FALSE(fabric.queue.empty());
    WirePacket ack = fabric.queue.back();
    fabric.queue.clear();
    EXPECT_EQ(parse(ack).h.bth.opcode, kRcAcknowledge);
    return ack;
  }
};

// Receive: the ACK for three SENDs, but with MSN 7 (only three messages were ever sent).
// Expect: dropped and counted; nothing completes. The true ACK then completes all three.
TEST_F(AckMsn, AnAckCountingMessagesNeverSentIsDropped) {
  start();
  WirePacket ack = acked_sends(3);
  ASSERT_EQ(parse(ack).h.aeth.msn, 3u);
  deliver(with_msn(ack, 7));
  EXPECT_EQ(a->dev.counters().rx_drop_bad_msn, 1u);
  EXPECT_TRUE(poll(*a).empty());
  deliver(ack);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 3u);
  for (const ibv_wc& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(a->dev.counters().rx_drop_bad_msn, 1u);
}

// Receive: the ACK for the third SEND with MSN 1: it claims the PSN of message 3 while only one
// message was completed, which no responder sends (a stale ACK from an earlier connection).
// Expect: dropped, nothing completes.
TEST_F(AckMsn, AnAckCountingTooFewMessagesForItsPsnIsDropped) {
  start();
  WirePacket ack = acked_sends(3);
  deliver(with_msn(ack, 1));
  EXPECT_EQ(a->dev.counters().rx_drop_bad_msn, 1u);
  EXPECT_TRUE(poll(*a).empty());
}

// Receive: a duplicate's ACK carries the responder's current MSN, newer than the messages
// before its PSN (here: every SEND is resent after the ACK was lost).
// Expect: accepted; the work completes once, without errors, and nothing is dropped as bad MSN.
TEST_F(AckMsn, ADuplicatesAckWithANewerMsnIsAccepted) {
  start();
  fill(*a, 0, 64, 3);
  acked_sends(3);  // B completed all three; its ACK is lost
  now += 200 * kMs;
  a->dev.on_timer(now);  // A times out and goes back N
  run_pending();
  for (int i = 0; i < 20 && !fabric.queue.empty(); ++i) deliver_one();
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 3u);
  for (const ibv_wc& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(a->dev.counters().rx_drop_bad_msn, 0u);
  EXPECT_EQ(poll(*b).size(), 3u);
}

}  // namespace
}  // namespace simnic::testing
