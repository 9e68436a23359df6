// One rdma_cm id as the connection manager keeps it (CmId), its communication state (CmState)
// and what the agent knows of its own NIC (CmNicInfo): the records the CM's parts share.
#pragma once
#include <array>
#include <cstdint>

#include <infiniband/verbs.h>

#include "simnic/proto/cm_mad.h"

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

// The id's message was answered: nothing is sent again.
inline void stop_timer(CmId& id) { id.deadline_ns = 0; }

// A passive id its program has still to accept or reject: it counts against the listener.
inline bool awaits_answer(CmState s) { return s == CmState::kReqRcvd || s == CmState::kSidrReqRcvd; }

}  // namespace simnic::core
