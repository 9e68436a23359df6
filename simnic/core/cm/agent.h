// The connection manager of one NIC: what the kernel's ib_cm and rdma_cm do for RoCE. It keeps
// the rdma_cm ids of the programs using this NIC (librdmacm asks through abi/cm.h), exchanges
// CM MADs (IBA chapter 12) with other NICs' agents on QP1, retransmits them on the CM response
// timeout, and reports rdma_cm events on the programs' event channels.
//
// Pure like the Device: packets leave through PacketSink, events through Notifier, time comes
// in as an argument.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <infiniband/verbs.h>

#include "simnic/abi/cm_bodies.h"
#include "simnic/core/env.h"
#include "simnic/core/objects/key_source.h"
#include "simnic/core/observe/log_limiter.h"
#include "simnic/core/observe/trace.h"
#include "simnic/proto/cm_mad.h"
#include "simnic/proto/packet.h"

namespace simnic::core {

// The communication states of IBA 12.9.6 that simnic uses, plus rdma_cm's idle/bound/listen.
enum class CmState {
  kIdle,
  kBound,
  kListen,
  kReqSent,  // active: REQ out, waiting for REP
  kRepRcvd,  // active: REP in, CONNECT_RESPONSE given to librdmacm, waiting for its RTU
  kReqRcvd,  // passive: REQ in, CONNECT_REQUEST given to the program, waiting for accept
  kRepSent,  // passive: REP out, waiting for RTU
  kEstablished,
  kDreqSent,
  kDreqRcvd,
  kTimewait,
  kSidrReqSent,
  kSidrReqRcvd,
  kClosed,  // rejected, timed out or disconnected: only rdma_destroy_id is left
};
const char* cm_state_name(CmState s);
// The requests a listener's program may have unanswered for rdma_listen(id, asked), as the
// kernel's ucma: asked, or the maximum (1024) for <= 0 or more.
uint32_t listen_backlog(int32_t asked);

struct CmNicInfo {
  uint32_t ipv4 = 0;  // host order
  uint16_t udp_port = 4791;
  uint64_t node_guid_be = 0;
  ibv_mtu mtu = IBV_MTU_4096;
  uint64_t key_seed = 0;  // 0: comm IDs and PSNs from getrandom
};

struct CmId {
  uint32_t handle = 0;
  uint32_t client = 0;  // the control connection that owns it
  uint32_t channel = 0;
  uint64_t cookie = 0;
  uint16_t ps = 0;
  ibv_qp_type qp_type = IBV_QPT_RC;
  CmState state = CmState::kIdle;
  uint16_t local_port = 0;
  uint32_t remote_ip = 0;
  uint16_t remote_port = 0;
  uint32_t listener = 0;      // a passive id: the listener it came from
  uint16_t src_udp_port = 0;  // a passive id: the UDP source port its request came from
  bool held = false;          // a passive id the program has not been told about (backlog full)
  uint32_t backlog = 0;       // a listener: requests its program may have unanswered at once
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  uint64_t tid = 0;
  // What the QP needs (CmInitQpAttr), from both sides' messages.
  uint32_t qpn = 0, psn = 0, remote_qpn = 0, remote_psn = 0, remote_qkey = 0;
  uint8_t responder_resources = 0, initiator_depth = 0;  // this side's view
  uint8_t retry_count = 7, rnr_retry_count = 7, local_ack_timeout = 17;
  ibv_mtu mtu = IBV_MTU_1024;
  // Retransmission (IBA 12.7.22, 12.11): the last MAD sent, until it is answered.
  std::array<uint8_t, proto::cm::kMadBytes> last_mad{};
  uint16_t last_attr = 0;
  uint64_t deadline_ns = 0;
  uint64_t interval_ns = 0;
  uint32_t retries_left = 0;
};

class CmAgent {
 public:
  CmAgent(CmNicInfo nic, PacketSink& wire, Notifier& notifier, Tracer& tracer, Logger& logger);
  ~CmAgent();

  // --- From the control socket (abi/cm_bodies.h); each returns 0 or a positive errno ---
  uint32_t new_client() { return next_client_++; }
  void close_client(uint32_t client, uint64_t now);               // the process is gone: destroy its ids
  int attach_channel(uint32_t client, int fd, uint32_t* handle);  // takes fd
  int create_id(uint32_t client, const abi::CmCreateIdReq& req, uint32_t* handle);
  int destroy_id(uint32_t client, uint32_t handle, uint64_t now);
  int migrate_id(uint32_t client, const abi::CmMigrateReq& req);
  int bind(uint32_t client, const abi::CmBindReq& req, uint16_t* port);
  int listen(uint32_t client, const abi::CmListenReq& req);
  int connect(uint32_t client, const abi::CmConnectReq& req, uint64_t now);
  int accept(uint32_t client, const abi::CmAcceptReq& req, uint64_t now);
  int reject(uint32_t client, const abi::CmRejectReq& req, uint64_t now);
  int disconnect(uint32_t client, const abi::CmDisconnectReq& req, uint64_t now);
  int init_qp_attr(uint32_t client, const abi::CmInitQpAttrReq& req, abi::CmInitQpAttrReply* out);
  // Why the last call was refused, for the program ("" if it gave no reason).
  std::string take_refusal() { return std::exchange(refusal_, {}); }

  // --- From the wire and the clock ---
  void on_mad(uint32_t src_ip, uint16_t src_port, const proto::ParsedPacket& pkt, uint64_t now);
  void on_timer(uint64_t now);
  uint64_t next_deadline() const;

  const std::map<uint32_t, std::unique_ptr<CmId>>& ids() const { return ids_; }
  uint64_t mads_sent() const { return mads_sent_; }
  uint64_t mads_received() const { return mads_received_; }
  // Requests dropped as malformed, and refused or evicted to keep one source from filling a
  // listener (cm/admission.cc).
  uint64_t reqs_malformed() const { return reqs_malformed_; }
  uint64_t reqs_refused() const { return reqs_refused_; }
  uint64_t reqs_evicted() const { return reqs_evicted_; }

 private:
  struct Channel {
    uint32_t client = 0;
    int fd = -1;
  };
  // cm/agent.cc: ids, ports, events
  CmId* owned(uint32_t client, uint32_t handle);
  CmId* find_by_local_comm_id(uint32_t comm_id);
  CmId* find_by_remote(uint32_t remote_comm_id, uint32_t remote_ip);
  CmId* find_listener(uint16_t ps, uint16_t port);
  bool port_taken(uint16_t ps, uint16_t port) const;
  uint16_t ephemeral_port(uint16_t ps);
  CmId& add_id(uint32_t client, uint32_t channel, uint64_t cookie, uint16_t ps, ibv_qp_type type);
  void erase_id(uint32_t handle);
  void set_state(CmId& id, CmState s, const char* cause);
  void deliver(const CmId& id, abi::CmEventMsg ev);
  abi::CmEventMsg event_for(const CmId& id, uint32_t type, int32_t status = 0) const;
  int refuse(int err, std::string why) {
    refusal_ = std::move(why);
    return err;
  }
  void abandon(CmId& id, uint64_t now);
  void fill_req(CmId& id, const abi::CmConnectReq& req, uint8_t timeout, uint8_t retries,
                proto::cm::Message* m);  // destroy: tell the peer as the kernel's ib_destroy_cm_id

  // cm/messages.cc: sending, and the handlers of received messages
  void send_mad(CmId* id, uint32_t dst_ip, proto::cm::Message& m, uint64_t now, bool expect_answer);
  void send_rej(uint32_t dst_ip, uint64_t tid, uint32_t local_comm_id, uint32_t remote_comm_id, uint16_t reason,
                uint8_t msg_ref, const uint8_t* priv, size_t priv_len, uint64_t now);
  void send_dreq(CmId& id, uint64_t now, const uint8_t* priv = nullptr, size_t priv_len = 0);
  void send_drep(CmId& id, uint64_t now, bool remember);
  void stop_timer(CmId& id) { id.deadline_ns = 0; }
  void enter_timewait(CmId& id, uint64_t now);
  void on_req(uint32_t src_ip, uint16_t udp_port, const proto::cm::Message& m, uint64_t now);
  void on_rep(uint32_t src_ip, const proto::cm::Message& m, uint64_t now);
  void on_rtu(uint32_t src_ip, const proto::cm::Message& m, uint64_t now);
  void on_rej(uint32_t src_ip, const proto::cm::Message& m, uint64_t now);
  void on_mra(uint32_t src_ip, const proto::cm::Message& m, uint64_t now);
  void on_dreq(uint32_t src_ip, const proto::cm::Message& m, uint64_t now);
  void on_drep(uint32_t src_ip, const proto::cm::Message& m, uint64_t now);
  void on_sidr_req(uint32_t src_ip, uint16_t udp_port, const proto::cm::Message& m, uint64_t now);
  void on_sidr_rep(uint32_t src_ip, const proto::cm::Message& m, uint64_t now);
  void on_timeout(CmId& id, uint64_t now);
  // cm/admission.cc: which requests a listener takes, and when its program hears of them
  const char* malformed_req(uint32_t src_ip, const proto::cm::Message& m, const proto::cm::CmaHdr& hdr,
                            const CmId& listener) const;
  void drop_malformed(uint32_t src_ip, const proto::cm::Message& m, const char* why, uint64_t now);
  bool admit_request(const CmId& listener, uint32_t src_ip, uint16_t src_port, uint64_t now);
  bool evict_from_largest_source(const CmId& listener, size_t newcomer_holds, uint64_t now);
  size_t requests_from(const CmId& listener, uint32_t ip, uint16_t port) const;
  size_t told_requests(const CmId& listener) const;
  void offer_request(CmId& id, const abi::CmEventMsg& ev);
  void release_held(uint32_t listener_handle);
  // A complaint a flood repeats (forged or malformed requests): written the first time, then at
  // most once a second per `what`, with the count held back. `line` is built only when written.
  template <class MakeLine>
  void log_limited(LogLevel level, const char* what, uint64_t now, MakeLine&& line) {
    uint64_t held = 0;
    if (!log_limiter_.allow(what, now, &held)) return;
    std::string text = line();
    if (held) text += " (" + std::to_string(held) + " more like this since the last report)";
    logger_.log(level, text);
  }
  size_t pending_requests(const CmId& listener) const;
  void trace_mad(TraceKind kind, uint32_t src, uint32_t dst, uint32_t psn, const proto::cm::Message& m,
                 const char* fault);

  CmNicInfo nic_;
  PacketSink& wire_;
  Notifier& notifier_;
  Tracer& tracer_;
  Logger& logger_;
  KeySource keys_;
  std::string refusal_;
  uint32_t next_client_ = 1;
  uint32_t next_handle_ = 1;
  uint32_t gsi_psn_ = 0;
  uint64_t mads_sent_ = 0, mads_received_ = 0;
  uint64_t reqs_malformed_ = 0, reqs_refused_ = 0, reqs_evicted_ = 0;
  std::map<uint32_t, abi::CmEventMsg> held_events_;  // CONNECT_REQUESTs not told yet, by new id
  LogLimiter log_limiter_;
  std::map<uint32_t, Channel> channels_;
  std::map<uint32_t, std::unique_ptr<CmId>> ids_;
  std::vector<uint8_t> tx_;
};

}  // namespace simnic::core
