// Protocol tests in the style of eRPC's tests/protocol_tests: hand-built request packets are
// handed to one NIC (the responder, B) as if they came from its peer (A), and the test checks
// the exact packet B sends back: opcode, AETH syndrome, PSN and MSN. Then the requester side:
// a hand-built NAK handed to A, and what A does (the completion status, the PSN it resends).
#include <gtest/gtest.h>

#include "qp_pair.h"
#include "simnic/proto/packet.h"

namespace simnic::testing {
namespace {

using namespace simnic::proto;

class NakProtocol : public QpPair {
 protected:
  void SetUp() override {
    make_hosts();
    connect_both(LinkOptions{0, 7, 7, IBV_MTU_1024});
  }
  // A request from A's QP to B's, with the headers filled in by `h`.
  PacketHeaders request(uint8_t opcode, uint32_t psn) {
    PacketHeaders h{};
    h.bth.opcode = opcode;
    h.bth.dest_qp = b->qp->qpn;
    h.bth.psn = psn;
    h.bth.ack_req = true;
    return h;
  }
};

TEST_F(NakProtocol, GapIsNakedOnceWithTheExpectedPsn) {
  post_recv(*b, 1, 4096, 4096);
  // Receive: SEND ONLY with PSN 5 while B expects 0.
  inject(*a, *b, request(kRcSendOnly, 5), std::vector<uint8_t>(16, 1));
  // Expect: one ACKNOWLEDGE carrying NAK PSN sequence error (011 00000) for PSN 0, MSN 0.
  auto out = sent_by(*b);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.bth.opcode, kRcAcknowledge);
  EXPECT_EQ(out[0].h.aeth.syndrome, 0x60);
  EXPECT_EQ(out[0].h.bth.psn, 0u);
  EXPECT_EQ(out[0].h.aeth.msn, 0u);
  EXPECT_EQ(out[0].h.bth.dest_qp, a->qp->qpn);
  // Receive: PSN 6, still out of order. Expect: nothing (the NAK is not repeated).
  inject(*a, *b, request(kRcSendOnly, 6), std::vector<uint8_t>(16, 1));
  EXPECT_TRUE(sent_by(*b).empty());
  // Receive: PSN 0 at last. Expect: ACK (000 11111, credits invalid) for PSN 0, MSN 1.
  inject(*a, *b, request(kRcSendOnly, 0), std::vector<uint8_t>(16, 1));
  out = sent_by(*b);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.aeth.syndrome, 0x1f);
  EXPECT_EQ(out[0].h.bth.psn, 0u);
  EXPECT_EQ(out[0].h.aeth.msn, 1u);
  ASSERT_EQ(poll(*b).size(), 1u);
  EXPECT_EQ(b->qp->state, IBV_QPS_RTS);
}

TEST_F(NakProtocol, DuplicateSendIsAckedWithTheLastPsnAndCurrentMsn) {
  post_recv(*b, 1, 4096, 4096);
  inject(*a, *b, request(kRcSendOnly, 0), std::vector<uint8_t>(8, 1));
  ASSERT_EQ(sent_by(*b).size(), 1u);
  // Receive: PSN 0 again. Expect: ACK for PSN 0 (epsn - 1) with MSN 1, and no second receive.
  inject(*a, *b, request(kRcSendOnly, 0), std::vector<uint8_t>(8, 1));
  auto out = sent_by(*b);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.aeth.syndrome, 0x1f);
  EXPECT_EQ(out[0].h.bth.psn, 0u);
  EXPECT_EQ(out[0].h.aeth.msn, 1u);
  EXPECT_EQ(poll(*b).size(), 1u);
  EXPECT_EQ(b->dev.counters().duplicates, 1u);
}

TEST_F(NakProtocol, SendWithoutReceiveWqeIsRnrNakedWithMinRnrTimer) {
  inject(*a, *b, request(kRcSendOnly, 0), std::vector<uint8_t>(8, 1));
  // Expect: RNR NAK (001, timer field = min_rnr_timer 1) for PSN 0; B stays in RTS.
  auto out = sent_by(*b);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.aeth.syndrome, 0x21);
  EXPECT_EQ(out[0].h.bth.psn, 0u);
  EXPECT_EQ(b->qp->state, IBV_QPS_RTS);
}

TEST_F(NakProtocol, WriteWithAWrongRkeyIsNakedRemoteAccessError) {
  PacketHeaders h = request(kRcWriteOnly, 0);
  h.reth = {mem.addr(kPidB, 0), b->mr->rkey ^ 0x100, 8};
  inject(*a, *b, h, std::vector<uint8_t>(8, 1));
  // Expect: NAK remote access error (011 00010) for PSN 0, MSN 0; B's QP in ERR; no byte written.
  auto out = sent_by(*b);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.aeth.syndrome, 0x62);
  EXPECT_EQ(out[0].h.bth.psn, 0u);
  EXPECT_EQ(out[0].h.aeth.msn, 0u);
  EXPECT_EQ(b->qp->state, IBV_QPS_ERR);
  EXPECT_EQ(mem.ptr(kPidB, 0)[0], 0);
  EXPECT_NE(b->qp->error_reason.find("IBA 10.6.3"), std::string::npos) << b->qp->error_reason;
}

TEST_F(NakProtocol, MisalignedAtomicIsNakedInvalidRequest) {
  // A first request executes (MSN 1), so the NAK for the second shows the MSN it has reached.
  PacketHeaders w = request(kRcWriteOnly, 0);
  w.reth = {mem.addr(kPidB, 64), b->mr->rkey, 4};
  inject(*a, *b, w, std::vector<uint8_t>(4, 9));
  ASSERT_EQ(sent_by(*b).size(), 1u);
  PacketHeaders h = request(kRcCompareSwap, 1);
  h.atomic = {mem.addr(kPidB, 4), b->mr->rkey, 1, 0};
  inject(*a, *b, h);
  // Expect: NAK invalid request (011 00001) for PSN 1, MSN 1.
  auto out = sent_by(*b);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.bth.opcode, kRcAcknowledge);
  EXPECT_EQ(out[0].h.aeth.syndrome, 0x61);
  EXPECT_EQ(out[0].h.bth.psn, 1u);
  EXPECT_EQ(out[0].h.aeth.msn, 1u);
  EXPECT_EQ(b->qp->state, IBV_QPS_ERR);
}

TEST_F(NakProtocol, SendMiddleWithoutFirstIsNakedInvalidRequestWithoutReceiveCompletion) {
  post_recv(*b, 1, 4096, 4096);
  inject(*a, *b, request(kRcSendMiddle, 0), std::vector<uint8_t>(1024, 1));
  auto out = sent_by(*b);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.aeth.syndrome, 0x61);
  EXPECT_EQ(out[0].h.bth.psn, 0u);
  // The receive WQE was never taken: it is flushed, not failed.
  auto wcs = poll(*b);
  for (const ibv_wc& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(NakProtocol, SendFirstInsideASendFailsThatReceiveWithRemInvReqErr) {
  post_recv(*b, 7, 4096, 8192);
  inject(*a, *b, request(kRcSendFirst, 0), std::vector<uint8_t>(1024, 1));
  auto acked = sent_by(*b);  // the FIRST asked for an ACK
  ASSERT_EQ(acked.size(), 1u);
  EXPECT_EQ(acked[0].h.aeth.syndrome, 0x1f);
  inject(*a, *b, request(kRcSendFirst, 1), std::vector<uint8_t>(1024, 1));
  auto out = sent_by(*b);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.aeth.syndrome, 0x61);
  EXPECT_EQ(out[0].h.bth.psn, 1u);
  auto wcs = poll(*b);
  ASSERT_FALSE(wcs.empty());
  EXPECT_EQ(wcs[0].wr_id, 7u);
  EXPECT_EQ(wcs[0].status, IBV_WC_REM_INV_REQ_ERR);
}

TEST_F(NakProtocol, RequesterCompletesANakWithItsStatus) {
  fill(*a, 0, 8, 3);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 5, 0, 8, 0));
  ASSERT_EQ(sent_by(*a).size(), 1u);
  // Receive at A: NAK remote access error for PSN 0. Expect: REM_ACCESS_ERR, QP in ERR.
  PacketHeaders nak{};
  nak.bth.opcode = kRcAcknowledge;
  nak.bth.dest_qp = a->qp->qpn;
  nak.bth.psn = 0;
  nak.aeth = {aeth_nak(kNakRemoteAccessError), 0};
  inject(*b, *a, nak);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 5u);
  EXPECT_EQ(wcs[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(a->qp->state, IBV_QPS_ERR);
}

TEST_F(NakProtocol, RequesterGoesBackToTheNakedPsn) {
  fill(*a, 0, 4096, 3);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 5, 0, 4096, 0));  // PSNs 0..3
  ASSERT_EQ(sent_by(*a).size(), 4u);
  // Receive at A: NAK PSN sequence error for PSN 2 (MSN 0: the WRITE is unfinished).
  PacketHeaders nak{};
  nak.bth.opcode = kRcAcknowledge;
  nak.bth.dest_qp = a->qp->qpn;
  nak.bth.psn = 2;
  nak.aeth = {aeth_nak(kNakPsnSeqError), 0};
  inject(*b, *a, nak);
  // Expect: the WRITE's packets from PSN 2 on, MIDDLE then LAST, and no completion yet.
  auto out = sent_by(*a);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].h.bth.psn, 2u);
  EXPECT_EQ(out[0].h.bth.opcode, kRcWriteMiddle);
  EXPECT_EQ(out[1].h.bth.psn, 3u);
  EXPECT_EQ(out[1].h.bth.opcode, kRcWriteLast);
  EXPECT_TRUE(poll(*a).empty());
  EXPECT_EQ(a->dev.counters().retransmits, 1u);
}

}  // namespace
}  // namespace simnic::testing
