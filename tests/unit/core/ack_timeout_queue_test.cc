// Issue 26 point 1: an ACK timeout counts lost packets, not a busy host. Between simnicds the
// wire is the peer NIC's socket, a FIFO the peer reads as fast as its host lets it run; a
// packet queued behind others waits for the peer to read them all, which on a busy host takes
// longer than the Local ACK Timeout with nothing lost (completer_timers.cc, "A queue is not a
// loss"). Two RC QP pairs from A to B share that queue; B reads it slowly, one packet per 40 ms
// against a 67 ms timeout (timeout 14).
#include "qp_pair.h"

namespace simnic::testing {
namespace {

class AckTimeoutQueue : public QpPair {
 protected:
  static constexpr uint32_t kMsg = 1024;  // one packet (MTU 1024)

  void start_two_pairs(uint8_t retry = 7) {
    make_hosts();
    LinkOptions l;
    l.retry = retry;
    connect_both(l);
    qa.push_back(a->qp);
    qb.push_back(b->qp);
    for (Host* h : {a.get(), b.get()}) {
      ibv_qp_init_attr init{};
      init.qp_type = IBV_QPT_RC;
      init.cap.max_send_wr = 16;
      init.cap.max_recv_wr = 16;
      init.cap.max_send_sge = 1;
      init.cap.max_recv_sge = 1;
      ASSERT_EQ(h->dev.queue_verbs().create_qp(h->ctx, init, h->pd, h->cq->handle, h->cq->handle, 0, &h->qp), 0);
    }
    connect_both(l);
    qa.push_back(a->qp);
    qb.push_back(b->qp);
  }
  // `n` one-packet WRITEs on pair i, at offsets i*64 KiB + k*kMsg of both memories.
  void post_writes(int i, int n) {
    a->qp = qa[size_t(i)];
    std::vector<abi::SendWqe> ws;
    for (int k = 0; k < n; ++k) {
      const size_t off = size_t(i) * 65536 + size_t(k) * kMsg;
      fill(*a, off, kMsg, uint8_t(i * 31 + k + 1));
      ws.push_back(rdma(*a, *b, IBV_WR_RDMA_WRITE, uint64_t(i) << 8 | uint64_t(k), off, kMsg, off));
    }
    post_sends(*a, ws);
  }
  // B reads the oldest packet A sent; its ACK comes back at once.
  void peer_reads_one() {
    auto from_a =
        std::find_if(fabric.queue.begin(), fabric.queue.end(), [](const WirePacket& p) { return p.src_ip == kIpA; });
    ASSERT_NE(from_a, fabric.queue.end());
    WirePacket p = std::move(*from_a);
    fabric.queue.erase(from_a);
    b->dev.on_packet(p.src_ip, 4791, p.bytes, now);
    run_pending();
    acks_come_back();
  }
  void acks_come_back() {
    for (auto it = fabric.queue.begin(); it != fabric.queue.end();) {
      if (it->src_ip != kIpB) {
        ++it;
        continue;
      }
      WirePacket p = std::move(*it);
      it = fabric.queue.erase(it);
      a->dev.on_packet(p.src_ip, 4791, p.bytes, now);
      run_pending();
    }
  }
  void tick(uint64_t ns) {
    now += ns;
    a->dev.on_timer(now);
    b->dev.on_timer(now);
    run_pending();
  }
  // B reads every packet that reaches it and drops it (no such QP, a QP in error), for `ms`.
  void peer_reads_and_drops_for(int ms) {
    for (int t = 0; t < ms; t += 20) {
      fabric.queue.clear();
      tick(20 * kMs);
    }
  }
  // The one WRITE posted on pair 0 completed with `status`; a successful one landed in B.
  void expect_one_completion(ibv_wc_status status) {
    auto wcs = poll(*a);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, status);
    if (status == IBV_WC_SUCCESS) {
      EXPECT_TRUE(same(*a, 0, *b, 0, kMsg));
    }
  }
  // B reads every packet A sent; its answers wait on the fabric, unread by A.
  void peer_reads_all() {
    while (packets_from_a()) {
      auto from_a =
          std::find_if(fabric.queue.begin(), fabric.queue.end(), [](const WirePacket& p) { return p.src_ip == kIpA; });
      WirePacket p = std::move(*from_a);
      fabric.queue.erase(from_a);
      b->dev.on_packet(p.src_ip, 4791, p.bytes, now);
    }
    run_pending();
  }
  // A reads B's answer to pair i (`keep` false: it is lost instead).
  void answer_to_pair(int i, bool keep = true) {
    auto it = std::find_if(fabric.queue.begin(), fabric.queue.end(), [&](const WirePacket& p) {
      return p.src_ip == kIpB && proto::decode_bth(p.bytes.data()).dest_qp == qa[size_t(i)]->qpn;
    });
    ASSERT_NE(it, fabric.queue.end());
    WirePacket p = std::move(*it);
    fabric.queue.erase(it);
    if (keep) a->dev.on_packet(p.src_ip, 4791, p.bytes, now);
    run_pending();
  }
  // A polls exactly `n` completions, all successful.
  void expect_successes(size_t n) {
    auto wcs = poll(*a);
    ASSERT_EQ(wcs.size(), n);
    for (const ibv_wc& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc.wr_id;
  }
  size_t packets_from_a() const {
    return size_t(
        std::count_if(fabric.queue.begin(), fabric.queue.end(), [](const WirePacket& p) { return p.src_ip == kIpA; }));
  }
  std::vector<core::Qp*> qa, qb;
};

// Send: four WRITEs on pair 0, then one on pair 1, all queued towards B at once. B reads one
// packet per 40 ms, so pair 1's packet waits 200 ms behind pair 0's, three ACK timeouts.
// Expect: no timeout counted, nothing resent, every WRITE completes and lands; the timer was
// put off while B was seen reading the queue ahead (timeouts_deferred).
TEST_F(AckTimeoutQueue, APacketWaitingBehindOthersInThePeersQueueIsNotLost) {
  start_two_pairs();
  post_writes(0, 4);
  post_writes(1, 1);
  ASSERT_EQ(packets_from_a(), 5u);
  for (int i = 0; i < 5; ++i) {
    tick(40 * kMs);
    ASSERT_NO_FATAL_FAILURE(peer_reads_one());
  }
  tick(40 * kMs);
  EXPECT_EQ(a->dev.counters().timeouts, 0u);
  EXPECT_EQ(a->dev.counters().retransmits, 0u);
  EXPECT_GE(a->dev.counters().timeouts_deferred, 1u);
  ASSERT_NO_FATAL_FAILURE(expect_successes(5));
  for (int k = 0; k < 4; ++k) EXPECT_TRUE(same(*a, size_t(k) * kMsg, *b, size_t(k) * kMsg, kMsg)) << k;
  EXPECT_TRUE(same(*a, 65536, *b, 65536, kMsg));
  EXPECT_EQ(a->dev.congestion().in_flight(kIpB), 0u);
}

// Send: one WRITE on pair 0, lost; then one on pair 1, which B reads and ACKs at once.
// Expect: B answered a packet sent after the lost one. At the first expiry (67 ms) B might
// still be working on pair 0's (a SEND waiting for a receive, a READ's responses): one grace;
// the second expiry (134 ms) counts the loss: one timeout, one retry, the resend completes.
TEST_F(AckTimeoutQueue, ALossIsStillSeenAtTheTimeoutWhenThePeerAnswersLaterPackets) {
  start_two_pairs();
  post_writes(0, 1);
  ASSERT_EQ(packets_from_a(), 1u);
  fabric.queue.clear();  // lost
  post_writes(1, 1);
  ASSERT_NO_FATAL_FAILURE(peer_reads_one());
  tick(60 * kMs);
  EXPECT_EQ(a->dev.counters().timeouts, 0u);
  tick(8 * kMs);  // past 4.096 us * 2^14 = 67.1 ms
  EXPECT_EQ(a->dev.counters().timeouts, 0u);
  EXPECT_EQ(a->dev.counters().timeouts_deferred, 1u);
  tick(60 * kMs);
  EXPECT_EQ(a->dev.counters().timeouts, 0u);
  tick(8 * kMs);
  EXPECT_EQ(a->dev.counters().timeouts, 1u);
  EXPECT_EQ(a->dev.counters().timeouts_deferred, 1u);
  EXPECT_EQ(a->dev.counters().retransmits, 1u);
  EXPECT_EQ(qa[0]->comp.retry_left, 6u);
  ASSERT_NO_FATAL_FAILURE(peer_reads_one());
  ASSERT_NO_FATAL_FAILURE(expect_successes(2));
  EXPECT_TRUE(same(*a, 0, *b, 0, kMsg));
}

// Send: WRITEs on both pairs; B never reads anything (gone, or everything lost).
// Expect: B answered nothing, so both timers spend their retries as IBA 9.7.5.1 says:
// retry_cnt = 2 means three timeouts each, then RETRY_EXC_ERR.
TEST_F(AckTimeoutQueue, ASilentPeerStillRunsTheRetriesOut) {
  start_two_pairs(2);
  post_writes(0, 1);
  post_writes(1, 1);
  for (int i = 0; i < 10; ++i) {
    fabric.queue.clear();
    tick(70 * kMs);
  }
  EXPECT_EQ(a->dev.counters().timeouts, 6u);
  EXPECT_EQ(a->dev.counters().timeouts_deferred, 0u);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 2u);
  for (const ibv_wc& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR) << wc.wr_id;
}

// --- A peer NIC on this host: its socket says whether a packet could have been lost ---

// Send: one WRITE on each pair towards B, a NIC on this host (the fabric lists B's socket: its
// queue, no drop). B reads nothing for 300 ms (not scheduled: a busy host, a stalled VM), about
// four timeouts, then reads everything. This is the case the answered-packets rule cannot see:
// B answered nothing meanwhile, so without the socket it counted as a loss.
// Expect: no timeout, nothing resent, both WRITEs complete and land.
TEST_F(AckTimeoutQueue, APacketWaitingInALocalPeersSocketIsNotLostWhileThePeerIsSilent) {
  start_two_pairs();
  fabric.local_peers = true;
  post_writes(0, 1);
  post_writes(1, 1);
  for (int i = 0; i < 30; ++i) tick(10 * kMs);
  EXPECT_EQ(a->dev.counters().timeouts, 0u);
  EXPECT_EQ(a->dev.counters().retransmits, 0u);
  EXPECT_GE(a->dev.counters().timeouts_deferred, 2u);
  ASSERT_NO_FATAL_FAILURE(peer_reads_one());
  ASSERT_NO_FATAL_FAILURE(peer_reads_one());
  ASSERT_NO_FATAL_FAILURE(expect_successes(2));
  EXPECT_TRUE(same(*a, 0, *b, 0, kMsg));
  EXPECT_TRUE(same(*a, 65536, *b, 65536, kMsg));
}

// Send: one WRITE towards the local B, dropped by A's fault injector (simnic fault --loss).
// Expect: exactly as without the socket rule: a timeout at 67 ms, one retry spent, the resent
// WRITE completes.
TEST_F(AckTimeoutQueue, AnInjectedLossTowardsALocalPeerStillTimesOutAndRetries) {
  start_two_pairs();
  fabric.local_peers = true;
  int drops = 1;
  fabric.inject_loss = [&](const WirePacket& p) { return p.src_ip == kIpA && drops-- > 0; };
  post_writes(0, 1);
  EXPECT_EQ(packets_from_a(), 0u);
  tick(60 * kMs);
  EXPECT_EQ(a->dev.counters().timeouts, 0u);
  tick(8 * kMs);
  EXPECT_EQ(a->dev.counters().timeouts, 1u);
  EXPECT_EQ(a->dev.counters().timeouts_deferred, 0u);
  EXPECT_EQ(a->dev.counters().retransmits, 1u);
  EXPECT_EQ(qa[0]->comp.retry_left, 6u);
  ASSERT_NO_FATAL_FAILURE(peer_reads_one());
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, 0, kMsg));
}

// Send: one three-packet WRITE towards the local B, whose second packet A's fault injector
// drops; B reads the first and the third, NAKs the gap (PSN sequence error), and A resends
// the second and the third. Then B is not scheduled for 300 ms, four timeouts, retry_cnt 2.
// Expect: the drop was answered by the resend, so it does not make the waits that follow
// count as losses (they did, until the resend's start was remembered: three timeouts and
// RETRY_EXC_ERR on a host that was merely busy); the WRITE completes and lands.
TEST_F(AckTimeoutQueue, ALossAnsweredByAResendIsNotCountedAgainWhileTheResendWaits) {
  start_two_pairs(2);
  fabric.local_peers = true;
  int sent = 0;
  fabric.inject_loss = [&](const WirePacket& p) { return p.src_ip == kIpA && ++sent == 2; };
  a->qp = qa[0];
  fill(*a, 0, 3 * kMsg, 7);
  post_sends(*a, {rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, 3 * kMsg, 0)});
  ASSERT_EQ(packets_from_a(), 2u);
  ASSERT_NO_FATAL_FAILURE(peer_reads_one());
  ASSERT_NO_FATAL_FAILURE(peer_reads_one());  // the gap: B NAKs, A goes back to the second
  ASSERT_EQ(packets_from_a(), 2u);
  EXPECT_EQ(a->dev.counters().timeouts, 0u);
  for (int i = 0; i < 30; ++i) tick(10 * kMs);
  EXPECT_EQ(a->dev.counters().timeouts, 0u);
  EXPECT_GE(a->dev.counters().timeouts_deferred, 1u);
  EXPECT_EQ(qa[0]->comp.retry_left, 1u);  // the NAK's retry only (rxe counts a sequence error NAK)
  ASSERT_NO_FATAL_FAILURE(peer_reads_one());
  ASSERT_NO_FATAL_FAILURE(peer_reads_one());
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, 0, 3 * kMsg));
}

// Send: one WRITE towards the local B; the kernel drops it (B's receive buffer full: its
// socket's drops counter grows). Expect: a timeout and a retry, as for any loss.
TEST_F(AckTimeoutQueue, AKernelDropAtALocalPeersSocketStillTimesOut) {
  start_two_pairs();
  fabric.local_peers = true;
  post_writes(0, 1);
  fabric.queue.clear();
  fabric.socket_drops[kIpB] = 1;
  tick(68 * kMs);
  EXPECT_EQ(a->dev.counters().timeouts, 1u);
  EXPECT_EQ(a->dev.counters().retransmits, 1u);
  ASSERT_NO_FATAL_FAILURE(peer_reads_one());
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
}

// Send: WRITEs towards the local B, which reads them and answers nothing (no such QP, a QP in
// error: it drops them), retry_cnt 2. Expect: each timer waits one more timeout after B read
// the packet, then counts: RETRY_EXC_ERR after three timeouts, as IBA 9.7.5.1 says.
TEST_F(AckTimeoutQueue, ALocalPeerThatReadsAndDropsStillRunsTheRetriesOut) {
  start_two_pairs(2);
  fabric.local_peers = true;
  post_writes(0, 1);
  peer_reads_and_drops_for(800);
  EXPECT_EQ(a->dev.counters().timeouts, 3u);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_RETRY_EXC_ERR);
}

// Send: a WRITE towards the local B, whose NIC read it and was then not given a CPU for 300 ms
// (a NIC preempted between reading a batch and answering it, on a host with several busy loops
// per CPU): its socket is empty, it answered nothing, and its process is runnable (busy).
// Expect: no timeout, nothing resent; when B handles the packet, the WRITE completes and lands.
TEST_F(AckTimeoutQueue, ALocalPeerThatReadItAndWaitsForACpuIsNotCountedAsALoss) {
  start_two_pairs();
  fabric.local_peers = true;
  fabric.busy_peers.insert(kIpB);
  post_writes(0, 1);
  ASSERT_EQ(packets_from_a(), 1u);
  WirePacket held = std::move(fabric.queue.front());  // read by B, not handled yet
  fabric.queue.pop_front();
  for (int i = 0; i < 30; ++i) tick(10 * kMs);
  EXPECT_EQ(a->dev.counters().timeouts, 0u);
  EXPECT_EQ(a->dev.counters().retransmits, 0u);
  EXPECT_GE(a->dev.counters().timeouts_deferred, 2u);
  b->dev.on_packet(held.src_ip, 4791, held.bytes, now);
  run_pending();
  acks_come_back();
  expect_one_completion(IBV_WC_SUCCESS);
}

// Send: WRITEs towards the local B, which reads them and drops them while its NIC stays busy
// (it serves other traffic), retry_cnt 2. Expect: each wait is bounded as a stalled queue is
// (3 s), then counts: no timeout within 2 s, RETRY_EXC_ERR after three.
TEST_F(AckTimeoutQueue, ABusyLocalPeerThatReadsAndDropsStillRunsTheRetriesOut) {
  start_two_pairs(2);
  fabric.local_peers = true;
  fabric.busy_peers.insert(kIpB);
  post_writes(0, 1);
  peer_reads_and_drops_for(2000);
  EXPECT_EQ(a->dev.counters().timeouts, 0u);
  peer_reads_and_drops_for(10000);
  EXPECT_EQ(a->dev.counters().timeouts, 3u);
  expect_one_completion(IBV_WC_RETRY_EXC_ERR);
}

// Send: a WRITE towards the local B, whose NIC is gone (no socket). Expect: a timeout at once,
// each time: RETRY_EXC_ERR after three (retry_cnt 2), nothing deferred.
TEST_F(AckTimeoutQueue, ALocalPeerWhoseSocketIsGoneTimesOutAtOnce) {
  start_two_pairs(2);
  fabric.local_peers = true;
  fabric.gone.insert(kIpB);
  post_writes(0, 1);
  for (int i = 0; i < 4; ++i) tick(70 * kMs);
  EXPECT_EQ(a->dev.counters().timeouts, 3u);
  EXPECT_EQ(a->dev.counters().timeouts_deferred, 0u);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_RETRY_EXC_ERR);
}

// Send: a WRITE towards the local B, which never reads its queue (a NIC stopped with SIGSTOP).
// Expect: deferred while the queue may still move, then, with nothing read for 3 s, counted as
// a dead link: RETRY_EXC_ERR (retry_cnt 2) within 4 s.
TEST_F(AckTimeoutQueue, ALocalPeerThatStopsReadingStillTimesOutAfterItsQueueStalls) {
  start_two_pairs(2);
  fabric.local_peers = true;
  post_writes(0, 1);
  for (int i = 0; i < 40; ++i) tick(70 * kMs);
  EXPECT_EQ(a->dev.counters().timeouts, 0u);
  for (int i = 0; i < 20; ++i) tick(70 * kMs);
  EXPECT_EQ(a->dev.counters().timeouts, 3u);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_RETRY_EXC_ERR);
}

// Send: one WRITE towards the local B, which reads it only after a timeout (A looks at B's
// socket and puts the timer off), and answers. Then nothing is sent for 5 s: the NICs of
// `simnic bench` between two runs, while the next program starts its QPs. Then two WRITEs, on
// both pairs, which B reads only after 100 ms.
// Expect: no timeout. B's queue did not move for 5 s because it held nothing of A's, so those
// seconds are not a stall: the stall clock starts when A sends into an empty queue (it used to
// start at B's last answer, and `bench --load all`'s 1,000-QP row counted "the peer NIC has
// read nothing for 3 s" once its first timers fired).
TEST_F(AckTimeoutQueue, APeerThatHadNothingToReadForSecondsIsNotStalled) {
  start_two_pairs();
  fabric.local_peers = true;
  post_writes(0, 1);
  tick(70 * kMs);
  EXPECT_EQ(a->dev.counters().timeouts_deferred, 1u);
  ASSERT_NO_FATAL_FAILURE(peer_reads_one());
  ASSERT_EQ(poll(*a).size(), 1u);
  for (int i = 0; i < 50; ++i) tick(100 * kMs);
  post_writes(0, 1);
  post_writes(1, 1);
  tick(70 * kMs);
  tick(30 * kMs);
  EXPECT_EQ(a->dev.counters().timeouts, 0u);
  EXPECT_EQ(a->dev.counters().retransmits, 0u);
  ASSERT_NO_FATAL_FAILURE(peer_reads_one());
  ASSERT_NO_FATAL_FAILURE(peer_reads_one());
  ASSERT_NO_FATAL_FAILURE(expect_successes(2));
  EXPECT_TRUE(same(*a, 65536, *b, 65536, kMsg));
}

// Send: one WRITE on pair 0, then one on pair 1; B reads both and answers. A reads only pair
// 1's ACK before the timeout (67 ms): pair 0's waits in A's own socket, as when A was not
// scheduled and read one bounded batch, and B sent its coalesced ACKs in QPN order.
// Expect: B answered a packet sent after pair 0's, but A's socket still holds unread answers,
// so the timer is put off once, not counted; pair 0's ACK is then read and both WRITEs land.
TEST_F(AckTimeoutQueue, AnAnswerStillUnreadInThisNicsSocketIsNotALoss) {
  start_two_pairs();
  post_writes(0, 1);
  post_writes(1, 1);
  ASSERT_NO_FATAL_FAILURE(peer_reads_all());
  ASSERT_NO_FATAL_FAILURE(answer_to_pair(1));
  tick(70 * kMs);
  EXPECT_EQ(a->dev.counters().timeouts, 0u);
  EXPECT_EQ(a->dev.counters().timeouts_deferred, 1u);
  ASSERT_NO_FATAL_FAILURE(answer_to_pair(0));
  tick(70 * kMs);
  EXPECT_EQ(a->dev.counters().timeouts, 0u);
  EXPECT_EQ(a->dev.counters().retransmits, 0u);
  ASSERT_NO_FATAL_FAILURE(expect_successes(2));
  EXPECT_TRUE(same(*a, 0, *b, 0, kMsg));
  EXPECT_TRUE(same(*a, 65536, *b, 65536, kMsg));
}

// Send: as above, but pair 0's ACK is lost, and a later WRITE on pair 1 keeps an unread answer
// in A's socket at every expiry (a socket kept busy by other traffic).
// Expect: the first expiry is case 1's one grace; then the unread socket keeps the verdict off,
// but for 3 s at most: one timeout for pair 0 by 3.2 s, one retry, and the resent WRITE lands.
TEST_F(AckTimeoutQueue, ASocketKeptBusyDelaysALostAckForThreeSecondsAtMost) {
  start_two_pairs();
  post_writes(0, 1);
  post_writes(1, 1);
  ASSERT_NO_FATAL_FAILURE(peer_reads_all());
  ASSERT_NO_FATAL_FAILURE(answer_to_pair(1));
  ASSERT_NO_FATAL_FAILURE(answer_to_pair(0, false));
  post_writes(1, 1);
  ASSERT_NO_FATAL_FAILURE(peer_reads_all());    // its ACK stays unread
  for (int i = 0; i < 40; ++i) tick(70 * kMs);  // 2.8 s
  EXPECT_EQ(qa[0]->counters.timeouts, 0u);
  for (int i = 0; i < 10; ++i) tick(70 * kMs);  // 3.5 s
  EXPECT_EQ(qa[0]->counters.timeouts, 1u);      // (pair 1's unread ACK, never read, counts too)
  EXPECT_EQ(qa[0]->counters.retransmits, 1u);
  ASSERT_NO_FATAL_FAILURE(peer_reads_all());
  acks_come_back();
  ASSERT_NO_FATAL_FAILURE(expect_successes(3));
  EXPECT_TRUE(same(*a, 0, *b, 0, kMsg));
}

}  // namespace
}  // namespace simnic::testing
