// Coalesced ACKs (issue 26 point 2): the ACKs a responder earns in one event (a receive batch)
// leave as one, the newest, at the end of the event (IBA 9.7.5.1.1: an ACK acknowledges every
// earlier PSN, so a responder may coalesce them). What must hold: every request still
// completes, in order, with its bytes; nothing the QP answers afterwards (a READ response, a
// NAK) overtakes the ACK; step mode (a burst of 1) and SIMNIC_ACK_COALESCING=0 answer each
// request on its own.
#include <gtest/gtest.h>

#include "qp_pair.h"

namespace simnic::testing {
namespace {

constexpr size_t kN = 10;

class AckCoalescing : public QpPair {
 protected:
  void SetUp() override {
    start();
    fabric.batch = true;  // as recvmmsg: what is on the wire arrives together
    fabric.on_send = [this](const WirePacket& w) {
      if (w.src_ip == kIpB) from_b.push_back(parse(w));
    };
  }
  // kN signaled 64-byte WRITEs from A to B, posted together (one doorbell, one burst).
  std::vector<abi::SendWqe> writes() { return small_writes(0, kN); }
  size_t acks_from_b() const {
    size_t n = 0;
    for (const auto& p : from_b) n += p.h.bth.opcode == proto::kRcAcknowledge;
    return n;
  }
  std::vector<proto::ParsedPacket> from_b;
};

TEST_F(AckCoalescing, WritesOfOneBatchGetOneAckForTheNewestPsn) {
  post_sends(*a, writes());
  fabric.deliver_all(now);
  expect_in_order_success(poll(*a), kN);
  EXPECT_TRUE(same(*a, 0, *b, 8192, kN * 64));
  ASSERT_EQ(acks_from_b(), 1u);
  EXPECT_EQ(b->dev.counters().acks_sent, 1u);
  // The one ACK names the last WRITE's PSN and counts all ten messages (IBA 9.7.5.1.3).
  EXPECT_EQ(from_b[0].h.bth.psn, kN - 1);
  EXPECT_EQ(from_b[0].h.aeth.msn, kN);
  EXPECT_EQ(a->dev.counters().retransmits, 0u);
}

TEST_F(AckCoalescing, OffEveryWriteIsAnsweredOnItsOwn) {
  b->dev.set_ack_coalescing(false);
  post_sends(*a, writes());
  fabric.deliver_all(now);
  expect_in_order_success(poll(*a), kN);
  EXPECT_EQ(acks_from_b(), kN);
}

TEST_F(AckCoalescing, StepModeAnswersEveryWriteOnItsOwn) {
  b->dev.set_burst(1);  // step mode: a user sees each packet and its answer
  post_sends(*a, writes());
  fabric.deliver_all(now);
  expect_in_order_success(poll(*a), kN);
  EXPECT_EQ(acks_from_b(), kN);
}

TEST_F(AckCoalescing, AReadAfterTheWritesIsAnsweredAfterTheirAck) {
  fill(*b, 65536, 256, 9);
  std::vector<abi::SendWqe> ws = writes();
  ws.push_back(rdma(*a, *b, IBV_WR_RDMA_READ, 100 + kN, 32768, 256, 65536));
  post_sends(*a, ws);
  fabric.deliver_all(now);
  expect_in_order_success(poll(*a), kN + 1);
  EXPECT_TRUE(same(*a, 32768, *b, 65536, 256));
  ASSERT_GE(from_b.size(), 2u);
  EXPECT_EQ(from_b[0].h.bth.opcode, proto::kRcAcknowledge) << "the WRITEs' ACK leaves before the READ's response";
  EXPECT_EQ(from_b[1].h.bth.opcode, proto::kRcReadResponseOnly);
  EXPECT_EQ(a->dev.counters().retransmits, 0u);
}

TEST_F(AckCoalescing, ABadRkeyAfterTheWritesIsNakedAfterTheirAck) {
  std::vector<abi::SendWqe> ws = writes();
  abi::SendWqe bad = rdma(*a, *b, IBV_WR_RDMA_WRITE, 100 + kN, 0, 64, 16384);
  bad.rkey = b->mr->rkey + 0x100;
  ws.push_back(bad);
  post_sends(*a, ws);
  fabric.deliver_all(now);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), kN + 1);
  for (size_t i = 0; i < kN; ++i) EXPECT_EQ(wcs[i].status, IBV_WC_SUCCESS) << "WRITE " << i;
  EXPECT_EQ(wcs[kN].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(same(*a, 0, *b, 8192, kN * 64));
  ASSERT_EQ(from_b.size(), 2u);
  EXPECT_EQ(from_b[0].h.bth.opcode, proto::kRcAcknowledge);
  EXPECT_EQ(from_b[0].h.bth.psn, kN - 1);
  EXPECT_EQ(from_b[1].h.bth.opcode, proto::kRcAcknowledge);  // the NAK: an ACK opcode, NAK syndrome
  EXPECT_NE(from_b[1].h.aeth.syndrome >> 5, 0);
}

// The ACK leaves at the end of the event that earned it (Device::finish_turn), with whatever
// else the event sent, not in the NIC's next turn of pending work: simnicd runs that turn as a
// handler of its own, and a NIC preempted between the two on a loaded host sent other QPs'
// answers (READ responses, atomic answers) tens of ms before this ACK, so the requester heard
// answers to packets sent after its own and counted a loss (the busy-host soak's resends).
TEST_F(AckCoalescing, TheAckLeavesAtTheEndOfItsEventNotInTheNextTurn) {
  post_sends(*a, writes());
  ASSERT_EQ(fabric.queue.size(), kN);
  std::deque<WirePacket> batch;
  batch.swap(fabric.queue);
  for (const WirePacket& w : batch) b->dev.on_packet(w.src_ip, 4791, w.bytes, now);
  b->dev.finish_turn();  // the event ends; its pending turn does not run yet
  ASSERT_EQ(acks_from_b(), 1u);
  EXPECT_EQ(from_b[0].h.bth.psn, kN - 1);
  fabric.deliver_all(now);
  expect_in_order_success(poll(*a), kN);
  EXPECT_TRUE(same(*a, 0, *b, 8192, kN * 64));
  EXPECT_EQ(acks_from_b(), 1u) << "the pending turn sends it no second time";
  EXPECT_EQ(a->dev.counters().retransmits, 0u);
}

// Found with coalesced ACKs under loss (Stress.QuarterGibibyte...): after a go-back-N, the
// responder may already hold everything up to a later PSN, and its one ACK says so. The
// requester took an ACK past its resend cursor (next_psn) for a stray and dropped it; with its
// resend window cut by the loss, the resend never reached that PSN, and every later answer was
// the same ACK: RETRY_EXC_ERR with nothing lost. An ACK up to any PSN sent acknowledges it.
TEST_F(AckCoalescing, AnAckPastTheResendCursorRetiresWhatItCoversAndTheResendMovesOn) {
  post_sends(*a, writes());
  // B gets all ten WRITEs; its one ACK is lost.
  fabric.deliver_all(now, [](const WirePacket& w) { return w.src_ip != kIpB; });
  ASSERT_TRUE(poll(*a).empty());
  // A's ACK timer: A goes back to the first WRITE and, one packet per turn, resends it.
  a->dev.set_burst(1);
  now += 1'000'000'000;
  a->dev.on_timer(now);
  ASSERT_EQ(fabric.queue.size(), 1u);
  EXPECT_EQ(parse(fabric.queue.front()).h.bth.psn, 0u);
  // B answers the duplicate with an ACK for everything it has: PSN 9.
  WirePacket dup = std::move(fabric.queue.front());
  fabric.queue.pop_front();
  b->dev.on_packet(dup.src_ip, 4791, dup.bytes, now);
  b->dev.run_pending(now);
  b->dev.finish_turn();
  ASSERT_EQ(fabric.queue.size(), 1u);
  EXPECT_EQ(parse(fabric.queue.front()).h.bth.psn, kN - 1);
  const uint64_t sent_before = a->dev.counters().tx_packets;
  fabric.deliver_all(now);
  expect_in_order_success(poll(*a), kN);
  EXPECT_EQ(a->dev.counters().tx_packets, sent_before) << "the resend stops: B has every WRITE";
  EXPECT_FALSE(a->dev.has_pending_work());
}

// perftest's ib_write_bw server leaves its QP in RTR: a QP whose requester never runs. Its
// coalesced ACK (like its READ responses) makes it busy for one turn; once answered it must
// leave the busy set, or simnicd runs its pending work forever (a NIC spinning at 100 % CPU).
class AckCoalescingRtr : public AckCoalescing {
 protected:
  void SetUp() override {
    make_hosts();
    LinkOptions rtr;
    rtr.rtr_only = true;
    connect_one(*a, *b, {});
    connect_one(*b, *a, rtr);
    fabric.batch = true;
  }
};

TEST_F(AckCoalescingRtr, AReceiveOnlyQpAnswersAndLeavesNoPendingWork) {
  ASSERT_EQ(b->qp->state, IBV_QPS_RTR);
  post_sends(*a, writes());
  fabric.deliver_all(now);
  expect_in_order_success(poll(*a), kN);
  EXPECT_FALSE(b->dev.has_pending_work());
  // A READ answered by the RTR QP (its responses are pending work too) leaves none either.
  fill(*b, 65536, 256, 4);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_READ, 100 + kN, 32768, 256, 65536));
  fabric.deliver_all(now);
  ASSERT_EQ(poll(*a).size(), 1u);
  EXPECT_TRUE(same(*a, 32768, *b, 65536, 256));
  EXPECT_FALSE(b->dev.has_pending_work());
}

}  // namespace
}  // namespace simnic::testing
