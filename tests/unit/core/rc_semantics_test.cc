// RC work-request semantics beyond "the bytes arrive": fences, solicited events and CQ arming,
// unsignaled completions, and the SQD drain. Two Devices on the in-memory fabric; the test
// moves packets one at a time where the order matters and checks the wire, memory and CQs.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include "qp_pair.h"

namespace simnic::testing {
namespace {

class RcSemantics : public QpPair {};

// --- IBV_SEND_FENCE: a fenced WR waits until prior READs and atomics have completed ---

TEST_F(RcSemantics, FencedSendIsNotStartedBeforeAnEarlierReadCompletes) {
  start();
  fill(*b, 0, 4096, 5);
  fill(*a, 8192, 64, 9);
  fill(*a, 12288, 100, 11);
  post_recv(*b, 70, 65536, 4096);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_READ, 1, 0, 4096, 0));        // 4 responses
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 2, 8192, 64, 32768));  // not fenced
  post_send(*a, wqe(*a, IBV_WR_SEND, 3, 12288, 100, IBV_SEND_SIGNALED | IBV_SEND_FENCE));
  // The READ request and the unfenced WRITE go at once; the fenced SEND is held.
  EXPECT_EQ(queued_opcodes(kIpA), (std::vector<uint8_t>{proto::kRcReadRequest, proto::kRcWriteOnly}));

  deliver_one();  // READ request -> B answers with 4 response packets
  deliver_one();  // WRITE -> B ACKs it
  EXPECT_EQ(queued_opcodes(kIpB),
            (std::vector<uint8_t>{proto::kRcReadResponseFirst, proto::kRcReadResponseMiddle,
                                  proto::kRcReadResponseMiddle, proto::kRcReadResponseLast, proto::kRcAcknowledge}));
  for (int i = 0; i < 3; ++i) {
    deliver_one();
    EXPECT_FALSE(queued(kIpA, proto::kRcSendOnly))
        << "the fenced SEND left before the READ finished (response " << i << ")";
  }
  EXPECT_TRUE(poll(*a).empty());
  deliver_one();  // the last READ response: the READ completes, the fence lifts
  EXPECT_TRUE(queued(kIpA, proto::kRcSendOnly));
  fabric.deliver_all(now);

  auto wcs = poll(*a);
  ASSERT_EQ(wr_ids(wcs), (std::vector<uint64_t>{1, 2, 3}));
  for (auto& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wcs[0].byte_len, 4096u);
  EXPECT_TRUE(same(*a, 0, *b, 0, 4096));
  EXPECT_TRUE(same(*a, 8192, *b, 32768, 64));
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].wr_id, 70u);
  EXPECT_EQ(rwc[0].byte_len, 100u);
  EXPECT_TRUE(same(*a, 12288, *b, 65536, 100));
}

TEST_F(RcSemantics, FencedWriteWaitsForAnAtomicAndSeesItsResult) {
  start();
  uint64_t counter = 40;
  std::memcpy(mem.ptr(kPidB, 4096), &counter, 8);
  abi::SendWqe add = rdma(*a, *b, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 0, 8, 4096);
  add.compare_add = 2;
  post_send(*a, add);
  // The fenced WRITE overwrites the counter; only after the add may it run, or the add is lost.
  uint64_t fresh = 1000;
  std::memcpy(mem.ptr(kPidA, 64), &fresh, 8);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 2, 64, 8, 4096, IBV_SEND_SIGNALED | IBV_SEND_FENCE));
  EXPECT_EQ(queued_opcodes(kIpA), (std::vector<uint8_t>{proto::kRcFetchAdd}));
  deliver_one();  // FETCH_ADD -> B applies it and answers
  EXPECT_EQ(queued_opcodes(kIpA), std::vector<uint8_t>{});
  deliver_one();  // ATOMIC ACK -> the fence lifts
  EXPECT_EQ(queued_opcodes(kIpA), (std::vector<uint8_t>{proto::kRcWriteOnly}));
  fabric.deliver_all(now);

  auto wcs = poll(*a);
  ASSERT_EQ(wr_ids(wcs), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[1].status, IBV_WC_SUCCESS);
  uint64_t orig = 0, final_value = 0;
  std::memcpy(&orig, mem.ptr(kPidA, 0), 8);
  std::memcpy(&final_value, mem.ptr(kPidB, 4096), 8);
  EXPECT_EQ(orig, 40u);
  EXPECT_EQ(final_value, 1000u);
}

TEST_F(RcSemantics, FenceDoesNotWaitForEarlierWritesOrSends) {
  start();
  post_recv(*b, 70, 65536, 4096);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, 3000, 0));
  post_send(*a, wqe(*a, IBV_WR_SEND, 2, 0, 10, IBV_SEND_SIGNALED | IBV_SEND_FENCE));
  // Nothing unacknowledged is a READ or atomic, so the fenced SEND follows at once.
  EXPECT_EQ(queued_opcodes(kIpA), (std::vector<uint8_t>{proto::kRcWriteFirst, proto::kRcWriteMiddle,
                                                        proto::kRcWriteLast, proto::kRcSendOnly}));
  fabric.deliver_all(now);
  EXPECT_EQ(wr_ids(poll(*a)), (std::vector<uint64_t>{1, 2}));
}

TEST_F(RcSemantics, FenceHoldsWhileALostReadResponseIsRequestedAgain) {
  start();
  fill(*b, 0, 1000, 3);
  post_recv(*b, 70, 65536, 4096);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_READ, 1, 0, 1000, 0));
  post_send(*a, wqe(*a, IBV_WR_SEND, 2, 8192, 10, IBV_SEND_SIGNALED | IBV_SEND_FENCE));
  deliver_one();  // READ request
  ASSERT_EQ(queued_opcodes(kIpB), (std::vector<uint8_t>{proto::kRcReadResponseOnly}));
  fabric.queue.pop_front();  // the response is lost
  now += 100 * kMs;          // past the ACK timeout (4.096 us * 2^14)
  a->dev.on_timer(now);
  EXPECT_EQ(queued_opcodes(kIpA), (std::vector<uint8_t>{proto::kRcReadRequest}))
      << "the READ is asked again and the fenced SEND still waits";
  fabric.deliver_all(now);
  auto wcs = poll(*a);
  ASSERT_EQ(wr_ids(wcs), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(wcs[1].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, 0, 1000));
}

// --- IBV_SEND_SOLICITED (the BTH SE bit) and CQ arming (ibv_req_notify_cq) ---

TEST_F(RcSemantics, SolicitedBitIsOnTheLastPacketOfSendsAndWriteWithImmOnly) {
  start();
  for (int i = 0; i < 4; ++i) post_recv(*b, 70 + i, 65536 + i * 8192, 8192);
  const uint32_t se = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 3000, se));             // FIRST MIDDLE LAST
  abi::SendWqe imm = wqe(*a, IBV_WR_SEND_WITH_IMM, 2, 0, 10, se);  // ONLY_WITH_IMM
  imm.imm_data = htonl(0x1234);
  post_send(*a, imm);
  abi::SendWqe wimm = rdma(*a, *b, IBV_WR_RDMA_WRITE_WITH_IMM, 3, 0, 2000, 0, se);  // FIRST LAST_WITH_IMM
  wimm.imm_data = htonl(0x5678);
  post_send(*a, wimm);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 4, 0, 10, 4096, se));  // SE means nothing here
  post_send(*a, wqe(*a, IBV_WR_SEND, 5, 0, 10));                       // not solicited

  struct Seen {
    uint8_t opcode;
    bool se;
  };
  std::vector<Seen> seen;
  for (const WirePacket& p : fabric.queue) {
    auto pkt = parse(p);
    seen.push_back({pkt.h.bth.opcode, pkt.h.bth.solicited});
  }
  const std::vector<std::pair<uint8_t, bool>> expected = {
      {proto::kRcSendFirst, false},  {proto::kRcSendMiddle, false}, {proto::kRcSendLast, true},
      {proto::kRcSendOnlyImm, true}, {proto::kRcWriteFirst, false}, {proto::kRcWriteLastImm, true},
      {proto::kRcWriteOnly, false},  {proto::kRcSendOnly, false},
  };
  ASSERT_EQ(seen.size(), expected.size());
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].opcode, expected[i].first) << "packet " << i;
    EXPECT_EQ(seen[i].se, expected[i].second) << "packet " << i << " opcode " << int(seen[i].opcode);
  }
  fabric.deliver_all(now);
  EXPECT_EQ(poll(*a).size(), 5u);
  EXPECT_EQ(poll(*b).size(), 4u);  // three SENDs and the WRITE with immediate
}

TEST_F(RcSemantics, SolicitedOnlyArmWakesForSolicitedCompletionsOnly) {
  start();
  for (int i = 0; i < 8; ++i) post_recv(*b, 70 + i, 65536 + i * 4096, 4096);
  auto& events = b->notifier.events;
  const std::pair<int, uint32_t> b_event{b->channel_fd(), b->cq->handle};

  b->arm(/*solicited_only=*/true);
  a->arm(/*solicited_only=*/true);
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 10));
  fabric.deliver_all(now);
  ASSERT_EQ(poll(*b).size(), 1u);
  EXPECT_TRUE(events.empty()) << "an unsolicited receive woke a solicited-only CQ";
  EXPECT_EQ(b->cq->shm->arm.load(), abi::kCqArmSolicited) << "the arm stays until something fires it";
  ASSERT_EQ(poll(*a).size(), 1u);
  EXPECT_TRUE(a->notifier.events.empty()) << "a successful send completion is never solicited";

  post_send(*a, wqe(*a, IBV_WR_SEND, 2, 0, 10, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED));
  fabric.deliver_all(now);
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 71u);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0], b_event);
  EXPECT_EQ(b->cq->shm->arm.load(), abi::kCqDisarmed) << "one event per ibv_req_notify_cq";

  // Not re-armed: a second solicited completion makes no event.
  post_send(*a, wqe(*a, IBV_WR_SEND, 3, 0, 10, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED));
  fabric.deliver_all(now);
  EXPECT_EQ(poll(*b).size(), 1u);
  EXPECT_EQ(events.size(), 1u);

  // A solicited WRITE with immediate wakes it too.
  b->arm(true);
  abi::SendWqe wimm = rdma(*a, *b, IBV_WR_RDMA_WRITE_WITH_IMM, 4, 0, 10, 0, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED);
  post_send(*a, wimm);
  fabric.deliver_all(now);
  wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(events.size(), 2u);

  // Armed for any completion (solicited_only = 0): an unsolicited one fires it.
  b->arm(false);
  post_send(*a, wqe(*a, IBV_WR_SEND, 5, 0, 10));
  fabric.deliver_all(now);
  EXPECT_EQ(poll(*b).size(), 1u);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2], b_event);
  poll(*a);
}

TEST_F(RcSemantics, SolicitedOnlyArmWakesForErrorCompletions) {
  start();
  post_recv(*b, 70, 65536, 16);  // too small for what A sends
  b->arm(true);
  a->arm(true);
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 100));  // unsolicited, but it will fail
  fabric.deliver_all(now);
  auto rwc = poll(*b);
  ASSERT_GE(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].status, IBV_WC_LOC_LEN_ERR);
  ASSERT_EQ(b->notifier.events.size(), 1u) << "an error completion must wake a solicited-only CQ";
  auto swc = poll(*a);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, IBV_WC_REM_INV_REQ_ERR);
  EXPECT_EQ(a->notifier.events.size(), 1u);
}

// --- Unsignaled WRs with sq_sig_all = 0: successes are silent, errors never are ---

TEST_F(RcSemantics, UnsignaledSuccessesMakeNoCqeButTheirSlotsAreFreed) {
  start({.sq_sig_all = false, .max_send_wr = 4});
  ASSERT_EQ(a->qp->sq_entries, 4u);
  // Three rounds through a four-slot SQ: three unsignaled WRITEs and one signaled each.
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 4; ++i) {
      const uint64_t id = round * 4 + i;
      fill(*a, id * 256, 256, uint8_t(id));
      const uint32_t flags = i == 3 ? IBV_SEND_SIGNALED : 0;
      post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, id, id * 256, 256, 100000 + id * 256, flags));
    }
    fabric.deliver_all(now);
    auto wcs = poll(*a);
    ASSERT_EQ(wcs.size(), 1u) << "round " << round;
    EXPECT_EQ(wcs[0].wr_id, uint64_t(round * 4 + 3));
    EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
    // Every slot is free again: the shim may post four more.
    EXPECT_EQ(a->qp->shm->sq.consumer.value.load(), uint32_t(round * 4 + 4));
  }
  EXPECT_TRUE(same(*a, 0, *b, 100000, 12 * 256));
}

TEST_F(RcSemantics, SqSigAllSignalsEveryWr) {
  start({.sq_sig_all = true});
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, 10, 0, 0));
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 2, 0, 10, 0, 0));
  fabric.deliver_all(now);
  EXPECT_EQ(wr_ids(poll(*a)), (std::vector<uint64_t>{1, 2}));
}

TEST_F(RcSemantics, UnsignaledWrThatFailsRemotelyStillCompletesWithItsError) {
  start();
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, 10, 0, 0));  // fine, unsignaled
  abi::SendWqe bad = rdma(*a, *b, IBV_WR_RDMA_WRITE, 2, 0, 10, 0, 0);
  bad.rkey ^= 0x100;  // unknown rkey: the responder NAKs with a remote access error
  post_send(*a, bad);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 3, 0, 10, 0, 0));  // behind the error: flushed
  fabric.deliver_all(now);
  auto wcs = poll(*a);
  ASSERT_EQ(wr_ids(wcs), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(wcs[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(wcs[0].qp_num, a->qp->qpn);
  EXPECT_EQ(wcs[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(a->qp->state, IBV_QPS_ERR);
}

TEST_F(RcSemantics, UnsignaledWrThatFailsLocallyStillCompletesWithItsError) {
  start();
  abi::SendWqe bad = rdma(*a, *b, IBV_WR_RDMA_WRITE, 7, 0, 10, 0, 0);
  bad.sge[0].lkey ^= 0x100;
  post_send(*a, bad);
  fabric.deliver_all(now);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 7u);
  EXPECT_EQ(wcs[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_TRUE(fabric.queue.empty());
}

// --- CQE timestamps: the NIC's clock when it wrote the CQE ---

TEST_F(RcSemantics, EachCqeCarriesTheNicTimeItWasWritten) {
  start();
  post_recv(*b, 70, 65536, 64);
  const uint64_t t_post = now;
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 64));
  now += 7 * kMs;
  deliver_one();  // the SEND reaches B: its receive CQE is written now
  const uint64_t t_recv = now;
  now += 5 * kMs;
  deliver_one();  // the ACK reaches A: the send CQE is written now
  ASSERT_EQ(poll(*b).size(), 1u);
  ASSERT_EQ(poll(*a).size(), 1u);
  EXPECT_EQ(b->cq->timestamps[0], t_recv);
  EXPECT_EQ(a->cq->timestamps[0], t_recv + 5 * kMs);
  EXPECT_GT(a->cq->timestamps[0], t_post);
}

// --- A receive WQE taken by a WRITE with immediate is never lost ---

TEST_F(RcSemantics, WriteWithImmThatFailsAtTheResponderFlushesItsReceiveWqe) {
  start();
  post_recv(*b, 70, 65536, 64);
  post_recv(*b, 71, 65536, 64);
  mem.poisoned = mem.addr(b->pid, 32768 + 10);  // the target page vanished after registration
  abi::SendWqe w = rdma(*a, *b, IBV_WR_RDMA_WRITE_WITH_IMM, 1, 0, 100, 32768);
  post_send(*a, w);
  fabric.deliver_all(now);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_REM_OP_ERR);
  EXPECT_EQ(b->qp->state, IBV_QPS_ERR);
  wcs = poll(*b);
  ASSERT_EQ(wr_ids(wcs), (std::vector<uint64_t>{70, 71})) << "both receive WQEs complete, in order";
  for (auto& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
}

// --- SQD: drain, IBV_EVENT_SQ_DRAINED, sq_draining, resume (rxe's QP_STATE_DRAIN) ---

TEST_F(RcSemantics, SqdFinishesTheStartedWrHoldsTheRestAndReportsTheDrain) {
  start();
  a->dev.set_burst(1);  // one packet per turn, so the SEND is half out when SQD comes
  fill(*a, 0, 3000, 21);
  fill(*a, 4096, 100, 22);
  fill(*a, 8192, 50, 23);
  for (int i = 0; i < 2; ++i) post_recv(*b, 70 + i, 65536 + i * 8192, 8192);
  post_sends(*a, {wqe(*a, IBV_WR_SEND, 1, 0, 3000),                        // 3 packets
                  rdma(*a, *b, IBV_WR_RDMA_WRITE, 2, 4096, 100, 32768)});  // not started yet
  ASSERT_EQ(queued_opcodes(kIpA), (std::vector<uint8_t>{proto::kRcSendFirst}));

  ASSERT_EQ(a->modify_state(IBV_QPS_SQD, IBV_QP_EN_SQD_ASYNC_NOTIFY, 1, now), 0);
  ibv_qp_attr at = a->query();
  EXPECT_EQ(at.qp_state, IBV_QPS_SQD);
  EXPECT_EQ(at.sq_draining, 1);
  post_send(*a, wqe(*a, IBV_WR_SEND, 3, 8192, 50));  // posting in SQD is allowed; it is held

  // The SEND that had begun finishes; nothing else goes out.
  fabric.deliver_all(now);
  EXPECT_EQ(fabric.sent, 4) << "SEND FIRST MIDDLE LAST and B's ACK only";
  auto wcs = poll(*a);
  ASSERT_EQ(wr_ids(wcs), (std::vector<uint64_t>{1}));
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].byte_len, 3000u);
  EXPECT_TRUE(same(*a, 0, *b, 65536, 3000));

  ASSERT_EQ(a->notifier.async.size(), 1u);
  EXPECT_EQ(a->notifier.async[0], (std::pair<uint32_t, uint32_t>{IBV_EVENT_SQ_DRAINED, a->qp->handle}));
  at = a->query();
  EXPECT_EQ(at.qp_state, IBV_QPS_SQD);
  EXPECT_EQ(at.sq_draining, 0);
  EXPECT_EQ(a->qp->shm->sq.consumer.value.load(), 1u) << "the held WRs keep their slots";

  // SQD -> RTS: the held WRs go out in order and complete.
  ASSERT_EQ(a->modify_state(IBV_QPS_RTS, 0, 0, now), 0);
  run_pending();
  fabric.deliver_all(now);
  wcs = poll(*a);
  ASSERT_EQ(wr_ids(wcs), (std::vector<uint64_t>{2, 3}));
  for (auto& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 4096, *b, 32768, 100));
  rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].wr_id, 71u);
  EXPECT_TRUE(same(*a, 8192, *b, 65536 + 8192, 50));
  EXPECT_EQ(a->notifier.async.size(), 1u);
}

TEST_F(RcSemantics, WhileDrainingSqdRefusesResumeAndAttributeChangesButNotError) {
  start();
  a->dev.set_burst(1);
  fill(*a, 0, 3000, 21);
  post_recv(*b, 70, 65536, 8192);
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 3000));  // 3 packets, one out
  ASSERT_EQ(a->modify_state(IBV_QPS_SQD, 0, 0, now), 0);
  ASSERT_EQ(a->query().sq_draining, 1);
  EXPECT_EQ(a->modify_state(IBV_QPS_RTS, 0, 0, now), EINVAL);
  EXPECT_TRUE(a->logger.contains("wait for IBV_EVENT_SQ_DRAINED before SQD->RTS"));
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_SQD;
  at.timeout = 20;
  EXPECT_EQ(a->dev.queue_verbs().modify_qp(a->ctx, a->qp->handle, at, IBV_QP_STATE | IBV_QP_TIMEOUT, now), EINVAL);
  EXPECT_EQ(a->query().timeout, 14);
  EXPECT_EQ(a->query().qp_state, IBV_QPS_SQD);

  fabric.deliver_all(now);  // the drain ends
  ASSERT_EQ(a->query().sq_draining, 0);
  EXPECT_EQ(a->dev.queue_verbs().modify_qp(a->ctx, a->qp->handle, at, IBV_QP_STATE | IBV_QP_TIMEOUT, now), 0);
  EXPECT_EQ(a->query().timeout, 20);
  EXPECT_EQ(a->modify_state(IBV_QPS_RTS, 0, 0, now), 0);

  // Going to ERR is always allowed, drained or not.
  post_send(*a, wqe(*a, IBV_WR_SEND, 2, 0, 3000));
  ASSERT_EQ(a->modify_state(IBV_QPS_SQD, 0, 0, now), 0);
  ASSERT_EQ(a->query().sq_draining, 1);
  EXPECT_EQ(a->modify_state(IBV_QPS_ERR, 0, 0, now), 0);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(RcSemantics, SqdWaitsForAReadResponseAndRetransmitsWhileDraining) {
  start();
  fill(*b, 0, 2048, 31);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_READ, 1, 0, 2048, 0));
  ASSERT_EQ(a->modify_state(IBV_QPS_SQD, IBV_QP_EN_SQD_ASYNC_NOTIFY, 1, now), 0);
  deliver_one();  // READ request -> two response packets
  ASSERT_EQ(queued_opcodes(kIpB), (std::vector<uint8_t>{proto::kRcReadResponseFirst, proto::kRcReadResponseLast}));
  deliver_one();             // the first response lands
  fabric.queue.pop_front();  // the last one is lost
  EXPECT_EQ(a->query().sq_draining, 1);
  EXPECT_TRUE(a->notifier.async.empty());

  now += 100 * kMs;  // the ACK timeout still runs in SQD
  a->dev.on_timer(now);
  EXPECT_EQ(queued_opcodes(kIpA), (std::vector<uint8_t>{proto::kRcReadRequest}));
  fabric.deliver_all(now);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].byte_len, 2048u);
  EXPECT_TRUE(same(*a, 0, *b, 0, 2048));
  EXPECT_EQ(a->query().sq_draining, 0);
  ASSERT_EQ(a->notifier.async.size(), 1u);
  EXPECT_EQ(a->notifier.async[0].first, uint32_t(IBV_EVENT_SQ_DRAINED));
}

TEST_F(RcSemantics, SqdWithNothingInFlightIsDrainedAtOnceAndNotifiesOnlyIfAsked) {
  start();
  ASSERT_EQ(a->modify_state(IBV_QPS_SQD, 0, 0, now), 0);
  EXPECT_EQ(a->query().sq_draining, 0);
  EXPECT_TRUE(a->notifier.async.empty()) << "no IBV_QP_EN_SQD_ASYNC_NOTIFY, no event";
  ASSERT_EQ(a->modify_state(IBV_QPS_RTS, 0, 0, now), 0);

  ASSERT_EQ(b->modify_state(IBV_QPS_SQD, IBV_QP_EN_SQD_ASYNC_NOTIFY, 1, now), 0);
  EXPECT_EQ(b->query().sq_draining, 0);
  ASSERT_EQ(b->notifier.async.size(), 1u);
  EXPECT_EQ(b->notifier.async[0], (std::pair<uint32_t, uint32_t>{IBV_EVENT_SQ_DRAINED, b->qp->handle}));
}

TEST_F(RcSemantics, SqdQpStillAnswersAsAResponder) {
  start();
  fill(*a, 0, 500, 41);
  post_recv(*b, 70, 65536, 4096);
  ASSERT_EQ(b->modify_state(IBV_QPS_SQD, 0, 0, now), 0);  // SQD stops B's send queue only
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 500));
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_READ, 2, 1024, 500, 0));
  fabric.deliver_all(now);
  EXPECT_EQ(wr_ids(poll(*a)), (std::vector<uint64_t>{1, 2}));
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, 65536, 500));
}

TEST_F(RcSemantics, HeldWrsAreFlushedWhenAnSqdQpGoesToError) {
  start();
  ASSERT_EQ(a->modify_state(IBV_QPS_SQD, 0, 0, now), 0);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, 10, 0, 0));
  EXPECT_TRUE(fabric.queue.empty());
  ASSERT_EQ(a->modify_state(IBV_QPS_ERR, 0, 0, now), 0);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(a->query().sq_draining, 0);
}

}  // namespace
}  // namespace simnic::testing
