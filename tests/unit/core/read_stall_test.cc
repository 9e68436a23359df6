// Found by the soak (docs/reliability.md) and reduced by hand: an ACK for a READ's last PSN
// arriving while one of its responses is missing (as a responder sends for a late duplicate
// request) moved una_psn past the READ. The implied-NAK re-request's responses were then
// dropped as old, and a lost re-request was never retried: the READ hung forever.
#include <gtest/gtest.h>

#include "qp_pair.h"

namespace simnic::testing {
namespace {

class ReadStall : public QpPair {};

// Receive: a READ's responses 0 and 2, 3 (1 lost), then an ACK for the READ's last PSN.
// Expect: the READ is asked for again from response 1 and completes with every byte.
TEST_F(ReadStall, AnAckBeyondAnIncompleteReadDoesNotStallIt) {
  start();
  fill(*b, 0, 4096, 3);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_READ, 7, 8192, 4096, 0));  // 4 responses at MTU 1024
  ASSERT_EQ(fabric.queue.size(), 1u);
  deliver_one();                       // the READ request reaches B
  ASSERT_EQ(fabric.queue.size(), 4u);  // four responses on the wire
  const uint32_t last = parse(fabric.queue[3]).h.bth.psn;
  fabric.queue.erase(fabric.queue.begin() + 1);  // response 1 lost
  deliver_one();                                 // response 0 arrives
  fabric.queue.clear();                          // 2 and 3 lost as well

  proto::PacketHeaders h;  // an ACK from B for the READ's last PSN
  h.bth.opcode = proto::kRcAcknowledge;
  h.bth.dest_qp = a->qp->qpn;
  h.bth.psn = last;
  h.aeth.syndrome = proto::aeth_ack(31);
  h.aeth.msn = 5;
  inject(*b, *a, h);
  fabric.queue.clear();  // and the implied-NAK re-request is lost too: only the timer is left

  std::vector<ibv_wc> wcs;
  for (int i = 0; i < 50 && wcs.empty(); ++i) {
    fabric.deliver_all(now);
    now += 100 * kMs;
    a->dev.on_timer(now);
    b->dev.on_timer(now);
    fabric.deliver_all(now);
    wcs = poll(*a);
  }
  ASSERT_EQ(wcs.size(), 1u) << "the READ neither completed nor failed";
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].wr_id, 7u);
  EXPECT_TRUE(same(*a, 8192, *b, 0, 4096));
  EXPECT_GE(a->qp->counters.timeouts, 1u);
}

}  // namespace
}  // namespace simnic::testing
