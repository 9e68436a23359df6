// Found with Open MPI over UCX on a loaded machine (issue 25/26): the responder answered a SEND
// that arrived while it was still streaming an earlier READ's responses (paced by its burst),
// so the ACK overtook them. An ACK acknowledges every earlier request (IBA 9.7.5.1.1), so the
// requester took the READ's missing responses for lost, asked for the READ again (an implied
// NAK) and dropped the rest of the first stream as unexpected: a retransmission with no loss.
#include <gtest/gtest.h>

#include "qp_pair.h"

namespace simnic::testing {
namespace {

class AnswerOrder : public QpPair {
 protected:
  // B's packets on the wire, in order, from the front of the fabric's queue.
  std::vector<proto::ParsedPacket> queued_from_b() {
    std::vector<proto::ParsedPacket> out;
    for (const auto& w : fabric.queue) {
      proto::ParsedPacket p = parse(w);
      if (p.h.bth.dest_qp == a->qp->qpn) out.push_back(p);
    }
    return out;
  }
  // Index of the last READ response and of the first packet of `opcode` among B's packets.
  static void positions(const std::vector<proto::ParsedPacket>& ps, uint8_t opcode, int* last_read, int* first) {
    *last_read = -1;
    *first = -1;
    for (int i = 0; i < int(ps.size()); ++i) {
      const uint8_t op = ps[i].h.bth.opcode;
      if (op >= proto::kRcReadResponseFirst && op <= proto::kRcReadResponseOnly) *last_read = i;
      if (op == opcode && *first < 0) *first = i;
    }
  }
  // The READ request and the request after it reach B in one receive batch (as recvmmsg
  // hands simnicd several datagrams at once): B takes both before its next turn.
  void deliver_two_in_one_batch() {
    ASSERT_GE(fabric.queue.size(), 2u);
    for (int i = 0; i < 2; ++i) {
      WirePacket p = std::move(fabric.queue.front());
      fabric.queue.pop_front();
      b->dev.on_packet(p.src_ip, 4791, p.bytes, now, 0, p.tos);
    }
  }
  // Delivers the packet at `index` of the wire (not the oldest), with no turn after it.
  void deliver_at(size_t index) {
    ASSERT_LT(index, fabric.queue.size());
    WirePacket p = std::move(fabric.queue[index]);
    fabric.queue.erase(fabric.queue.begin() + long(index));
    fabric.devices.at(p.dst_ip)->on_packet(p.src_ip, 4791, p.bytes, now, 0, p.tos);
  }
  // What every case ends with: the wire delivered, A completes the READ (wr_id 1) and the
  // request after it (wr_id 2) in order and successfully, has every byte the READ asked for, and
  // sent nothing twice.
  void expect_both_complete_without_a_resend() {
    fabric.deliver_all(now);
    std::vector<ibv_wc> wcs = poll(*a);
    ASSERT_EQ(wcs.size(), 2u);
    EXPECT_EQ(wr_ids(wcs), (std::vector<uint64_t>{1, 2}));
    EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wcs[1].status, IBV_WC_SUCCESS);
    EXPECT_TRUE(same(*a, 8192, *b, 0, 8192));
    EXPECT_EQ(a->qp->counters.retransmits, 0u);
  }
  // Lets B finish its paced READ stream, keeping everything on the wire.
  void let_b_send_everything() {
    for (int i = 0; i < 20; ++i) b->dev.run_pending(now);
  }
};

// A READ of 8 responses (B sends 2 per turn), then a signaled SEND: B's ACK for the SEND comes
// after the READ's last response, and A completes both without sending anything again.
TEST_F(AnswerOrder, AnAckWaitsForTheReadResponsesBeforeIt) {
  start();
  b->dev.set_burst(2);
  fill(*b, 0, 8192, 5);
  fill(*a, 16384, 64, 9);
  post_recv(*b, 100, 32768, 64);
  post_sends(*a, {rdma(*a, *b, IBV_WR_RDMA_READ, 1, 8192, 8192, 0), wqe(*a, IBV_WR_SEND, 2, 16384, 64)});
  ASSERT_EQ(fabric.queue.size(), 2u);
  deliver_two_in_one_batch();  // the READ: B sends its first 2 responses and owes 6; the SEND: an ACK
  let_b_send_everything();
  int last_read = 0, ack = 0;
  positions(queued_from_b(), proto::kRcAcknowledge, &last_read, &ack);
  ASSERT_GE(ack, 0) << "B never acknowledged the SEND";
  EXPECT_GT(ack, last_read) << "the ACK overtook READ responses owed for an earlier request";

  expect_both_complete_without_a_resend();
  EXPECT_TRUE(same(*b, 32768, *a, 16384, 64));
}

// The same for an atomic behind a READ: its answer (carrying the original value) follows the
// READ's responses, and the READ still counts against max_dest_rd_atomic while the queued ACKs
// never do.
TEST_F(AnswerOrder, AnAtomicAnswerWaitsForTheReadResponsesBeforeIt) {
  start();
  b->dev.set_burst(2);
  fill(*b, 0, 8192, 5);
  const uint64_t before = 40;
  std::memcpy(mem.ptr(b->pid, 16384), &before, 8);
  abi::SendWqe add = rdma(*a, *b, IBV_WR_ATOMIC_FETCH_AND_ADD, 2, 24576, 8, 16384);
  add.compare_add = 2;
  post_sends(*a, {rdma(*a, *b, IBV_WR_RDMA_READ, 1, 8192, 8192, 0), add});
  deliver_two_in_one_batch();
  let_b_send_everything();
  int last_read = 0, atomic = 0;
  positions(queued_from_b(), proto::kRcAtomicAcknowledge, &last_read, &atomic);
  ASSERT_GE(atomic, 0) << "B never answered the atomic";
  EXPECT_GT(atomic, last_read) << "the atomic's answer overtook READ responses owed for an earlier request";

  expect_both_complete_without_a_resend();
  uint64_t orig = 0, now_b = 0;
  std::memcpy(&orig, mem.ptr(a->pid, 24576), 8);
  std::memcpy(&now_b, mem.ptr(b->pid, 16384), 8);
  EXPECT_EQ(orig, before);
  EXPECT_EQ(now_b, before + 2);
}

// B owes READ responses and an ACK when its own SEND is RNR NAKed: waiting out the RNR timer
// stops B's requester, not its responder. (The QP used to leave the busy set there, and the
// owed responses and the ACK behind them waited for a retransmission to start them again: under
// load, a soak's QPs ran out of retries.)
TEST_F(AnswerOrder, AnRnrWaitDoesNotStopTheAnswersOwed) {
  start();
  b->dev.set_burst(2);
  fill(*b, 0, 8192, 5);
  fill(*a, 16384, 64, 9);
  post_recv(*b, 100, 32768, 64);
  post_sends(*a, {rdma(*a, *b, IBV_WR_RDMA_READ, 1, 8192, 8192, 0), wqe(*a, IBV_WR_SEND, 2, 16384, 64)});
  post_send(*b, wqe(*b, IBV_WR_SEND, 3, 40960, 16));  // A has no receive posted: RNR NAK
  ASSERT_EQ(fabric.queue.size(), 3u);
  deliver_at(2);               // B's SEND reaches A, which answers with an RNR NAK
  deliver_two_in_one_batch();  // A's READ and SEND reach B: 2 responses sent, 6 and an ACK owed
  deliver_at(0);               // the RNR NAK reaches B: its requester waits
  let_b_send_everything();
  int last_read = 0, ack = 0;
  const std::vector<proto::ParsedPacket> from_b = queued_from_b();
  positions(from_b, proto::kRcAcknowledge, &last_read, &ack);
  int read_last = -1;
  for (int i = 0; i < int(from_b.size()); ++i)
    if (from_b[i].h.bth.opcode == proto::kRcReadResponseLast) read_last = i;
  ASSERT_GE(read_last, 0) << "B stopped sending the READ's responses while its requester waited";
  ASSERT_GE(ack, 0) << "B never acknowledged the SEND";
  EXPECT_GT(ack, last_read);
  expect_both_complete_without_a_resend();
}

}  // namespace
}  // namespace simnic::testing
