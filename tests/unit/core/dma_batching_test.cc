// Fewer DMA system calls (issue 14): a message's bytes leave the sender's memory in one read
// per stage (256 KiB) rather than one per packet, and land in the receiver's in one write per
// process per flush; every check still runs per packet, a read that fails still fails the
// packet that needed the bytes, and nothing reports bytes before they have landed. The fake
// memory counts the calls simnicd would make (process_vm_readv, process_vm_writev).
#include <gtest/gtest.h>

#include "qp_pair.h"

namespace simnic::testing {
namespace {

constexpr uint32_t k64K = 65536;

class DmaBatching : public QpPair {
 protected:
  void SetUp() override {
    LinkOptions l;
    l.mtu = IBV_MTU_4096;
    start({}, l);
    mem.defer = true;     // as ProcessMemory: writes into pinned MRs wait for a flush
    fabric.batch = true;  // as recvmmsg: what is on the wire arrives together
    // Nothing the writes must not overtake: no CQE, no packet from the receiver.
    fabric.on_send = [this](const WirePacket&) {
      EXPECT_FALSE(mem.queued()) << "a packet left before the bytes landed";
    };
  }
  void reset_counts() {
    mem.read_calls.clear();
    mem.write_calls.clear();
    mem.flush_calls.clear();
  }
  ibv_wc one_completion(Host& h) {
    auto wcs = poll(h);
    EXPECT_EQ(wcs.size(), 1u);
    return wcs.empty() ? ibv_wc{} : wcs[0];
  }
};

TEST_F(DmaBatching, A64KiBWriteIsReadOnceAndWrittenOnce) {
  fill(*a, 0, k64K, 3);
  reset_counts();
  TraceLines trace;
  a->dev.tracer().set_sink(&trace);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, k64K, 262144));
  a->dev.tracer().set_sink(nullptr);
  EXPECT_EQ(trace.count("\"kind\":\"dma\""), 16);  // the trace still shows each packet's bytes
  EXPECT_EQ(queued_opcodes(kIpA).size(), 16u);     // 16 packets at MTU 4096...
  EXPECT_EQ(mem.read_calls[kPidA], 1);             // ...from one read
  fabric.deliver_all(now);
  EXPECT_EQ(one_completion(*a).status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, 262144, k64K));
  EXPECT_EQ(mem.flush_calls[kPidB], 1);  // one process_vm_writev for 16 packets
  EXPECT_EQ(mem.write_calls[kPidB], 0);
}

TEST_F(DmaBatching, A64KiBSendLandsInOneWriteBeforeItsCqe) {
  fill(*a, 0, k64K, 5);
  post_recv(*b, 70, 131072, k64K);
  std::vector<uint32_t> cqes_at_flush;
  mem.on_flush = [&] { cqes_at_flush.push_back(b->cq->shm->ring.producer.value.load()); };
  reset_counts();
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, k64K));
  EXPECT_EQ(mem.read_calls[kPidA], 1);
  fabric.deliver_all(now);
  auto wc = one_completion(*b);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.byte_len, k64K);
  EXPECT_TRUE(same(*a, 0, *b, 131072, k64K));
  EXPECT_EQ(one_completion(*a).status, IBV_WC_SUCCESS);
  EXPECT_EQ(mem.flush_calls[kPidB], 1);
  EXPECT_EQ(mem.write_calls[kPidB], 0);
  // The one flush came before the receive's CQE was written.
  EXPECT_EQ(cqes_at_flush, (std::vector<uint32_t>{0}));
}

TEST_F(DmaBatching, A64KiBReadIsReadOnceByTheResponderAndWrittenOnceByTheRequester) {
  fill(*b, 0, k64K, 7);
  std::vector<uint32_t> cqes_at_flush;
  mem.on_flush = [&] { cqes_at_flush.push_back(a->cq->shm->ring.producer.value.load()); };
  reset_counts();
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_READ, 1, 131072, k64K, 0));
  fabric.deliver_all(now);
  EXPECT_EQ(one_completion(*a).status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*b, 0, *a, 131072, k64K));
  EXPECT_EQ(mem.read_calls[kPidB], 1);   // 16 responses from one read
  EXPECT_EQ(mem.flush_calls[kPidA], 1);  // landed in one write...
  EXPECT_EQ(mem.write_calls[kPidA], 0);
  EXPECT_EQ(cqes_at_flush, (std::vector<uint32_t>{0}));  // ...before the READ's CQE
}

TEST_F(DmaBatching, AMessageLargerThanAStageIsReadInStageSizedChunks) {
  constexpr uint32_t kMiB = 1u << 20;
  fill(*a, 0, kMiB, 9);
  reset_counts();
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, kMiB, 0));
  fabric.deliver_all(now);
  EXPECT_EQ(one_completion(*a).status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, 0, kMiB));
  EXPECT_EQ(mem.read_calls[kPidA], 4);  // 256 packets, 4 x 256 KiB
  EXPECT_EQ(mem.write_calls[kPidB], 0);
  EXPECT_LT(mem.flush_calls[kPidB], 256 / 16 + 1);  // at most one per ACK, never one per packet
}

TEST_F(DmaBatching, AChunkReadThatFaultsFailsThePacketThatNeedsTheBytesAsBefore) {
  fill(*a, 0, k64K, 11);
  mem.fail_reads_at = mem.addr(kPidA, 5 * 4096 + 100);  // in the 6th packet's bytes
  TraceLines trace;
  a->dev.tracer().set_sink(&trace);
  reset_counts();
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, k64K, 0));
  a->dev.tracer().set_sink(nullptr);
  // The trace is as it was: one DMA read per packet, the 6th failing; the chunk left none.
  EXPECT_EQ(trace.count("\"kind\":\"dma\""), 6);
  // The chunk read failed; the packets before the bad one went out, gathered one by one.
  EXPECT_EQ(queued_opcodes(kIpA),
            (std::vector<uint8_t>{proto::kRcWriteFirst, proto::kRcWriteMiddle, proto::kRcWriteMiddle,
                                  proto::kRcWriteMiddle, proto::kRcWriteMiddle}));
  EXPECT_EQ(a->dev.counters().dma_errors, 1u);  // the 6th packet's read, not the chunk's
  fabric.deliver_all(now);
  EXPECT_EQ(one_completion(*a).status, IBV_WC_LOC_PROT_ERR);
}

TEST_F(DmaBatching, AReadResponseChunkThatFaultsNaksAtThePacketThatNeedsTheBytes) {
  fill(*b, 0, k64K, 19);
  mem.fail_reads_at = mem.addr(kPidB, 5 * 4096 + 100);  // in the 6th response's bytes
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_READ, 1, 131072, k64K, 0));
  int responses = 0;
  fabric.deliver_all(now, [&](const WirePacket& p) {
    if (p.src_ip == kIpB && proto::opcode_info(parse(p).h.bth.opcode).mask & proto::kIsReadResp) ++responses;
    return true;
  });
  EXPECT_EQ(responses, 5);  // the five whose bytes could be read, then the NAK
  EXPECT_EQ(one_completion(*a).status, IBV_WC_REM_OP_ERR);
  EXPECT_EQ(b->dev.counters().dma_errors, 1u);
}

TEST_F(DmaBatching, AnOdpFaultFurtherInTheMessageIsReportedAtItsPacket) {
  TraceLines trace;
  a->dev.tracer().set_sink(&trace);
  // An ODP MR whose last 56 KiB have no pages behind them (the fake space ends at 4 MiB).
  const uint64_t start = mem.addr(kPidA, (4u << 20) - 8192);
  core::Mr* odp = nullptr;
  ASSERT_EQ(a->dev.memory_verbs().reg_mr(a->ctx, a->pd, start, k64K, start,
                                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND, &odp),
            0);
  abi::SendWqe w = rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, k64K, 0);
  w.sge[0] = {start, k64K, odp->lkey};
  post_send(*a, w);
  EXPECT_EQ(queued_opcodes(kIpA), (std::vector<uint8_t>{proto::kRcWriteFirst, proto::kRcWriteMiddle}));
  fabric.deliver_all(now);
  EXPECT_EQ(one_completion(*a).status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(trace.count("\"kind\":\"odp_fault\""), 1);
  EXPECT_EQ(trace.count("\"side\":\"local\""), 1);
  a->dev.tracer().set_sink(nullptr);
}

TEST_F(DmaBatching, BytesSentFromAStageAreCheckedAtEachPacket) {
  fill(*a, 0, k64K, 13);
  a->dev.set_burst(4);  // four packets a turn: the rest wait for the next
  reset_counts();
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, k64K, 0));
  ASSERT_EQ(queued_opcodes(kIpA).size(), 4u);
  EXPECT_EQ(mem.read_calls[kPidA], 1);  // the whole message is staged
  // The MR goes away between packets: the 5th packet fails its lkey check, as it did when it
  // read the bytes itself.
  ASSERT_EQ(a->dev.memory_verbs().dereg_mr(a->ctx, a->mr->handle), 0);
  a->mr = nullptr;
  run_pending();
  EXPECT_EQ(queued_opcodes(kIpA).size(), 4u);
  EXPECT_EQ(mem.read_calls[kPidA], 1);
  auto wc = one_completion(*a);
  EXPECT_EQ(wc.status, IBV_WC_LOC_PROT_ERR);
}

TEST_F(DmaBatching, WritesIntoAnOdpMrAreMadeAtOnce) {
  const uint64_t base = mem.addr(kPidB, 0);
  core::Mr* odp = nullptr;
  ASSERT_EQ(b->dev.memory_verbs().reg_mr(b->ctx, b->pd, base, 1 << 20, base,
                                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ON_DEMAND, &odp),
            0);
  fill(*a, 0, k64K, 15);
  reset_counts();
  abi::SendWqe w = rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, k64K, 0);
  w.remote_addr = base + 524288;
  w.rkey = odp->rkey;
  post_send(*a, w);
  fabric.deliver_all(now);
  EXPECT_EQ(one_completion(*a).status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, 524288, k64K));
  // A page fault must NAK the packet that met it: every packet is written as it arrives.
  EXPECT_EQ(mem.write_calls[kPidB], 16);
  EXPECT_EQ(mem.flush_calls[kPidB], 0);
}

TEST_F(DmaBatching, AQueuedWriteThatFailsIsCountedAndLogged) {
  // The page behind a pinned MR went away after registration: the packet was accepted and
  // ACKed, as a real RNIC's DMA into a pinned page the program has unmapped; the NIC says so.
  mem.poisoned = mem.addr(kPidB, 4096 + 10);
  fill(*a, 0, 100, 17);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, 100, 4096));
  fabric.deliver_all(now);
  EXPECT_EQ(one_completion(*a).status, IBV_WC_SUCCESS);
  EXPECT_EQ(b->dev.counters().dma_errors, 1u);
  EXPECT_TRUE(b->logger.contains("bytes are lost"));
}

TEST_F(DmaBatching, AnAtomicReadsWhatAQueuedWriteBeforeItWrote) {
  // WRITE 8 bytes, then FETCH_ADD on them, in one receive batch: the atomic's read flushes first.
  uint64_t v = 40;
  std::memcpy(mem.ptr(kPidA, 0), &v, 8);
  abi::SendWqe add = rdma(*a, *b, IBV_WR_ATOMIC_FETCH_AND_ADD, 2, 64, 8, 4096);
  add.compare_add = 2;
  post_sends(*a, {rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, 8, 4096, 0), add});
  fabric.deliver_all(now);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  uint64_t orig = 0, now_value = 0;
  std::memcpy(&orig, mem.ptr(kPidA, 64), 8);
  std::memcpy(&now_value, mem.ptr(kPidB, 4096), 8);
  EXPECT_EQ(orig, 40u);
  EXPECT_EQ(now_value, 42u);
}

}  // namespace
}  // namespace simnic::testing
