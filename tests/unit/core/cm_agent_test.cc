// The connection manager (CmAgent) between two Devices over the in-memory fabric: the MAD
// exchange of IBA 12.6 and the rdma_cm events each side's program would see.
#include <gtest/gtest.h>

#include <cstring>

#include "fabric.h"
#include "simnic/proto/cm_mad.h"

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

}  // namespace
}  // namespace simnic::testing
