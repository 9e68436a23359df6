// The connection manager (CmAgent) between two Devices over the in-memory fabric: the MAD
// exchange of IBA 12.6 and the rdma_cm events each side's program would see.
#include <gtest/gtest.h>

#include <cstring>

#include "fabric.h"
#include "simnic/proto/cm_mad.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/packet.h"

namespace simnic::testing {
namespace {

using namespace simnic::core;
namespace cm = simnic::proto::cm;

class EventNotifier : public RecordingNotifier {
 public:
  bool send_event(int fd, const void* msg, size_t len) override {
    abi::CmEventMsg m;
    if (len != sizeof m) return false;
    std::memcpy(&m, msg, sizeof m);
    cm_events[fd].push_back(m);
    return true;
  }
  std::map<int, std::vector<abi::CmEventMsg>> cm_events;
};

constexpr uint32_t kIpA = 0x7f000001, kIpB = 0x7f000002;
constexpr int kFdA = 100, kFdB = 200;  // the channels' sockets, as the notifier sees them

struct CmHost {
  CmHost(Fabric& f, uint32_t ip, uint64_t seed)
      : port(f, ip), dev(DeviceConfig{"n", ip, 4791, 4096, 64, seed}, mem, port, shm, notifier, logger) {
    f.attach(ip, &dev);
  }
  FakeMemory mem;
  HeapShm shm;
  EventNotifier notifier;
  CapturingLogger logger;
  Fabric::Port port;
  Device dev;
  CmAgent& cm() { return dev.cm(); }
};

class CmAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_a = a.cm().new_client();
    client_b = b.cm().new_client();
    ASSERT_EQ(a.cm().attach_channel(client_a, kFdA, &chan_a), 0);
    ASSERT_EQ(b.cm().attach_channel(client_b, kFdB, &chan_b), 0);
  }
  uint32_t create(CmHost& h, uint32_t client, uint32_t chan, uint64_t cookie) {
    uint32_t id = 0;
    abi::CmCreateIdReq req{chan, abi::kPsTcp, 0, IBV_QPT_RC, 0, cookie};
    EXPECT_EQ(h.cm().create_id(client, req, &id), 0);
    return id;
  }
  uint32_t listen_on_a(uint16_t port) {
    uint32_t id = create(a, client_a, chan_a, 1);
    uint16_t got = 0;
    EXPECT_EQ(a.cm().bind(client_a, abi::CmBindReq{id, port, 0}, &got), 0);
    EXPECT_EQ(got, port);
    EXPECT_EQ(a.cm().listen(client_a, abi::CmListenReq{id, 1}), 0);
    return id;
  }
  uint32_t connect_from_b(uint16_t port, const char* text) {
    uint32_t id = create(b, client_b, chan_b, 2);
    abi::CmConnectReq req{};
    req.id = id;
    req.dst_ip = kIpA;
    req.dst_port = port;
    req.qp_num = 0x123456;
    req.responder_resources = 4;
    req.initiator_depth = 2;
    req.retry_count = 7;
    req.rnr_retry_count = 7;
    req.cm_response_timeout = 10;
    req.max_cm_retries = 3;
    req.private_len = uint8_t(std::strlen(text) + 1);
    std::memcpy(req.private_data, text, req.private_len);
    EXPECT_EQ(b.cm().connect(client_b, req, now), 0);
    return id;
  }
  std::vector<abi::CmEventMsg>& events(CmHost& h) { return h.notifier.cm_events[&h == &a ? kFdA : kFdB]; }
  uint32_t last_event(CmHost& h) { return events(h).empty() ? 999 : events(h).back().event; }

  Fabric fabric;
  CmHost a{fabric, kIpA, 1}, b{fabric, kIpB, 2};
  uint32_t client_a = 0, client_b = 0, chan_a = 0, chan_b = 0;
  uint64_t now = 1000;
};

TEST_F(CmAgentTest, ConnectAcceptRtuThenDisconnectFromEitherSide) {
  uint32_t listener = listen_on_a(7174);
  uint32_t active = connect_from_b(7174, "hello");
  // Receive REQ // Expect CONNECT_REQUEST on A with the user's private data after the IP CM header
  fabric.deliver_all(now);
  ASSERT_EQ(last_event(a), abi::kCmConnectRequest);
  const abi::CmEventMsg req_ev = events(a).back();
  EXPECT_EQ(req_ev.cookie, 1u);
  EXPECT_STREQ(reinterpret_cast<const char*>(req_ev.private_data), "hello");
  EXPECT_EQ(req_ev.private_len, 92 - 36);
  EXPECT_EQ(req_ev.qp_num, 0x123456u);
  EXPECT_EQ(req_ev.responder_resources, 2);  // the peer's initiator depth, seen from here
  EXPECT_EQ(req_ev.initiator_depth, 4);
  EXPECT_EQ(req_ev.remote_ip, kIpB);
  const uint32_t passive = req_ev.new_id;
  ASSERT_NE(passive, listener);
  abi::CmAcceptReq acc{};
  acc.id = passive;
  acc.qp_num = 0x654321;
  acc.responder_resources = 2;
  acc.initiator_depth = 4;
  ASSERT_EQ(a.cm().accept(client_a, acc, now), 0);
  // Receive REP // Expect CONNECT_RESPONSE on B, then its RTU makes A ESTABLISHED
  fabric.deliver_all(now);
  ASSERT_EQ(last_event(b), abi::kCmConnectResponse);
  EXPECT_EQ(events(b).back().qp_num, 0x654321u);
  abi::CmInitQpAttrReply rtr{};
  ASSERT_EQ(b.cm().init_qp_attr(client_b, abi::CmInitQpAttrReq{active, IBV_QPS_RTR}, &rtr), 0);
  EXPECT_EQ(rtr.attr.dest_qp_num, 0x654321u);
  EXPECT_EQ(rtr.attr.ah_attr.grh.dgid.raw[15], 1);  // ::ffff:127.0.0.1
  EXPECT_EQ(rtr.attr.ah_attr.grh.dgid.raw[10], 0xff);
  abi::CmInitQpAttrReply a_rts{};
  ASSERT_EQ(a.cm().init_qp_attr(client_a, abi::CmInitQpAttrReq{passive, IBV_QPS_RTS}, &a_rts), 0);
  EXPECT_EQ(rtr.attr.rq_psn, a_rts.attr.sq_psn);  // B receives from A's starting PSN
  ASSERT_EQ(b.cm().accept(client_b, abi::CmAcceptReq{active}, now), 0);
  fabric.deliver_all(now);
  EXPECT_EQ(last_event(a), abi::kCmEstablished);
  // B disconnects: DREQ; A sees DISCONNECTED and answers DREP when it disconnects too.
  ASSERT_EQ(b.cm().disconnect(client_b, abi::CmDisconnectReq{active}, now), 0);
  fabric.deliver_all(now);
  EXPECT_EQ(last_event(a), abi::kCmDisconnected);
  EXPECT_NE(last_event(b), abi::kCmDisconnected);  // not before the DREP
  ASSERT_EQ(a.cm().disconnect(client_a, abi::CmDisconnectReq{passive}, now), 0);
  fabric.deliver_all(now);
  EXPECT_EQ(last_event(b), abi::kCmDisconnected);
  // Both wait out TIMEWAIT, then report TIMEWAIT_EXIT.
  now += 1'000'000'000;
  a.dev.on_timer(now);
  b.dev.on_timer(now);
  EXPECT_EQ(last_event(a), abi::kCmTimewaitExit);
  EXPECT_EQ(last_event(b), abi::kCmTimewaitExit);
}

TEST_F(CmAgentTest, RequestToAClosedPortIsRejectedWithInvalidServiceId) {
  listen_on_a(7174);
  connect_from_b(7175, "x");
  fabric.deliver_all(now);
  ASSERT_EQ(last_event(b), abi::kCmRejected);
  EXPECT_EQ(events(b).back().status, cm::kRejInvalidServiceId);
  EXPECT_TRUE(events(a).empty());
}

TEST_F(CmAgentTest, RejectCarriesTheConsumersPrivateData) {
  listen_on_a(7174);
  connect_from_b(7174, "x");
  fabric.deliver_all(now);
  abi::CmRejectReq rej{};
  rej.id = events(a).back().new_id;
  rej.private_len = 5;
  std::memcpy(rej.private_data, "nope", 5);
  ASSERT_EQ(a.cm().reject(client_a, rej, now), 0);
  fabric.deliver_all(now);
  ASSERT_EQ(last_event(b), abi::kCmRejected);
  EXPECT_EQ(events(b).back().status, cm::kRejConsumerDefined);
  EXPECT_STREQ(reinterpret_cast<const char*>(events(b).back().private_data), "nope");
}

// IBA 12.7.22: an unanswered REQ is sent again every response timeout, max_cm_retries times.
TEST_F(CmAgentTest, UnansweredRequestIsRetriedThenUnreachable) {
  connect_from_b(7174, "x");
  int reqs = 0;
  for (int round = 0; round < 10; ++round) {
    reqs += int(fabric.queue.size());
    fabric.queue.clear();  // lost
    now = b.dev.next_deadline();
    if (!now) break;
    b.dev.on_timer(now);
  }
  EXPECT_EQ(reqs, 1 + 3);
  ASSERT_EQ(last_event(b), abi::kCmUnreachable);
  EXPECT_EQ(events(b).back().status, -ETIMEDOUT);
}

TEST_F(CmAgentTest, ALostRequestIsSentAgainAndTheConnectionCompletes) {
  listen_on_a(7174);
  connect_from_b(7174, "x");
  fabric.queue.clear();  // the first REQ is lost
  now = b.dev.next_deadline();
  b.dev.on_timer(now);
  fabric.deliver_all(now);
  EXPECT_EQ(last_event(a), abi::kCmConnectRequest);
}

// A process that goes away: its connected id sends DREQ, the peer sees DISCONNECTED.
TEST_F(CmAgentTest, ClosingTheClientDisconnectsItsConnections) {
  listen_on_a(7174);
  uint32_t active = connect_from_b(7174, "x");
  fabric.deliver_all(now);
  abi::CmAcceptReq acc{};
  acc.id = events(a).back().new_id;
  ASSERT_EQ(a.cm().accept(client_a, acc, now), 0);
  fabric.deliver_all(now);
  ASSERT_EQ(b.cm().accept(client_b, abi::CmAcceptReq{active}, now), 0);
  fabric.deliver_all(now);
  ASSERT_EQ(last_event(a), abi::kCmEstablished);
  b.cm().close_client(client_b, now);
  EXPECT_TRUE(b.cm().ids().empty());
  fabric.deliver_all(now);
  EXPECT_EQ(last_event(a), abi::kCmDisconnected);
}

TEST_F(CmAgentTest, BindRefusesAPortInUse) {
  listen_on_a(7174);
  uint32_t id = create(a, client_a, chan_a, 3);
  uint16_t got = 0;
  EXPECT_EQ(a.cm().bind(client_a, abi::CmBindReq{id, 7174, 0}, &got), EADDRINUSE);
  EXPECT_EQ(a.cm().bind(client_a, abi::CmBindReq{id, 0, 0}, &got), 0);
  EXPECT_GE(got, 32768);
}

TEST_F(CmAgentTest, AClientCannotTouchAnothersIds) {
  uint32_t id = listen_on_a(7174);
  const uint32_t other = a.cm().new_client();
  EXPECT_EQ(a.cm().destroy_id(other, id, now), EINVAL);
  abi::CmCreateIdReq req{chan_a, abi::kPsTcp, 0, IBV_QPT_RC, 0, 9};
  uint32_t h = 0;
  EXPECT_EQ(a.cm().create_id(other, req, &h), EINVAL);  // not its channel
}

// --------------------------------------------------------------- forged and flooded requests
// (issue 29, point 5): a classmate sends REQs from a raw UDP socket on another 127/8 address.

constexpr uint32_t kIpC = 0x7f000063;  // the attacker: no NIC, only a UDP socket

// A well-formed RC REQ from `src` (what rdma_connect would send) to A's port `port`.
cm::Message forged_req(uint32_t src, uint16_t port, uint32_t comm_id) {
  cm::Message m;
  m.attr_id = cm::kReq;
  m.tid = uint64_t(comm_id) << 32 | 7;
  m.local_comm_id = comm_id;
  m.service_id = cm::service_id(abi::kPsTcp, port);
  m.qpn = 0x4242;
  m.starting_psn = 0x1000;
  m.responder_resources = 1;
  m.initiator_depth = 1;
  m.remote_cm_response_timeout = m.local_cm_response_timeout = 10;
  m.retry_count = m.rnr_retry_count = 7;
  m.max_cm_retries = 3;
  m.path_mtu = IBV_MTU_1024;
  cm::encode_cma_hdr(cm::CmaHdr{4, 40000, src, kIpA}, m.private_data);
  return m;
}

// Sends `m` to A's QP1 as a UDP datagram from src:src_port.
void inject(CmHost& to, uint32_t src, uint16_t src_port, const cm::Message& m, uint64_t now) {
  std::array<uint8_t, cm::kMadBytes> mad;
  ASSERT_TRUE(cm::encode(m, mad));
  proto::PacketHeaders h;
  h.bth.opcode = proto::kUdSendOnly;
  h.bth.dest_qp = cm::kGsiQpn;
  h.bth.psn = 1;
  h.deth.qkey = cm::kGsiQkey;
  h.deth.src_qp = cm::kGsiQpn;
  std::vector<uint8_t> pkt(512);
  proto::IpUdpInfo ip{src, kIpA, src_port, 4791};
  size_t n = proto::build_packet(h, mad, ip, pkt);
  ASSERT_GT(n, 0u);
  to.dev.on_packet(src, src_port, std::span<const uint8_t>(pkt.data(), n), now, 0, 0);
}

size_t connect_requests(const std::vector<abi::CmEventMsg>& evs) {
  size_t n = 0;
  for (auto& e : evs) n += e.event == abi::kCmConnectRequest;
  return n;
}

// One malformed REQ made rping's rdma_accept fail with EINVAL: QPN 0 reached the program, and
// RTR then had no peer QP. Each malformed REQ is now dropped (counted, logged) before the
// program hears of it; a well-formed one still reaches it, and its accept works.
TEST_F(CmAgentTest, MalformedRequestsAreDroppedBeforeTheProgramSeesThem) {
  listen_on_a(7174);
  struct Case {
    const char* what;
    void (*spoil)(cm::Message&);
  };
  const Case cases[] = {
      {"QPN 0", [](cm::Message& m) { m.qpn = 0; }},
      {"QPN 1", [](cm::Message& m) { m.qpn = 1; }},
      {"MTU code 0", [](cm::Message& m) { m.path_mtu = 0; }},
      {"MTU code 7", [](cm::Message& m) { m.path_mtu = 7; }},
      {"transport UC", [](cm::Message& m) { m.transport_type = 1; }},
      {"IP header from another address",
       [](cm::Message& m) {
         cm::encode_cma_hdr(cm::CmaHdr{4, 40000, kIpB, kIpA}, m.private_data);
       }},
      {"IP header to another NIC",
       [](cm::Message& m) {
         cm::encode_cma_hdr(cm::CmaHdr{4, 40000, kIpC, kIpB}, m.private_data);
       }},
  };
  uint32_t comm = 100;
  for (const Case& c : cases) {
    cm::Message m = forged_req(kIpC, 7174, comm++);
    c.spoil(m);
    inject(a, kIpC, 4791, m, now);
    EXPECT_EQ(connect_requests(events(a)), 0u) << c.what << " reached the program";
  }
  EXPECT_EQ(a.cm().reqs_malformed(), std::size(cases));
  EXPECT_TRUE(a.logger.contains("dropped a REQ from 127.0.0.99 for port 7174: its local QPN is 0 or 1"));
  // Logged once for the storm, not once per REQ (the global limiter).
  size_t lines = 0;
  for (auto& l : a.logger.lines) lines += l.find("dropped a REQ") != std::string::npos;
  EXPECT_EQ(lines, 1u);
  // A REQ for a UD service is not an RC connection request either.
  uint32_t ud = 0;
  ASSERT_EQ(a.cm().create_id(client_a, abi::CmCreateIdReq{chan_a, abi::kPsTcp, 0, IBV_QPT_UD, 0, 5}, &ud), 0);
  uint16_t got = 0;
  ASSERT_EQ(a.cm().bind(client_a, abi::CmBindReq{ud, 7180, 0}, &got), 0);
  ASSERT_EQ(a.cm().listen(client_a, abi::CmListenReq{ud, 1}), 0);
  inject(a, kIpC, 4791, forged_req(kIpC, 7180, comm++), now);
  EXPECT_EQ(connect_requests(events(a)), 0u);
  EXPECT_EQ(a.cm().reqs_malformed(), std::size(cases) + 1);
  // A well-formed REQ, even with absurd responder resources, reaches the program, and a
  // correct accept (RTR and RTS attributes, then the REP) succeeds.
  cm::Message good = forged_req(kIpC, 7174, comm++);
  good.initiator_depth = good.responder_resources = 255;
  inject(a, kIpC, 4791, good, now);
  ASSERT_EQ(connect_requests(events(a)), 1u);
  const uint32_t passive = events(a).back().new_id;
  abi::CmInitQpAttrReply rtr{}, rts{};
  EXPECT_EQ(a.cm().init_qp_attr(client_a, abi::CmInitQpAttrReq{passive, IBV_QPS_RTR}, &rtr), 0);
  EXPECT_EQ(rtr.attr.dest_qp_num, 0x4242u);
  EXPECT_EQ(rtr.attr.path_mtu, IBV_MTU_1024);
  abi::CmAcceptReq acc{};
  acc.id = passive;
  acc.qp_num = 0x777;
  acc.responder_resources = acc.initiator_depth = 1;
  EXPECT_EQ(a.cm().accept(client_a, acc, now), 0);
  EXPECT_EQ(a.cm().init_qp_attr(client_a, abi::CmInitQpAttrReq{passive, IBV_QPS_RTS}, &rts), 0);
  EXPECT_EQ(rts.attr.max_rd_atomic, 1);
}

// 10,000 forged REQs from one address and port used to fill the listener's 1,024 requests, and
// the real client was rejected (REJ 28). Now one source holds at most 32, the program hears of
// at most `backlog` at a time, and the next it hears of is from the source holding the fewest.
TEST_F(CmAgentTest, OneFloodingSourceCannotShutOutARealClient) {
  listen_on_a(7174);  // backlog 1, as rdma_listen(id, 1)
  for (uint32_t i = 0; i < 10000; ++i) inject(a, kIpC, 4791, forged_req(kIpC, 7174, 1000 + i), now);
  fabric.queue.clear();  // the REJs to the attacker
  EXPECT_EQ(connect_requests(events(a)), 1u) << "the program hears of one request at a time (backlog 1)";
  EXPECT_EQ(a.cm().reqs_refused(), 10000u - 32u);
  connect_from_b(7174, "real");
  fabric.deliver_all(now);
  ASSERT_NE(last_event(b), abi::kCmRejected) << "the real client was shut out";
  // The program rejects the forged request it was told of; the next is the real client's.
  ASSERT_EQ(events(a).back().remote_ip, kIpC);
  abi::CmRejectReq rej{};
  rej.id = events(a).back().new_id;
  ASSERT_EQ(a.cm().reject(client_a, rej, now), 0);
  fabric.queue.clear();
  ASSERT_EQ(connect_requests(events(a)), 2u);
  ASSERT_EQ(events(a).back().remote_ip, kIpB);
  EXPECT_STREQ(reinterpret_cast<const char*>(events(a).back().private_data), "real");
  abi::CmAcceptReq acc{};
  acc.id = events(a).back().new_id;
  acc.qp_num = 0x654321;
  ASSERT_EQ(a.cm().accept(client_a, acc, now), 0);
  fabric.deliver_all(now);
  ASSERT_EQ(last_event(b), abi::kCmConnectResponse);
  EXPECT_EQ(events(b).back().qp_num, 0x654321u);
}

// Many sources (32 loopback addresses, each from the NICs' port 4791: a loopback NIC drops
// anything from another port) fill the listener's 1,024: the oldest waiting request
// of the source holding the most is rejected to make room for a newcomer, never one the
// program was told of.
TEST_F(CmAgentTest, AFullListenerEvictsFromTheSourceHoldingTheMost) {
  uint32_t listener = listen_on_a(7174);
  ASSERT_EQ(a.cm().listen(client_a, abi::CmListenReq{listener, 4}), 0);
  uint32_t comm = 1;
  for (uint32_t src = kIpC; src < kIpC + 32; ++src)
    for (int i = 0; i < 32; ++i) inject(a, src, 4791, forged_req(src, 7174, comm++), now);
  ASSERT_EQ(connect_requests(events(a)), 4u);
  const std::vector<abi::CmEventMsg> told = events(a);
  EXPECT_EQ(a.cm().reqs_evicted(), 0u);
  inject(a, kIpC + 40, 4791, forged_req(kIpC + 40, 7174, comm++), now);  // a 33rd source: one is evicted
  EXPECT_EQ(a.cm().reqs_evicted(), 1u);
  EXPECT_EQ(a.cm().reqs_refused(), 0u);
  // The evicted one was rejected on the wire (REJ, consumer defined), and was not one told.
  bool rej_sent = false;
  for (auto& p : fabric.queue) {
    proto::ParsedPacket pp;
    proto::IpUdpInfo ip{p.src_ip, p.dst_ip, 4791, 4791};
    cm::Message m;
    if (proto::parse_packet(p.bytes, ip, pp) == proto::ParseError::kOk &&
        cm::decode(pp.payload, &m) == cm::DecodeError::kOk)
      rej_sent |= m.attr_id == cm::kRej && m.reason == cm::kRejConsumerDefined;
  }
  EXPECT_TRUE(rej_sent);
  fabric.queue.clear();
  for (auto& ev : told) {
    abi::CmInitQpAttrReply rtr{};
    EXPECT_EQ(a.cm().init_qp_attr(client_a, abi::CmInitQpAttrReq{ev.new_id, IBV_QPS_RTR}, &rtr), 0);
  }
  // The real client still gets in, and is told next.
  connect_from_b(7174, "real");
  fabric.deliver_all(now);
  EXPECT_EQ(a.cm().reqs_evicted(), 2u);
  for (int i = 0; i < 2; ++i) {  // the newcomer from the 33rd address came first, then the real client
    abi::CmRejectReq rej{};
    rej.id = told[i].new_id;
    ASSERT_EQ(a.cm().reject(client_a, rej, now), 0);
  }
  fabric.queue.clear();
  ASSERT_EQ(connect_requests(events(a)), 6u);
  EXPECT_EQ(events(a).back().remote_ip, kIpB);
}

// rdma_listen's backlog, as the kernel's ucma honours it: the program is told of at most that
// many requests it has not answered; the rest wait in the NIC (not rejected) and follow one
// by one as it answers.
TEST_F(CmAgentTest, TheProgramIsToldOfAtMostBacklogRequests) {
  uint32_t listener = listen_on_a(7174);
  ASSERT_EQ(a.cm().listen(client_a, abi::CmListenReq{listener, 2}), 0);
  for (uint32_t i = 0; i < 5; ++i) inject(a, kIpC + i, 4791, forged_req(kIpC + i, 7174, 50 + i), now);
  EXPECT_EQ(connect_requests(events(a)), 2u);
  EXPECT_EQ(a.cm().reqs_refused(), 0u);
  abi::CmAcceptReq acc{};
  acc.id = events(a).back().new_id;
  acc.qp_num = 0x999;
  ASSERT_EQ(a.cm().accept(client_a, acc, now), 0);
  EXPECT_EQ(connect_requests(events(a)), 3u);
  ASSERT_EQ(a.cm().destroy_id(client_a, events(a).back().new_id, now), 0);
  EXPECT_EQ(connect_requests(events(a)), 4u);
  // Destroying the listener rejects the ones still waiting, told or not; nobody is told more.
  ASSERT_EQ(a.cm().destroy_id(client_a, listener, now), 0);
  EXPECT_EQ(connect_requests(events(a)), 4u);
}

}  // namespace
}  // namespace simnic::testing
