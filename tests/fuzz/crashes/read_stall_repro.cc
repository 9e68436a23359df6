// Reproducer of the stalled RDMA READ the soak found (docs/reliability.md). Not built by CMake:
// it fails on today's code. To run:
//   g++ -std=c++20 -g -I. tests/fuzz/crashes/read_stall_repro.cc build/archive/libsimnic_core.a \
//     build/archive/libsimnic_proto.a -lgtest -lgtest_main -lz -pthread -o /tmp/read_stall && /tmp/read_stall
// A READ of 4 responses; response 1 is lost; an ACK for the READ's last PSN arrives (as for a
// late duplicate request). complete_acked moves una_psn past the READ, the implied-NAK
// re-request's responses are then dropped as below una_psn, and on_timer's go_back_n(una_psn)
// finds no WQE and arms no timer: no completion, ever. Once fixed it belongs in tests/unit/core.
#include "tests/unit/core/qp_pair.h"
using namespace simnic;
using namespace simnic::testing;
class Stall : public QpPair {};
TEST_F(Stall, AckBeyondIncompleteReadStallsIt) {
  start();
  fill(*b, 0, 4096, 3);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_READ, 7, 8192, 4096, 0));  // 4 responses at MTU 1024
  ASSERT_EQ(fabric.queue.size(), 1u);
  deliver_one();                       // the READ request reaches B
  ASSERT_EQ(fabric.queue.size(), 4u);  // four responses on the wire
  WirePacket r0 = fabric.queue[0], r3 = fabric.queue[3];
  uint32_t first = parse(r0).h.bth.psn, last = parse(r3).h.bth.psn;
  fabric.queue.erase(fabric.queue.begin() + 1);  // response 1 lost
  deliver_one();                                 // response 0 arrives
  // An ACK from B for the READ's last PSN (what B sends for a late duplicate request).
  proto::PacketHeaders h;
  h.bth.opcode = 0x11;  // RC ACKNOWLEDGE
  h.bth.dest_qp = a->qp->qpn;
  h.bth.psn = last;
  h.aeth.syndrome = proto::aeth_ack(31);
  h.aeth.msn = 5;
  std::vector<uint8_t> ack(proto::packet_size(h.bth.opcode, 0));
  proto::build_packet(h, {}, {kIpB, kIpA, 4791, 4791}, ack);
  fabric.queue.clear();
  a->dev.on_packet(kIpB, 4791, ack, now);
  run_pending();
  printf("first %u last %u, una_psn %u next_psn %u, queued %zu\n", first, last, a->qp->una_psn, a->qp->next_psn, fabric.queue.size());
  // Let everything flow and time pass: the READ must complete (or fail), not hang.
  for (int i = 0; i < 50; ++i) {
    fabric.deliver_all(now);
    now += 100 * kMs;
    a->dev.on_timer(now);
    b->dev.on_timer(now);
  }
  fabric.deliver_all(now);
  auto wcs = poll(*a);
  printf("completions %zu, timer %llu, una %u\n", wcs.size(), (unsigned long long)a->qp->timer_deadline_ns, a->qp->una_psn);
  ASSERT_EQ(wcs.size(), 1u) << "the READ neither completed nor failed";
}
