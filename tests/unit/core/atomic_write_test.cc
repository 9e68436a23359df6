// RDMA ATOMIC WRITE (IBTA 1.5, Annex A19; IBV_WR_ATOMIC_WRITE): the wire format (RC opcode
// 0x1D: BTH + RETH + 8 bytes, answered by a READ RESPONSE ONLY with no payload), the bytes
// landing, the completion, and the errors a real RNIC gives: each NAK checked exactly, in the
// style of nak_protocol_test.cc.
#include <gtest/gtest.h>

#include <cstring>

#include "qp_pair.h"
#include "simnic/abi/wr_opcodes.h"
#include "simnic/proto/packet.h"

namespace simnic::testing {
namespace {

using namespace simnic::proto;

constexpr uint64_t kValue = 0x1122334455667788ull;

class AtomicWrite : public QpPair {
 protected:
  void SetUp() override { start(); }
  // A's ATOMIC WRITE of the 8 bytes at A's offset 0 to `remote_off` in B's MR.
  abi::SendWqe atomic_write(size_t remote_off, uint32_t len = 8) {
    std::memcpy(mem.ptr(kPidA, 0), &kValue, 8);
    return rdma(*a, *b, IBV_WR_ATOMIC_WRITE, 7, 0, len, remote_off);
  }
  PacketHeaders request(uint64_t va, uint32_t rkey, uint32_t len, uint32_t psn = 0) {
    PacketHeaders h{};
    h.bth.opcode = kRcAtomicWrite;
    h.bth.dest_qp = b->qp->qpn;
    h.bth.psn = psn;
    h.bth.ack_req = true;
    h.reth = {va, rkey, len};
    return h;
  }
  static std::vector<uint8_t> bytes(uint64_t v, size_t n = 8) {
    std::vector<uint8_t> out(n, 0xee);
    std::memcpy(out.data(), &v, 8);
    return out;
  }
  // The one packet B sent back, parsed.
  ParsedPacket only_reply() {
    EXPECT_EQ(fabric.queue.size(), 1u);
    std::vector<ParsedPacket> sent = sent_by(*b);
    return sent.empty() ? ParsedPacket{} : sent.front();
  }
  uint64_t word_at_b(size_t off) {
    uint64_t v;
    std::memcpy(&v, mem.ptr(kPidB, off), 8);
    return v;
  }
};

TEST_F(AtomicWrite, WireFormatBytesAndCompletion) {
  post_send(*a, atomic_write(64));
  // Expect on the wire: RC RDMA ATOMIC WRITE (0x1D), RETH {B's address, rkey, 8}, the 8 bytes.
  ASSERT_EQ(fabric.queue.size(), 1u);
  ParsedPacket req = parse(fabric.queue.front());
  EXPECT_EQ(req.h.bth.opcode, 0x1d);
  EXPECT_STREQ(opcode_info(0x1d).name, "RC_RDMA_ATOMIC_WRITE");
  EXPECT_TRUE(req.h.bth.ack_req);
  EXPECT_EQ(req.h.reth.va, mem.addr(kPidB, 64));
  EXPECT_EQ(req.h.reth.rkey, b->mr->rkey);
  EXPECT_EQ(req.h.reth.dma_len, 8u);
  ASSERT_EQ(req.payload.size(), 8u);
  EXPECT_EQ(std::memcmp(req.payload.data(), &kValue, 8), 0);
  deliver_one();
  EXPECT_EQ(word_at_b(64), kValue);
  // Expect back: READ RESPONSE ONLY, no payload, AETH ACK (credits invalid), PSN 0, MSN 1.
  ASSERT_EQ(fabric.queue.size(), 1u);
  ParsedPacket resp = parse(fabric.queue.front());
  EXPECT_EQ(resp.h.bth.opcode, kRcReadResponseOnly);
  EXPECT_TRUE(resp.payload.empty());
  EXPECT_EQ(resp.h.aeth.syndrome, 0x1f);
  EXPECT_EQ(resp.h.bth.psn, 0u);
  EXPECT_EQ(resp.h.aeth.msn, 1u);
  deliver_one();
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_ATOMIC_WRITE);
  EXPECT_EQ(wcs[0].wr_id, 7u);
  EXPECT_TRUE(poll(*b).empty());  // no receive WQE is consumed
  EXPECT_EQ(a->qp->req.rd_atomic_outstanding, 0u);
}

// ibv_wr_atomic_write hands the 8 bytes, not an SGE: the shim puts them inline in the WQE.
TEST_F(AtomicWrite, InlineValueAsTheQpExPathPostsIt) {
  abi::SendWqe w = atomic_write(128);
  w.num_sge = 0;
  w.send_flags |= IBV_SEND_INLINE;
  const uint64_t v = 0xa5a5a5a5deadbeefull;
  std::memcpy(w.inline_data, &v, 8);
  w.inline_len = 8;
  post_send(*a, w);
  deliver_one();
  deliver_one();
  EXPECT_EQ(word_at_b(128), v);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
}

TEST_F(AtomicWrite, LocalBufferNotEightBytesIsALocalLengthError) {
  post_send(*a, atomic_write(64, 4));
  EXPECT_TRUE(fabric.queue.empty());
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_LOC_LEN_ERR);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_ATOMIC_WRITE);
}

TEST_F(AtomicWrite, MisalignedTargetIsNakedInvalidRequest) {
  inject(*a, *b, request(mem.addr(kPidB, 68), b->mr->rkey, 8), bytes(kValue));
  // Expect: NAK invalid request (011 00001) for PSN 0, MSN 0; B in ERR; nothing written.
  ParsedPacket r = only_reply();
  EXPECT_EQ(r.h.bth.opcode, kRcAcknowledge);
  EXPECT_EQ(r.h.aeth.syndrome, 0x61);
  EXPECT_EQ(r.h.bth.psn, 0u);
  EXPECT_EQ(r.h.aeth.msn, 0u);
  EXPECT_EQ(b->qp->state, IBV_QPS_ERR);
  EXPECT_EQ(word_at_b(64), 0u);
  EXPECT_EQ(word_at_b(72), 0u);
  EXPECT_NE(b->qp->error_reason.find("A19.4.2"), std::string::npos) << b->qp->error_reason;
}

TEST_F(AtomicWrite, WrongLengthIsNakedInvalidRequest) {
  inject(*a, *b, request(mem.addr(kPidB, 64), b->mr->rkey, 16), bytes(kValue, 16));
  ParsedPacket r = only_reply();
  EXPECT_EQ(r.h.aeth.syndrome, 0x61);
  EXPECT_EQ(b->qp->state, IBV_QPS_ERR);
  EXPECT_EQ(word_at_b(64), 0u);
  EXPECT_NE(b->qp->error_reason.find("Annex A19"), std::string::npos) << b->qp->error_reason;
}

TEST_F(AtomicWrite, PayloadShorterThanRethIsNakedInvalidRequest) {
  inject(*a, *b, request(mem.addr(kPidB, 64), b->mr->rkey, 8), std::vector<uint8_t>(4, 1));
  EXPECT_EQ(only_reply().h.aeth.syndrome, 0x61);
  EXPECT_EQ(word_at_b(64), 0u);
}

// rxe checks REMOTE_WRITE for an ATOMIC WRITE, on the QP and on the MR (check_qp_attr_access,
// check_rkey): an MR without it NAKs remote access error, and the requester completes with
// IBV_WC_REM_ACCESS_ERR.
TEST_F(AtomicWrite, MrWithoutRemoteWriteIsRemoteAccessError) {
  core::Mr* ro = reg_mr(*b, 1 << 16, 4096, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE);
  abi::SendWqe w = atomic_write(1 << 16);
  w.rkey = ro->rkey;
  post_send(*a, w);
  deliver_one();
  ParsedPacket r = parse(fabric.queue.front());
  EXPECT_EQ(r.h.aeth.syndrome, 0x62);
  deliver_one();
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(word_at_b(1 << 16), 0u);
}

TEST_F(AtomicWrite, MisalignedFromTheRequesterCompletesRemoteInvalidRequest) {
  post_send(*a, atomic_write(66));
  deliver_one();
  deliver_one();
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_REM_INV_REQ_ERR);
  EXPECT_EQ(a->qp->state, IBV_QPS_ERR);
}

// A duplicate is answered again and never written again (a later write may have changed the
// word since): IBA 9.7.5.2.1 for requests with responder resources.
TEST_F(AtomicWrite, DuplicateIsAnsweredNotReExecuted) {
  inject(*a, *b, request(mem.addr(kPidB, 64), b->mr->rkey, 8), bytes(kValue));
  EXPECT_EQ(only_reply().h.bth.opcode, kRcReadResponseOnly);
  EXPECT_EQ(word_at_b(64), kValue);
  const uint64_t later = 42;
  std::memcpy(mem.ptr(kPidB, 64), &later, 8);
  inject(*a, *b, request(mem.addr(kPidB, 64), b->mr->rkey, 8), bytes(kValue));
  ParsedPacket r = only_reply();
  EXPECT_EQ(r.h.bth.opcode, kRcReadResponseOnly);
  EXPECT_EQ(r.h.bth.psn, 0u);
  EXPECT_EQ(r.h.aeth.msn, 1u);
  EXPECT_EQ(word_at_b(64), later);
  EXPECT_EQ(b->dev.counters().duplicates, 1u);
}

// A READ RESPONSE carrying data is no answer to an ATOMIC WRITE: it is dropped, and nothing is
// scattered into the WQE's (source) buffer.
TEST_F(AtomicWrite, ReadDataForAnAtomicWriteIsDropped) {
  post_send(*a, atomic_write(64));
  fabric.queue.clear();
  PacketHeaders h{};
  h.bth.opcode = kRcReadResponseOnly;
  h.bth.dest_qp = a->qp->qpn;
  h.bth.psn = 0;
  h.aeth.syndrome = 0x1f;
  h.aeth.msn = 1;
  inject(*b, *a, h, std::vector<uint8_t>(8, 0xcc));
  EXPECT_TRUE(poll(*a).empty());
  uint64_t v;
  std::memcpy(&v, mem.ptr(kPidA, 0), 8);
  EXPECT_EQ(v, kValue);
}

TEST(AtomicWriteTables, RcAndXrcOnly) {
  EXPECT_TRUE(abi::wr_opcode_allowed(IBV_QPT_RC, IBV_WR_ATOMIC_WRITE));
  EXPECT_TRUE(abi::wr_opcode_allowed(IBV_QPT_XRC_SEND, IBV_WR_ATOMIC_WRITE));
  EXPECT_FALSE(abi::wr_opcode_allowed(IBV_QPT_UC, IBV_WR_ATOMIC_WRITE));
  EXPECT_FALSE(abi::wr_opcode_allowed(IBV_QPT_UD, IBV_WR_ATOMIC_WRITE));
  EXPECT_EQ(abi::wr_opcode_info(IBV_WR_ATOMIC_WRITE)->wc_opcode, IBV_WC_ATOMIC_WRITE);
  EXPECT_STREQ(opcode_info(0xbd).name, "XRC_RDMA_ATOMIC_WRITE");
  EXPECT_EQ(opcode_info(0x1d).header_len, kBthBytes + kRethBytes);
  EXPECT_FALSE(opcode_info(0x3d).mask & kIsValid);  // no UC opcode
}

}  // namespace
}  // namespace simnic::testing
