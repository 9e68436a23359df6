// Posts that send themselves (issue 26 point 4; abi/direct_send.h): while an RC QP has nothing
// to send, the NIC lends its next PSN to the program, whose post builds and sends the packet
// (shim/direct_packet.cc) from the NIC's socket. What must hold: the program's packet is byte
// for byte the one the NIC would have sent; it completes as the NIC's own, at its ACK or, lost,
// after the lend's end and a resend; WQEs posted behind it go out in order; whichever side
// takes the PSN first has it, and the other falls back (the post rings, or the NIC sends it
// again under the same PSN); no lend in step mode, with faults, for READs, or to a program
// without the socket; a program scribbling on the lend hurts nothing but its own next packet.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "qp_pair.h"
#include "shim/direct_packet.h"

namespace simnic::testing {
namespace {

struct LineSink : core::TraceSink {
  void write_line(const std::string& line) override { lines.push_back(line); }
  std::vector<std::string> lines;
};

class DirectSendTest : public QpPair {
 protected:
  void SetUp() override {
    start();
    fabric.direct_sends = true;
    ASSERT_EQ(a->dev.context_verbs().allow_direct_send(a->ctx), 0);  // B's program never asks
    EXPECT_EQ(a->dev.context_verbs().allow_direct_send(a->ctx), EALREADY);
  }
  abi::DirectSend& lend_of(Host& h) { return h.qp->shm->direct; }
  abi::LendState lend_state(Host& h) { return abi::lend_state(lend_of(h).lend.load()); }
  // One WRITE through the NIC, answered: from then on A's requester has nothing to send.
  void warm_up() {
    post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, 64, 8192));
    fabric.deliver_all(now);
    ASSERT_EQ(poll(*a).size(), 1u);
  }
  // The program's packet for `w` under the lend on offer, built as the shim builds it; `w`'s one
  // SGE (or its inline bytes) is the payload of a SEND or WRITE.
  std::vector<uint8_t> program_packet(Host& h, const abi::SendWqe& w, abi::DirectLend* lend) {
    EXPECT_TRUE(abi::read_direct_lend(lend_of(h), lend));
    const bool in_line = w.send_flags & IBV_SEND_INLINE;
    const uint64_t length = in_line ? w.inline_len : w.num_sge ? w.sge[0].length : 0;
    std::span<const uint8_t> payload;
    if (shim::direct_kind(w, length, *lend) == shim::DirectKind::kData && length)
      payload = in_line ? std::span<const uint8_t>(w.inline_data, length)
                        : std::span<const uint8_t>(mem.ptr(h.pid, w.sge[0].addr - FakeMemory::kBase), length);
    std::vector<uint8_t> out;
    const size_t n =
        shim::build_direct_packet(w, *lend, h.dev.config().ipv4, h.dev.config().udp_port, length, payload, out);
    out.resize(n);
    return out;
  }
  // What the shim's post does under an offered lend: the packet built, the WQE published, the
  // PSN taken, the packet on the wire (unless `lose` it) and marked sent, no doorbell. False
  // when the NIC took the PSN back first.
  bool program_sends(Host& h, const abi::SendWqe& w, bool lose = false) {
    abi::DirectLend lend;
    std::vector<uint8_t> pkt;
    if (!program_takes(h, w, &lend, &pkt)) return false;
    if (!lose) fabric.queue.push_back({h.dev.config().ipv4, lend.dst_ip, pkt, 0});
    abi::mark_direct_packet_sent(lend_of(h), lend);
    return true;
  }
  // Its first half: up to the exchange that takes the PSN, before its sendto.
  bool program_takes(Host& h, const abi::SendWqe& w, abi::DirectLend* lend, std::vector<uint8_t>* pkt) {
    *pkt = program_packet(h, w, lend);
    EXPECT_FALSE(pkt->empty());
    publish(h, w);
    return abi::take_direct_lend(lend_of(h), *lend);
  }
  void publish(Host& h, const abi::SendWqe& w) {
    auto& ring = h.qp->shm->sq;
    const uint32_t p = ring.producer.value.load();
    h.qp->sq[p & (h.qp->sq_entries - 1)] = w;
    ring.producer.value.store(p + 1);
  }
  // The packet A's NIC itself sends for `w` at this point (posted with a doorbell), off the wire.
  std::vector<uint8_t> nic_packet(const abi::SendWqe& w) {
    post_send(*a, w);
    for (auto it = fabric.queue.begin(); it != fabric.queue.end(); ++it)
      if (it->src_ip == kIpA) {
        std::vector<uint8_t> bytes = it->bytes;
        fabric.queue.erase(it);
        return bytes;
      }
    return {};
  }
  abi::SendWqe send_imm(uint64_t wr_id, size_t off, uint32_t len, uint32_t flags) {
    abi::SendWqe w = wqe(*a, IBV_WR_SEND_WITH_IMM, wr_id, off, len, flags);
    w.imm_data = htonl(0x1234567);
    return w;
  }
};

// Send: a warm-up WRITE, then for each kind of WQE a program may send, its packet built as the
// shim builds it and, from the same state, the one the NIC sends for the WQE posted with a
// doorbell (which takes the lend back first).
// Expect: the two are the same bytes, headers, payload and ICRC.
TEST_F(DirectSendTest, TheProgramsPacketIsTheOneTheNicWouldSend) {
  ASSERT_NO_FATAL_FAILURE(warm_up());
  fill(*a, 0, 4096, 9);
  std::vector<abi::SendWqe> ws = {rdma(*a, *b, IBV_WR_RDMA_WRITE, 2, 0, 100, 8192),
                                  rdma(*a, *b, IBV_WR_RDMA_WRITE_WITH_IMM, 3, 0, 1024, 8192),
                                  wqe(*a, IBV_WR_SEND, 4, 0, 1024),
                                  send_imm(5, 8, 7, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED),
                                  wqe(*a, IBV_WR_SEND, 6, 0, 0)};
  ws[1].imm_data = htonl(77);
  abi::SendWqe inl = wqe(*a, IBV_WR_SEND, 7, 0, 0, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
  inl.num_sge = 0;
  inl.inline_len = 33;
  for (uint32_t i = 0; i < 33; ++i) inl.inline_data[i] = uint8_t(i * 3);
  ws.push_back(inl);
  // The requests answered into the WQE's buffer: a READ of one packet, the two atomics.
  ws.push_back(rdma(*a, *b, IBV_WR_RDMA_READ, 8, 2048, 512, 8192));
  abi::SendWqe cas = rdma(*a, *b, IBV_WR_ATOMIC_CMP_AND_SWP, 9, 3072, 8, 16384);
  cas.compare_add = 0, cas.swap = 0x1122334455667788ull;
  abi::SendWqe faa = rdma(*a, *b, IBV_WR_ATOMIC_FETCH_AND_ADD, 10, 3080, 8, 16384);
  faa.compare_add = 5;
  ws.push_back(cas);
  ws.push_back(faa);
  for (uint32_t r = 0; r < 6; ++r) post_recv(*b, 50 + r, 16384, 2048);
  for (const abi::SendWqe& w : ws) {
    ASSERT_EQ(lend_state(*a), abi::kLendOffered) << w.wr_id;
    abi::DirectLend lend;
    const std::vector<uint8_t> mine = program_packet(*a, w, &lend);
    const std::vector<uint8_t> nics = nic_packet(w);
    EXPECT_EQ(mine, nics) << "WQE " << w.wr_id;
    fabric.queue.push_back({kIpA, kIpB, nics, 0});
    fabric.deliver_all(now);
    auto wcs = poll(*a);
    ASSERT_EQ(wcs.size(), 1u) << w.wr_id;
    EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  }
  EXPECT_EQ(a->dev.counters().direct_sends, 0u);
}

// Send: a warm-up WRITE, then a 64-byte WRITE and a SEND with immediate the program sends itself.
// Expect: both land at B (bytes compared, the immediate and the receive's length), complete at A
// in order and successfully, count as A's packets and as direct sends, nothing resent; the
// lend is on offer again after each.
TEST_F(DirectSendTest, APacketTheProgramSentCompletesAsTheNicsOwn) {
  ASSERT_NO_FATAL_FAILURE(warm_up());
  ASSERT_EQ(lend_state(*a), abi::kLendOffered);
  const uint64_t tx_before = a->dev.counters().tx_packets;
  fill(*a, 256, 64, 21);
  ASSERT_TRUE(program_sends(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 2, 256, 64, 12288)));
  EXPECT_EQ(lend_state(*a), abi::kLendSent);
  fabric.deliver_all(now);
  EXPECT_TRUE(same(*a, 256, *b, 12288, 64));
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 2u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(lend_state(*a), abi::kLendOffered);

  post_recv(*b, 60, 16384, 256);
  fill(*a, 512, 200, 5);
  ASSERT_TRUE(program_sends(*a, send_imm(3, 512, 200, IBV_SEND_SIGNALED)));
  fabric.deliver_all(now);
  auto at_b = poll(*b);
  ASSERT_EQ(at_b.size(), 1u);
  EXPECT_EQ(at_b[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(at_b[0].byte_len, 200u);
  EXPECT_EQ(at_b[0].imm_data, htonl(0x1234567));
  EXPECT_TRUE(same(*a, 512, *b, 16384, 200));
  wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 3u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(a->dev.counters().direct_sends, 2u);
  EXPECT_EQ(a->dev.counters().tx_packets, tx_before + 2);
  EXPECT_EQ(a->dev.counters().retransmits, 0u);
  EXPECT_EQ(b->dev.counters().duplicates, 0u);
}

// Send: the program sends a WRITE itself under a lend; then A's trace is turned on, and the
// turn ends; then the WRITE's ACK comes, and a second WRITE is posted.
// Expect: tracing takes the lend back (a trace records a packet when the NIC sends it, and a
// program's packet would be recorded only at its adoption, maybe after the peer's pkt_rx):
// the taken packet is adopted then and traced as a pkt_tx sent by the program, after its
// WQE's posted event; no lend is offered while tracing, so the second WRITE is the NIC's.
TEST_F(DirectSendTest, TracingTakesTheLendBack) {
  ASSERT_NO_FATAL_FAILURE(warm_up());
  fill(*a, 256, 64, 21);
  ASSERT_TRUE(program_sends(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 2, 256, 64, 12288)));
  LineSink trace;
  a->dev.tracer().set_sink(&trace);
  a->dev.finish_turn();
  EXPECT_EQ(a->dev.counters().direct_sends, 1u);
  fabric.deliver_all(now);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 2u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 256, *b, 12288, 64));
  EXPECT_NE(lend_state(*a), abi::kLendOffered);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 3, 512, 64, 12800));
  fabric.deliver_all(now);
  ASSERT_EQ(poll(*a).size(), 1u);
  EXPECT_EQ(a->dev.counters().direct_sends, 1u);
  EXPECT_NE(lend_state(*a), abi::kLendOffered);
  a->dev.tracer().set_sink(nullptr);
  std::vector<std::string> by_program;
  size_t posted = 0;
  for (size_t i = 0; i < trace.lines.size(); ++i) {
    const std::string& l = trace.lines[i];
    if (l.find("\"kind\":\"wqe_posted\"") != std::string::npos && !posted) posted = i + 1;
    if (l.find("\"sent_by\":\"program\"") == std::string::npos) continue;
    EXPECT_NE(l.find("\"kind\":\"pkt_tx\""), std::string::npos) << l;
    EXPECT_GT(i + 1, posted) << "the WQE is reported as posted before its packet";
    by_program.push_back(l);
  }
  ASSERT_EQ(by_program.size(), 1u);
  EXPECT_NE(by_program[0].find("\"opcode\":\"RC_RDMA_WRITE_ONLY\""), std::string::npos) << by_program[0];
  // Tracing off: the next ACK lends again.
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 4, 512, 64, 12800));
  fabric.deliver_all(now);
  ASSERT_EQ(poll(*a).size(), 1u);
  EXPECT_EQ(lend_state(*a), abi::kLendOffered);
}

// Send: a READ and a FETCH_ADD the program sends itself.
// Expect: the NIC accounts for each request at its response, scatters the answer into the WQE's
// buffer (bytes compared; the original value) and completes it; no lend while each is out.
TEST_F(DirectSendTest, AReadOrAnAtomicTheProgramSentIsAnsweredIntoItsBuffer) {
  ASSERT_NO_FATAL_FAILURE(warm_up());
  fill(*b, 20000, 300, 77);
  ASSERT_TRUE(program_sends(*a, rdma(*a, *b, IBV_WR_RDMA_READ, 5, 40000, 300, 20000)));
  fabric.deliver_all(now);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wcs[0].byte_len, 300u);
  EXPECT_TRUE(same(*b, 20000, *a, 40000, 300));
  ASSERT_EQ(lend_state(*a), abi::kLendOffered);

  uint64_t word = 40;
  std::memcpy(mem.ptr(b->pid, 24576), &word, 8);
  abi::SendWqe faa = rdma(*a, *b, IBV_WR_ATOMIC_FETCH_AND_ADD, 6, 41000, 8, 24576);
  faa.compare_add = 2;
  ASSERT_TRUE(program_sends(*a, faa));
  EXPECT_EQ(lend_state(*a), abi::kLendSent);
  fabric.deliver_all(now);
  wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  uint64_t orig = 0, now_word = 0;
  std::memcpy(&orig, mem.ptr(a->pid, 41000), 8);
  std::memcpy(&now_word, mem.ptr(b->pid, 24576), 8);
  EXPECT_EQ(orig, 40u);
  EXPECT_EQ(now_word, 42u);
  EXPECT_EQ(a->dev.counters().direct_sends, 2u);
  EXPECT_EQ(a->dev.counters().retransmits, 0u);
}

// Send: the program's WRITE, then two more posted normally (a doorbell) before anything is
// delivered.
// Expect: the doorbell's turn accounts for the program's packet first and sends the two
// behind it with the next PSNs: all three land and complete in order, nothing resent.
TEST_F(DirectSendTest, WqesPostedBehindTheProgramsPacketFollowItInOrder) {
  ASSERT_NO_FATAL_FAILURE(warm_up());
  std::vector<abi::SendWqe> ws = small_writes(0, 3);
  ASSERT_TRUE(program_sends(*a, ws[0]));
  post_sends(*a, {ws[1], ws[2]});
  fabric.deliver_all(now);
  expect_in_order_success(poll(*a), 3);
  EXPECT_TRUE(same(*a, 0, *b, 8192, 3 * 64));
  EXPECT_EQ(a->dev.counters().direct_sends, 1u);
  EXPECT_EQ(a->dev.counters().retransmits, 0u);
  EXPECT_EQ(b->dev.counters().rx_drop_out_of_sequence, 0u);
}

// Send: with the NIC's sends held until its turn ends (as UdpPort batches them), a WRITE the NIC
// sends in the very turn that ends with the lend on offer, then the program's own WRITE.
// Expect: the NIC's queued packet leaves before the lend is published, so the program's packet
// follows it on the wire: both land in order, no sequence NAK, nothing resent.
TEST_F(DirectSendTest, TheNicsQueuedPacketsLeaveBeforeTheLend) {
  ASSERT_NO_FATAL_FAILURE(warm_up());
  fabric.hold_until_turn_ends = true;
  std::vector<abi::SendWqe> ws = small_writes(0, 2);
  post_sends(*a, {ws[0]});  // the NIC's turn: sends it (held), runs dry, offers the next PSN
  ASSERT_EQ(lend_state(*a), abi::kLendOffered);
  ASSERT_EQ(queued_opcodes(kIpA).size(), 1u) << "the held packet left when the lend was offered";
  ASSERT_TRUE(program_sends(*a, ws[1]));
  fabric.deliver_all(now);
  expect_in_order_success(poll(*a), 2);
  EXPECT_TRUE(same(*a, 0, *b, 8192, 2 * 64));
  EXPECT_EQ(b->dev.counters().naks_sent, 0u);
  EXPECT_EQ(a->dev.counters().retransmits, 0u);
}

// Send: with the NICs' sends held until their turn ends, a SEND from B to A, whose QP has its
// next PSN on offer.
// Expect: when A's receive completion becomes visible (A's program could post and send at
// once), A's ACK of that SEND is already on the wire, not coalesced or held for the end of the
// turn: B hears the ACK before anything A's program sends next. The lend stays on offer.
TEST_F(DirectSendTest, AReceiveCompletionOnALentQpFollowsItsAckOnTheWire) {
  ASSERT_NO_FATAL_FAILURE(warm_up());
  ASSERT_EQ(lend_state(*a), abi::kLendOffered);
  fabric.hold_until_turn_ends = true;
  post_recv(*a, 70, 16384, 256);
  post_send(*b, wqe(*b, IBV_WR_SEND, 71, 0, 100));
  fabric.after_events(now);  // B's turn ends: its SEND goes on the wire
  ASSERT_EQ(queued_opcodes(kIpB).size(), 1u);
  WirePacket send = fabric.queue.front();
  fabric.queue.pop_front();
  a->dev.on_packet(send.src_ip, 4791, send.bytes, now);  // A's turn, not yet ended
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_RECV);
  EXPECT_TRUE(queued(kIpA, proto::kRcAcknowledge)) << "the ACK waits behind the completion";
  EXPECT_EQ(lend_state(*a), abi::kLendOffered);
  fabric.hold_until_turn_ends = false;
  fabric.deliver_all(now);
  ASSERT_EQ(poll(*b).size(), 1u);
}

// Send: the program's WRITE, lost on the wire (no ACK ever comes).
// Expect: the lend ends at the sweep (kLendNs) and the packet becomes the NIC's, whose ACK
// timer resends it: it lands and completes once, with one timeout and one retransmission.
TEST_F(DirectSendTest, ALostPacketOfTheProgramsIsResentAfterTheLendEnds) {
  ASSERT_NO_FATAL_FAILURE(warm_up());
  std::vector<abi::SendWqe> ws = small_writes(0, 1);
  ASSERT_TRUE(program_sends(*a, ws[0], /*lose=*/true));
  EXPECT_EQ(a->dev.next_deadline(), now + core::DirectSend::kLendNs);
  now += core::DirectSend::kLendNs;
  a->dev.on_timer(now);
  EXPECT_EQ(a->dev.counters().direct_sends, 1u);
  EXPECT_TRUE(fabric.queue.empty());
  ASSERT_NE(a->dev.next_deadline(), 0u);  // the ACK timer now
  now = a->dev.next_deadline();
  a->dev.on_timer(now);
  run_pending();
  fabric.deliver_all(now);
  expect_in_order_success(poll(*a), 1);
  EXPECT_TRUE(same(*a, 0, *b, 8192, 64));
  EXPECT_EQ(a->dev.counters().timeouts, 1u);
  EXPECT_EQ(a->dev.counters().retransmits, 1u);
}

// Send: the program takes the PSN and is preempted before its sendto; the NIC ends the lend
// (its time is up) and accounts the packet as sent; ACK timeouts pass; then the program sends.
// Expect: no timeout, no resend and no new lend while the program holds the packet (the timer
// is deferred: the packet cannot be late); once sent it is answered and completes once.
TEST_F(DirectSendTest, APacketTheProgramStillHoldsIsNotLate) {
  ASSERT_NO_FATAL_FAILURE(warm_up());
  abi::DirectLend lend;
  std::vector<uint8_t> pkt;
  std::vector<abi::SendWqe> ws = small_writes(0, 1);
  ASSERT_TRUE(program_takes(*a, ws[0], &lend, &pkt));
  now += core::DirectSend::kLendNs;
  a->dev.on_timer(now);  // the sweep: adopted, its ACK timer armed
  EXPECT_EQ(a->dev.counters().direct_sends, 1u);
  for (int i = 0; i < 5; ++i) {
    ASSERT_NE(a->dev.next_deadline(), 0u);
    now = a->dev.next_deadline();
    a->dev.on_timer(now);
    run_pending();
  }
  EXPECT_EQ(a->dev.counters().timeouts, 0u);
  EXPECT_GE(a->dev.counters().timeouts_deferred, 5u);
  EXPECT_TRUE(fabric.queue.empty());           // nothing resent
  EXPECT_EQ(lend_state(*a), abi::kLendTaken);  // and no new lend over the word
  fabric.queue.push_back({kIpA, lend.dst_ip, pkt, 0});
  abi::mark_direct_packet_sent(lend_of(*a), lend);
  fabric.deliver_all(now);
  expect_in_order_success(poll(*a), 1);
  EXPECT_TRUE(same(*a, 0, *b, 8192, 64));
  EXPECT_EQ(a->dev.counters().retransmits, 0u);
  EXPECT_EQ(lend_state(*a), abi::kLendOffered);  // lent again once answered
}

// Send: the program's packet is answered before its post marks it sent (the peer NIC ran on
// the other CPU while the post was still in sendto).
// Expect: the ACK proves it left: the WQE completes and the next lend is offered at once; the
// post's late mark changes nothing.
TEST_F(DirectSendTest, AnAnswerToAHeldPacketShowsItLeft) {
  ASSERT_NO_FATAL_FAILURE(warm_up());
  abi::DirectLend lend;
  std::vector<uint8_t> pkt;
  ASSERT_TRUE(program_takes(*a, small_writes(0, 1)[0], &lend, &pkt));
  fabric.queue.push_back({kIpA, lend.dst_ip, pkt, 0});
  fabric.deliver_all(now);
  expect_in_order_success(poll(*a), 1);
  ASSERT_EQ(lend_state(*a), abi::kLendOffered);
  const uint32_t word = lend_of(*a).lend.load();
  abi::mark_direct_packet_sent(lend_of(*a), lend);
  EXPECT_EQ(lend_of(*a).lend.load(), word);
  EXPECT_EQ(a->dev.counters().direct_sends, 1u);
}

// Send: as above, but the program never sends (stopped for good).
// Expect: it is waited for as a stalled peer is (3 s), then timed out and resent by the NIC:
// the WQE completes.
TEST_F(DirectSendTest, APacketTheProgramNeverSendsIsResentAfterThreeSeconds) {
  ASSERT_NO_FATAL_FAILURE(warm_up());
  abi::DirectLend lend;
  std::vector<uint8_t> pkt;
  ASSERT_TRUE(program_takes(*a, small_writes(0, 1)[0], &lend, &pkt));
  now += core::DirectSend::kLendNs;
  a->dev.on_timer(now);
  const uint64_t adopted = now;
  while (a->dev.counters().timeouts == 0 && now - adopted < 4'000'000'000) {
    ASSERT_NE(a->dev.next_deadline(), 0u);
    now = a->dev.next_deadline();
    a->dev.on_timer(now);
    run_pending();
  }
  EXPECT_EQ(a->dev.counters().timeouts, 1u);
  EXPECT_GE(now - adopted, 3'000'000'000u);
  fabric.deliver_all(now);
  expect_in_order_success(poll(*a), 1);
  EXPECT_TRUE(same(*a, 0, *b, 8192, 64));
}

// Send: a lend nobody takes.
// Expect: the sweep ends it at kLendNs and nothing else happens (no packet, no timer left):
// an idle QP costs no more timer wake-ups.
TEST_F(DirectSendTest, ALendNobodyTakesEndsAndLeavesNoTimer) {
  ASSERT_NO_FATAL_FAILURE(warm_up());
  ASSERT_EQ(lend_state(*a), abi::kLendOffered);
  now += core::DirectSend::kLendNs;
  a->dev.on_timer(now);
  EXPECT_EQ(lend_state(*a), abi::kLendOff);
  EXPECT_EQ(a->dev.next_deadline(), 0u);
  EXPECT_TRUE(fabric.queue.empty());
  // The next post goes the NIC's way, and the lend comes back once it is answered.
  post_sends(*a, small_writes(0, 1));
  fabric.deliver_all(now);
  expect_in_order_success(poll(*a), 1);
  EXPECT_EQ(lend_state(*a), abi::kLendOffered);
}

// Send: the program reads the lend and builds its packet, and is preempted; meanwhile the
// lend's time runs out and the sweep takes the PSN back.
// Expect: the program's exchange fails (its post would ring), and its published WQE is the
// NIC's to send: it completes once, nothing was sent twice.
TEST_F(DirectSendTest, WhenTheNicTakesThePsnBackFirstTheProgramsPostRings) {
  ASSERT_NO_FATAL_FAILURE(warm_up());
  abi::DirectLend lend;
  std::vector<abi::SendWqe> ws = small_writes(0, 1);
  ASSERT_FALSE(program_packet(*a, ws[0], &lend).empty());
  now += core::DirectSend::kLendNs;
  a->dev.on_timer(now);
  publish(*a, ws[0]);
  EXPECT_FALSE(abi::take_direct_lend(lend_of(*a), lend));
  a->dev.on_doorbell(a->ctx, now);  // the post's doorbell
  fabric.deliver_all(now);
  expect_in_order_success(poll(*a), 1);
  EXPECT_EQ(a->dev.counters().direct_sends, 0u);
  EXPECT_EQ(b->dev.counters().duplicates, 0u);
}

// Send: the program's WRITE is on the wire, and the program moves the QP to ERR before anything
// is delivered.
// Expect: the state change accounts for the packet and flushes the WQE (WR_FLUSH_ERR); the lend
// is gone; B's answer afterwards is dropped (ERR hears no responses).
TEST_F(DirectSendTest, AStateChangeEndsTheLendFirst) {
  ASSERT_NO_FATAL_FAILURE(warm_up());
  ASSERT_TRUE(program_sends(*a, small_writes(0, 1)[0]));
  ASSERT_EQ(a->modify_state(IBV_QPS_ERR, 0, 0, now), 0);
  EXPECT_EQ(lend_state(*a), abi::kLendOff);
  EXPECT_EQ(a->dev.counters().direct_sends, 1u);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_WR_FLUSH_ERR);
  fabric.deliver_all(now);
  EXPECT_TRUE(poll(*a).empty());
}

// Send: a doorbell with nothing new posted, then an ACK of an earlier WRITE, while a lend is on
// offer.
// Expect: neither turn takes the offer back: the program's post still sends its packet itself.
TEST_F(DirectSendTest, TurnsWithNothingNewPostedLeaveTheOfferStanding) {
  ASSERT_NO_FATAL_FAILURE(warm_up());
  const uint32_t offered = lend_of(*a).lend.load();
  a->dev.on_doorbell(a->ctx, now);
  EXPECT_EQ(lend_of(*a).lend.load(), offered);
  ASSERT_TRUE(program_sends(*a, small_writes(0, 1)[0]));
  fabric.deliver_all(now);
  expect_in_order_success(poll(*a), 1);
  EXPECT_EQ(a->dev.counters().direct_sends, 1u);
  // A READ posted while the lend is on offer (the program's post rings): the NIC sends it.
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_READ, 7, 1024, 64, 8192));
  fabric.deliver_all(now);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 1024, *b, 8192, 64));
}

// Expect: no lend in step mode (each packet a step a student sees), when the wire injects
// faults, for a context that never took the NIC's socket, or while a READ is outstanding.
TEST_F(DirectSendTest, NoLendWhereTheNicMustSendItself) {
  ASSERT_NO_FATAL_FAILURE(warm_up());
  a->dev.set_burst(1);
  EXPECT_EQ(lend_state(*a), abi::kLendOff);
  post_sends(*a, small_writes(0, 1));
  fabric.deliver_all(now);
  EXPECT_EQ(lend_state(*a), abi::kLendOff);
  a->dev.set_burst(64);

  post_sends(*a, small_writes(1, 1));
  fabric.deliver_all(now);
  ASSERT_EQ(lend_state(*a), abi::kLendOffered);
  fabric.direct_sends = false;  // a fault set: the end of the event takes the lend back
  a->dev.finish_turn();
  EXPECT_EQ(lend_state(*a), abi::kLendOff);
  fabric.direct_sends = true;

  // B's program never took the socket: B's QP gets no lend however idle.
  post_send(*b, rdma(*b, *a, IBV_WR_RDMA_WRITE, 9, 0, 64, 8192));
  fabric.deliver_all(now);
  EXPECT_EQ(poll(*b).size(), 1u);
  EXPECT_EQ(lend_state(*b), abi::kLendOff);

  // A READ outstanding: nothing lent until its response is in.
  poll(*a);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_READ, 10, 1024, 64, 8192));
  EXPECT_EQ(lend_state(*a), abi::kLendOff);
  fabric.deliver_all(now);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(lend_state(*a), abi::kLendOffered);
}

// Send: the program scribbles on the lend: kTaken without publishing a WQE, garbage, an old
// epoch's taken word.
// Expect: the NIC accounts for nothing it did not find, crashes on nothing, and a WRITE posted
// afterwards goes out and completes.
TEST_F(DirectSendTest, AScribbledLendHurtsNothing) {
  ASSERT_NO_FATAL_FAILURE(warm_up());
  for (uint32_t w : {abi::lend_word(1, abi::kLendTaken), 0xffffffffu, abi::lend_word(0x3fffffff, abi::kLendTaken)}) {
    lend_of(*a).lend.store(w);
    a->dev.on_doorbell(a->ctx, now);
    now += core::DirectSend::kLendNs;
    a->dev.on_timer(now);
  }
  const uint32_t cur = lend_of(*a).lend.load();
  lend_of(*a).lend.store((cur & ~3u) | abi::kLendTaken);  // taken, no WQE published
  a->dev.on_doorbell(a->ctx, now);
  EXPECT_EQ(a->dev.counters().direct_sends, 0u);
  post_sends(*a, small_writes(0, 1));
  fabric.deliver_all(now);
  expect_in_order_success(poll(*a), 1);
  EXPECT_EQ(a->dev.counters().direct_sends, 0u);
}

}  // namespace
}  // namespace simnic::testing
