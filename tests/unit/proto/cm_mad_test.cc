// The CM MAD codec against the byte offsets of IBA Tables 106-120.
#include <gtest/gtest.h>

#include <array>
#include <cstring>

#include "simnic/proto/cm_mad.h"

namespace simnic::proto::cm {
namespace {

TEST(CmMad, ReqFieldsSitWhereTable106PutsThem) {
  Message m;
  m.attr_id = kReq;
  m.tid = 0x1122334455667788;
  m.local_comm_id = 0xa1b2c3d4;
  m.service_id = service_id(0x0106, 7174);
  m.qpn = 0xabcdef;
  m.responder_resources = 4;
  m.initiator_depth = 2;
  m.remote_cm_response_timeout = 20;
  m.starting_psn = 0x123456;
  m.local_cm_response_timeout = 20;
  m.retry_count = 7;
  m.path_mtu = 5;
  m.rnr_retry_count = 6;
  m.max_cm_retries = 15;
  m.local_ack_timeout = 17;
  std::array<uint8_t, kMadBytes> mad;
  ASSERT_TRUE(encode(m, mad));
  const uint8_t* d = mad.data() + kMadHeaderBytes;
  EXPECT_EQ(mad[0], 1);     // base version
  EXPECT_EQ(mad[1], 0x07);  // CM class
  EXPECT_EQ(mad[2], 2);
  EXPECT_EQ(mad[3], 0x03);  // Send
  EXPECT_EQ(mad[16], 0x00);
  EXPECT_EQ(mad[17], 0x10);  // attribute ID REQ
  EXPECT_EQ(d[0], 0xa1);
  EXPECT_EQ(d[15], 0x06);  // service ID 0x0000000001061c06: port 7174 = 0x1c06
  EXPECT_EQ(d[14], 0x1c);
  EXPECT_EQ(d[13], 0x06);
  EXPECT_EQ(d[12], 0x01);
  EXPECT_EQ(d[32], 0xab);  // local QPN, 24 bits at 32
  EXPECT_EQ(d[34], 0xef);
  EXPECT_EQ(d[35], 4);        // responder resources
  EXPECT_EQ(d[39], 2);        // initiator depth
  EXPECT_EQ(d[43] >> 3, 20);  // remote CM response timeout, upper 5 bits
  EXPECT_EQ(d[44], 0x12);     // starting PSN
  EXPECT_EQ(d[47] & 7, 7);    // retry count
  EXPECT_EQ(d[50] >> 4, 5);   // path MTU 4096
  EXPECT_EQ(d[50] & 7, 6);    // RNR retry count
  EXPECT_EQ(d[51] >> 4, 15);  // max CM retries
  EXPECT_EQ(d[95] >> 3, 17);  // local ACK timeout
  Message back;
  ASSERT_EQ(decode(mad, &back), DecodeError::kOk);
  EXPECT_EQ(back.tid, m.tid);
  EXPECT_EQ(back.qpn, m.qpn);
  EXPECT_EQ(back.starting_psn, m.starting_psn);
  EXPECT_EQ(back.rnr_retry_count, 6);
  EXPECT_EQ(back.max_cm_retries, 15);
  EXPECT_EQ(back.service_id, m.service_id);
}

TEST(CmMad, RejCarriesReasonAndPrivateData) {
  Message m;
  m.attr_id = kRej;
  m.local_comm_id = 1;
  m.remote_comm_id = 2;
  m.reason = kRejConsumerDefined;
  std::memcpy(m.private_data, "go away", 8);
  std::array<uint8_t, kMadBytes> mad;
  ASSERT_TRUE(encode(m, mad));
  EXPECT_EQ(mad[kMadHeaderBytes + 11], 28);                                    // reason at 10..11
  EXPECT_EQ(std::memcmp(mad.data() + kMadHeaderBytes + 84, "go away", 8), 0);  // private data at 84
  Message back;
  ASSERT_EQ(decode(mad, &back), DecodeError::kOk);
  EXPECT_EQ(back.reason, kRejConsumerDefined);
  EXPECT_EQ(back.remote_comm_id, 2u);
  EXPECT_STREQ(reinterpret_cast<const char*>(back.private_data), "go away");
}

TEST(CmMad, SidrRepAndDreqRoundTrip) {
  Message m;
  m.attr_id = kSidrRep;
  m.local_comm_id = 77;
  m.qpn = 0x42;
  m.qkey = 0x01234567;
  m.sidr_status = kSidrSuccess;
  std::array<uint8_t, kMadBytes> mad;
  ASSERT_TRUE(encode(m, mad));
  Message back;
  ASSERT_EQ(decode(mad, &back), DecodeError::kOk);
  EXPECT_EQ(back.qpn, 0x42u);
  EXPECT_EQ(back.qkey, 0x01234567u);
  m = Message{};
  m.attr_id = kDreq;
  m.qpn = 0x99;
  ASSERT_TRUE(encode(m, mad));
  ASSERT_EQ(decode(mad, &back), DecodeError::kOk);
  EXPECT_EQ(back.attr_id, kDreq);
  EXPECT_EQ(back.qpn, 0x99u);
}

TEST(CmMad, DecodeRefusesWhatIsNotACmMad) {
  std::array<uint8_t, kMadBytes> mad{};
  Message m;
  EXPECT_EQ(decode(std::span<const uint8_t>(mad.data(), 100), &m), DecodeError::kTooShort);
  EXPECT_EQ(decode(mad, &m), DecodeError::kNotCm);
  mad[0] = 1, mad[1] = 7, mad[2] = 2, mad[3] = 3, mad[17] = 0x42;
  EXPECT_EQ(decode(mad, &m), DecodeError::kUnknownAttr);
}

TEST(CmMad, IpCmHeader) {
  uint8_t p[kCmaHdrBytes];
  encode_cma_hdr(CmaHdr{4, 0xd85f, 0x7f000002, 0x7f000001}, p);
  EXPECT_EQ(p[1], 0x40);
  EXPECT_EQ(p[19], 2);
  EXPECT_EQ(p[35], 1);
  CmaHdr h;
  ASSERT_TRUE(decode_cma_hdr(p, &h));
  EXPECT_EQ(h.src_port, 0xd85f);
  EXPECT_EQ(h.src_ip, 0x7f000002u);
  EXPECT_EQ(h.dst_ip, 0x7f000001u);
  p[1] = 0x60;  // IPv6: not what simnic's NICs have
  EXPECT_FALSE(decode_cma_hdr(p, &h));
}

}  // namespace
}  // namespace simnic::proto::cm
