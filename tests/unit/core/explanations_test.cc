// Mistakes that used to fail silently (a hang, a counter nobody reads) now say what happened in
// the NIC's log, once, and storms of them stay a few lines.
#include <gtest/gtest.h>

#include <algorithm>

#include "qp_pair.h"
#include "simnic/core/text.h"

namespace simnic::testing {
namespace {

size_t lines_with(const CapturingLogger& log, const std::string& s) {
  return size_t(std::count_if(log.lines.begin(), log.lines.end(),
                              [&](const std::string& l) { return l.find(s) != std::string::npos; }));
}

class Explanations : public QpPair {};

// Receive: SENDs with no receive WQE posted, retried for one simulated second.
// Expect: both sides say why once (and once more after a second), not a thousand times.
TEST_F(Explanations, AnRnrStormIsExplainedOnBothSidesAndRateLimited) {
  start();
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 64));
  for (int i = 0; i < 1000; ++i) {
    fabric.deliver_all(now);
    now += kMs;
    a->dev.on_timer(now);
  }
  EXPECT_GT(a->qp->counters.rnr_naks_received, 500u);
  const size_t sent = lines_with(b->logger, "no receive WQE was posted; sent an RNR NAK");
  const size_t heard = lines_with(a->logger, "(RNR NAK); retrying in");
  EXPECT_GE(sent, 1u);
  EXPECT_LE(sent, 3u);
  EXPECT_GE(heard, 1u);
  EXPECT_LE(heard, 3u);
  EXPECT_TRUE(a->logger.contains("forever (rnr_retry=7)"));
}

// Expect: packets for a QPN the NIC does not have (here: destroyed) name it, in hex, once.
TEST_F(Explanations, APacketForNoQpNamesTheQpn) {
  start();
  const uint32_t gone = b->qp->qpn;
  ASSERT_EQ(b->dev.queue_verbs().destroy_qp(b->ctx, b->qp->handle), 0);
  for (int i = 0; i < 5; ++i) post_send(*a, wqe(*a, IBV_WR_SEND, uint64_t(i), 0, 64));
  fabric.deliver_all(now);
  EXPECT_EQ(b->dev.counters().rx_drop_no_qp, 5u);
  EXPECT_EQ(lines_with(b->logger, "for QP " + core::hex(gone) + ": no such QP on this NIC"), 1u);
}

// Expect: a request to a QP still in INIT is dropped with the rule: receive from RTR on.
TEST_F(Explanations, ARequestToAQpInInitSaysMoveItToRtr) {
  make_hosts();
  connect_one(*a, *b, {});
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.port_num = 1;
  ASSERT_EQ(b->dev.queue_verbs().modify_qp(b->ctx, b->qp->handle, at,
                                           IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, now),
            0);
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 64));
  fabric.deliver_all(now);
  EXPECT_TRUE(b->logger.contains("it is in INIT, and a QP receives only from RTR on"));
}

// Expect: a responder forced into ERR by a bad request says so, and what it means for its RECVs.
TEST_F(Explanations, AResponderEnteringErrSaysWhyAndThatReceivesFlush) {
  start();
  abi::SendWqe w = rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, 64, 0);
  w.rkey ^= 0x55;  // a wrong rkey: NAK remote access error
  post_send(*a, w);
  fabric.deliver_all(now);
  EXPECT_TRUE(b->logger.contains("RTS->ERR (responder error)"));
  EXPECT_TRUE(b->logger.contains("complete with IBV_WC_WR_FLUSH_ERR"));
}

// Expect: a requester whose packets all vanish says that no ACK came, and what to check.
TEST_F(Explanations, RetriesWithoutAcksAreExplained) {
  start();
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 64));
  for (int i = 0; i < 3; ++i) {
    fabric.queue.clear();
    now += 200 * kMs;
    a->dev.on_timer(now);
  }
  EXPECT_GE(a->qp->counters.timeouts, 3u);
  EXPECT_GE(lines_with(a->logger, "within the ACK timeout; retransmitting"), 1u);
  EXPECT_LE(lines_with(a->logger, "within the ACK timeout"), 2u);
}

}  // namespace
}  // namespace simnic::testing
