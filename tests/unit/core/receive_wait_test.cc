// A request that finds no receive WQE while its program is behind (completions it has not
// polled, or a receive taken in the last 4 ms) waits for the program's next receives, a window of
// half its QP's ACK timeout (4-64 ms), instead of an RNR NAK at once (engines/receive_wait.cc,
// issue 26); window after window, up to 1 s, while the program has not run at all, telling the
// requester with a 0-credit ACK every 4 ms. A program that is not behind is RNR NAKed at once,
// as by rxe.
#include <gtest/gtest.h>

#include "qp_pair.h"
#include "simnic/proto/psn.h"

namespace simnic::testing {
namespace {

// Half the QPs' Local ACK Timeout (the fixture's timeout 14: 67.1 ms), however long min_rnr_timer is.
constexpr uint64_t kWaitNs = (uint64_t(4096) << 14) / 2;
constexpr uint64_t kNoticeNs = 4 * kMs;  // the 0-credit ACKs while a wait goes on

class ReceiveWait : public QpPair {
 protected:
  // A sends two 8-byte SENDs (from offsets 0 and 64) to B, which posted one receive (at 4096).
  void two_sends_one_receive() {
    fill(*a, 0, 128, 5);
    post_recv(*b, 20, 4096, 64);
    post_sends(*a, {wqe(*a, IBV_WR_SEND, 1, 0, 8), wqe(*a, IBV_WR_SEND, 2, 64, 8)});
    ASSERT_EQ(queued_opcodes(kIpA), (std::vector<uint8_t>{proto::kRcSendOnly, proto::kRcSendOnly}));
  }
  // The first SEND lands in B's receive; the second finds none, while B's program is behind.
  void second_send_finds_no_receive() {
    two_sends_one_receive();
    deliver_one();  // the first lands: a CQE B's program has not polled
    deliver_one();  // the second finds no receive WQE
  }
  // The answers B has put on the wire, as AETH syndrome classes (proto::kAethAck, kAethRnrNak).
  std::vector<uint8_t> answers_from_b() {
    std::vector<uint8_t> out;
    for (const proto::ParsedPacket& p : sent_by(*b)) out.push_back(proto::aeth_class(p.h.aeth.syndrome));
    return out;
  }
  // The receive WQEs B's waiting requests take, as the shim reads it.
  uint32_t awaited() { return b->qp->shm->receives_awaited.load(); }
  void expect_both_sends_landed() {
    auto at_a = poll(*a);
    ASSERT_EQ(at_a.size(), 2u);
    for (const ibv_wc& wc : at_a) EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc.wr_id;
    EXPECT_TRUE(same(*a, 0, *b, 4096, 8));
    EXPECT_TRUE(same(*a, 64, *b, 4096 + 64, 8));
  }
};

TEST_F(ReceiveWait, ASendWaitsForTheReceiveOfAProgramBehindOnItsCompletions) {
  start();
  second_send_finds_no_receive();  // it waits: no RNR NAK
  EXPECT_EQ(counter(*b, "receive_waits"), 1u);
  EXPECT_EQ(counter(*b, "rnr_naks_sent"), 0u);
  EXPECT_EQ(b->qp->resp.held_until, now + kWaitNs);                    // not B's min_rnr_timer (1: 0.01 ms)
  EXPECT_EQ(b->dev.next_deadline(), now + kNoticeNs);                  // the first notice comes first
  EXPECT_EQ(awaited(), 1u);                                            // the shim rings when it posts one
  EXPECT_EQ(answers_from_b(), std::vector<uint8_t>{proto::kAethAck});  // for the first only

  auto at_b = poll(*b);  // the program catches up and posts the next receive
  ASSERT_EQ(at_b.size(), 1u);
  post_recv(*b, 21, 4096 + 64, 64);
  run_pending();  // the end of the doorbell's event: the waiting SEND goes on
  EXPECT_EQ(awaited(), 0u);
  EXPECT_EQ(b->dev.next_deadline(), 0u);
  fabric.deliver_all(now);
  run_pending();
  at_b = poll(*b);
  ASSERT_EQ(at_b.size(), 1u);
  EXPECT_EQ(at_b[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(at_b[0].wr_id, 21u);
  EXPECT_EQ(at_b[0].byte_len, 8u);
  expect_both_sends_landed();
  EXPECT_EQ(counter(*b, "rnr_naks_sent"), 0u);
  EXPECT_EQ(counter(*a, "retransmits"), 0u);
}

// The shim rings (and the NIC lets them go) once as many receives are posted as the waiting
// requests take, not at each receive of a program catching up.
TEST_F(ReceiveWait, TheWaitingSendsGoOnOnceAsManyReceivesArePostedAsTheyTake) {
  start();
  fill(*a, 0, 256, 9);
  post_recv(*b, 20, 4096, 64);
  post_sends(*a, {wqe(*a, IBV_WR_SEND, 1, 0, 8), wqe(*a, IBV_WR_SEND, 2, 64, 8), wqe(*a, IBV_WR_SEND, 3, 128, 8),
                  wqe(*a, IBV_WR_SEND, 4, 192, 8)});
  for (int i = 0; i < 4; ++i) deliver_one();  // the first lands, three wait
  EXPECT_EQ(awaited(), 3u);
  EXPECT_EQ(counter(*b, "receive_waits"), 1u);
  post_recv(*b, 21, 4096 + 64, 64);
  EXPECT_FALSE(abi::awaited_receives_posted(*b->qp->shm, b->cq->shm));  // one of three, a CQE unpolled
  run_pending();
  EXPECT_EQ(awaited(), 3u);  // still waiting
  post_recv(*b, 22, 4096 + 128, 64);
  post_recv(*b, 23, 4096 + 192, 64);
  EXPECT_TRUE(abi::awaited_receives_posted(*b->qp->shm, b->cq->shm));
  run_pending();
  EXPECT_EQ(awaited(), 0u);
  fabric.deliver_all(now);
  run_pending();
  auto at_b = poll(*b);
  ASSERT_EQ(wr_ids(at_b), (std::vector<uint64_t>{20, 21, 22, 23}));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(same(*a, 64 * i, *b, 4096 + 64 * i, 8)) << i;
  auto at_a = poll(*a);
  ASSERT_EQ(at_a.size(), 4u);
  for (const ibv_wc& wc : at_a) EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc.wr_id;
  EXPECT_EQ(counter(*b, "rnr_naks_sent"), 0u);
  EXPECT_EQ(counter(*a, "retransmits"), 0u);
}

// All polled, and the NIC took its last receive moments ago: a program preempted between polling
// a batch and posting its receives again. It is waited for as well.
TEST_F(ReceiveWait, AProgramThatPolledButHasNotPostedAgainYetIsWaitedFor) {
  start();
  two_sends_one_receive();
  deliver_one();
  ASSERT_EQ(poll(*b).size(), 1u);
  now += 3 * kMs;
  deliver_one();
  EXPECT_EQ(counter(*b, "receive_waits"), 1u);
  EXPECT_EQ(counter(*b, "rnr_naks_sent"), 0u);
  post_recv(*b, 21, 4096 + 64, 64);
  run_pending();
  fabric.deliver_all(now);
  run_pending();
  ASSERT_EQ(poll(*b).size(), 1u);
  expect_both_sends_landed();
}

// Nothing to poll and no receive taken for 4 ms: the program is not behind, it did not post.
TEST_F(ReceiveWait, AProgramThatHasNotBeenReceivingIsRnrNakedAtOnce) {
  start();
  two_sends_one_receive();
  deliver_one();
  ASSERT_EQ(poll(*b).size(), 1u);
  now += 4 * kMs;
  deliver_one();
  EXPECT_EQ(counter(*b, "receive_waits"), 0u);
  EXPECT_EQ(counter(*b, "rnr_naks_sent"), 1u);
  EXPECT_EQ(answers_from_b(), (std::vector<uint8_t>{proto::kAethAck, proto::kAethRnrNak}));
  EXPECT_EQ(awaited(), 0u);
}

TEST_F(ReceiveWait, TheWaitEndsInAnRnrNakAfterHalfTheAckTimeout) {
  start();
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_RTS;
  at.min_rnr_timer = 14;  // 1.28 ms: what A waits after the NAK, not what B waits
  ASSERT_EQ(b->dev.queue_verbs().modify_qp(b->ctx, b->qp->handle, at, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER, now), 0);
  second_send_finds_no_receive();
  const uint64_t due = now + kWaitNs;
  EXPECT_EQ(b->qp->resp.held_until, due);
  now += kMs;
  ASSERT_EQ(poll(*b).size(), 1u);  // the program runs: it polls, and posts nothing
  now = due - 1;
  b->dev.on_timer(now);
  run_pending();
  EXPECT_EQ(counter(*b, "rnr_naks_sent"), 0u);  // still waiting
  now = due;
  b->dev.on_timer(now);
  run_pending();
  EXPECT_EQ(counter(*b, "rnr_naks_sent"), 1u);
  EXPECT_TRUE(queued(kIpB, proto::kRcAcknowledge));
  EXPECT_EQ(awaited(), 0u);

  // Handed the NAK, A waits its 1.28 ms and sends the second again; B has a receive by then.
  fabric.deliver_all(now);
  run_pending();
  post_recv(*b, 21, 4096 + 64, 64);
  now += 1'280'000;
  a->dev.on_timer(now);
  run_pending();
  fabric.deliver_all(now);
  run_pending();
  expect_both_sends_landed();
}

TEST_F(ReceiveWait, NotInStepModeWhereEachRnrNakIsShown) {
  start();
  b->dev.set_burst(1);
  second_send_finds_no_receive();
  EXPECT_EQ(counter(*b, "receive_waits"), 0u);
  EXPECT_EQ(counter(*b, "rnr_naks_sent"), 1u);
}

TEST_F(ReceiveWait, AQpMovedToErrorWhileItsSendWaitsDropsItAndFlushes) {
  start();
  second_send_finds_no_receive();
  ASSERT_EQ(counter(*b, "receive_waits"), 1u);
  ASSERT_EQ(b->modify_state(IBV_QPS_ERR, 0, 0, now), 0);
  run_pending();
  EXPECT_EQ(b->dev.next_deadline(), 0u);
  EXPECT_EQ(awaited(), 0u);
  EXPECT_TRUE(b->qp->resp.held.empty());
  EXPECT_EQ(counter(*b, "rx_drop_qp_state"), 1u);  // the waiting SEND, handled in ERR
}

// A QP that only receives (RTR: perftest's bandwidth servers) has no ACK timeout of its own:
// its requests wait 8 ms, the shortest ACK timeout a simnic requester runs.
TEST_F(ReceiveWait, AReceiveOnlyQpWaitsEightMilliseconds) {
  make_hosts();
  connect_one(*a, *b, {});
  LinkOptions receive_only;
  receive_only.rtr_only = true;
  connect_one(*b, *a, receive_only);
  second_send_finds_no_receive();
  EXPECT_EQ(counter(*b, "receive_waits"), 1u);
  EXPECT_EQ(b->qp->resp.held_until, now + 8'000'000u);
}

// B's program, runnable but not given a CPU, does not run at all (no poll, no post) for three
// windows: the wait goes on, each 4 ms B sends A a 0-credit ACK of the PSN before the waiting
// SEND, and A's ACK timer (67 ms) puts itself off on those instead of resending. Then the
// program runs and the SEND lands.
TEST_F(ReceiveWait, AProgramThatHasNotRunIsWaitedForPastTheWindowAndTheRequesterIsTold) {
  start();
  mem.programs_runnable = true;
  second_send_finds_no_receive();
  const uint64_t end = now + 3 * kWaitNs;
  while (now < end) {
    now += kMs;
    b->dev.on_timer(now);
    a->dev.on_timer(now);
    run_pending();
    fabric.deliver_all(now);
    run_pending();
  }
  EXPECT_EQ(counter(*b, "rnr_naks_sent"), 0u);
  EXPECT_FALSE(b->qp->resp.held.empty());
  EXPECT_GE(counter(*b, "acks_sent"), 3 * kWaitNs / kNoticeNs - 1);  // the notices
  EXPECT_GE(counter(*a, "timeouts_deferred"), 1u);
  EXPECT_EQ(counter(*a, "timeouts"), 0u);
  EXPECT_EQ(counter(*a, "retransmits"), 0u);

  ASSERT_EQ(poll(*b).size(), 1u);
  post_recv(*b, 21, 4096 + 64, 64);
  run_pending();
  fabric.deliver_all(now);
  run_pending();
  ASSERT_EQ(poll(*b).size(), 1u);
  expect_both_sends_landed();
  EXPECT_EQ(counter(*a, "retransmits"), 0u);
}

// However long the program stays away, the wait ends within 1 s in an RNR NAK.
TEST_F(ReceiveWait, AWaitForAProgramThatNeverRunsEndsWithinASecond) {
  start();
  mem.programs_runnable = true;
  second_send_finds_no_receive();
  const uint64_t began = now;
  while (counter(*b, "rnr_naks_sent") == 0 && now - began < 2'000 * kMs) {
    now += kMs;
    b->dev.on_timer(now);
    run_pending();
  }
  EXPECT_EQ(counter(*b, "rnr_naks_sent"), 1u);
  EXPECT_LE(now - began, 1'000 * kMs);
  EXPECT_GT(now - began, 900 * kMs);
  EXPECT_TRUE(b->qp->resp.held.empty());
}

// A program asleep (usleep before it posts, as lab 8's keeps its last receive back) chose to
// wait: its window ends in an RNR NAK, however little it did meanwhile.
TEST_F(ReceiveWait, AProgramAsleepIsRnrNakedAtTheEndOfItsWindow) {
  start();
  second_send_finds_no_receive();
  const uint64_t due = b->qp->resp.held_until;
  while (now < due) {
    now += kMs;
    b->dev.on_timer(now);
    run_pending();
  }
  EXPECT_EQ(counter(*b, "rnr_naks_sent"), 1u);
  EXPECT_TRUE(b->qp->resp.held.empty());
}

// A requester that does not read the notices resends the waiting SEND when its own timer fires:
// the wait ends then in an RNR NAK, so that requester spends its RNR budget, not retry_cnt.
TEST_F(ReceiveWait, ARequesterThatResendsTheWaitingSendEndsTheWaitInAnRnrNak) {
  start();
  post_recv(*b, 20, 4096, 64);
  const uint32_t psn0 = b->qp->resp.epsn;
  const std::vector<uint8_t> payload(8, 0x5a);
  proto::PacketHeaders h{};
  h.bth.opcode = proto::kRcSendOnly;
  h.bth.pkey = 0xffff;
  h.bth.dest_qp = b->qp->qpn;
  h.bth.psn = psn0;
  inject(*a, *b, h, payload);  // lands: a CQE unpolled
  h.bth.psn = (psn0 + 1) & proto::kPsnMask;
  inject(*a, *b, h, payload);  // waits
  ASSERT_EQ(counter(*b, "receive_waits"), 1u);
  ASSERT_EQ(counter(*b, "rnr_naks_sent"), 0u);
  inject(*a, *b, h, payload);  // the same PSN again
  EXPECT_EQ(counter(*b, "rnr_naks_sent"), 1u);
  EXPECT_TRUE(b->qp->resp.held.empty());
  EXPECT_EQ(b->qp->resp.epsn, (psn0 + 1) & proto::kPsnMask);
  EXPECT_EQ(poll(*b).size(), 1u);
}

// A peer that keeps sending behind a waiting SEND cannot make the NIC keep more than a bounded
// number of its packets: past 1,024 the wait ends in an RNR NAK and the rest are dropped as out
// of sequence (IBA 9.7.5.2.8), as without the wait.
TEST_F(ReceiveWait, AFloodBehindAWaitingSendEndsTheWaitInAnRnrNak) {
  start();
  post_recv(*b, 20, 4096, 64);
  const uint32_t psn0 = b->qp->resp.epsn;
  const std::vector<uint8_t> payload(8, 0x5a);
  auto send_only = [&](uint32_t psn) {
    proto::PacketHeaders h{};
    h.bth.opcode = proto::kRcSendOnly;
    h.bth.pkey = 0xffff;
    h.bth.dest_qp = b->qp->qpn;
    h.bth.psn = psn & proto::kPsnMask;
    return h;
  };
  inject(*a, *b, send_only(psn0), payload);      // lands: a CQE unpolled
  inject(*a, *b, send_only(psn0 + 1), payload);  // waits
  ASSERT_EQ(counter(*b, "receive_waits"), 1u);
  size_t most_kept = 0;
  for (uint32_t i = 2; i < 1200; ++i) {
    inject(*a, *b, send_only(psn0 + i), payload);
    most_kept = std::max(most_kept, b->qp->resp.held.size());
  }
  EXPECT_EQ(most_kept, 1024u);
  EXPECT_TRUE(b->qp->resp.held.empty());
  EXPECT_EQ(b->dev.next_deadline(), 0u);
  EXPECT_EQ(awaited(), 0u);
  EXPECT_EQ(counter(*b, "rnr_naks_sent"), 1u);
  EXPECT_EQ(b->qp->resp.epsn, (psn0 + 1) & proto::kPsnMask);  // the RNR NAKed SEND is next
  EXPECT_GE(counter(*b, "rx_drop_out_of_sequence"), 1198u - 1u);
  EXPECT_EQ(poll(*b).size(), 1u);
}

}  // namespace
}  // namespace simnic::testing
