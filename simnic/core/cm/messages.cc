// The CM MAD exchange (IBA 12.6: REQ/REP/RTU to connect, REJ, MRA, DREQ/DREP to disconnect,
// 12.11 SIDR_REQ/SIDR_REP for UD) over the general services interface: UD SEND_ONLY packets to
// QP1 with Q_Key 0x80010000 (IBA 9.6.1.1.3, 13.5.1), retransmitted on the CM response timeout
// (IBA 12.7.22) until answered or out of retries. The packets themselves are built in
// cm/mad_wire.cc.
#include "simnic/core/cm/messages.h"

#include <cerrno>
#include <cstring>
#include <vector>

#include "simnic/core/cm/admission.h"
#include "simnic/core/cm/events.h"
#include "simnic/core/cm/flood_log.h"
#include "simnic/core/cm/id_table.h"
#include "simnic/core/cm/mad_wire.h"
#include "simnic/core/observe/drop_reasons.h"
#include "simnic/core/text.h"
#include "simnic/proto/opcode_table.h"

namespace simnic::core {

using namespace simnic::proto;

namespace {
// Time in TIMEWAIT: the kernel's cm_enter_timewait waits the path's packet lifetime + 1
// (CMA_IBOE_PACKET_LIFETIME 16 for RoCE): 4.096us * 2^17, about half a second.
constexpr uint64_t kTimewaitNs = 4096ull << 17;

const uint8_t* user_data(const cm::Message& m) { return m.private_data + cm::kCmaHdrBytes; }

// An id just created for a request (REQ, SIDR_REQ) that reached `listener`: where the request
// came from (the datagram's address and UDP port, the rdma_cm port of the IP CM header) and
// which of the peer's ids and transactions it answers.
void take_request(CmId& id, const CmId& listener, uint32_t src_ip, uint16_t udp_port, uint16_t src_port,
                  const cm::Message& m) {
  id.listener = listener.handle;
  id.local_port = listener.local_port;
  id.remote_ip = src_ip;
  id.src_udp_port = udp_port;
  id.remote_port = src_port;
  id.remote_comm_id = m.local_comm_id;
  id.tid = m.tid;
}

}  // namespace

void CmExchange::send_dreq(CmId& id, uint64_t now, const uint8_t* priv, size_t priv_len) {
  cm::Message m;
  m.attr_id = cm::kDreq;
  m.tid = id.tid = uint64_t(id.local_comm_id) << 32 | (keys_.next() & 0xffff);
  m.local_comm_id = id.local_comm_id;
  m.remote_comm_id = id.remote_comm_id;
  m.qpn = id.remote_qpn;
  if (priv) std::memcpy(m.private_data, priv, std::min<size_t>(priv_len, 220));
  id.retries_left = 3;
  ids_.set_state(id, CmState::kDreqSent, "DREQ sent");
  wire_.send(&id, id.remote_ip, m, now, true);
}

void CmExchange::send_drep(CmId& id, uint64_t now, bool remember) {
  cm::Message m;
  m.attr_id = cm::kDrep;
  m.tid = id.tid;
  m.local_comm_id = id.local_comm_id;
  m.remote_comm_id = id.remote_comm_id;
  wire_.send(remember ? &id : nullptr, id.remote_ip, m, now, false);
}

void CmExchange::enter_timewait(CmId& id, uint64_t now) {
  ids_.set_state(id, CmState::kTimewait, "timewait");
  id.deadline_ns = now + kTimewaitNs;
}

// What the kernel's ib_destroy_cm_id tells the peer for each state, then the id is gone.
// A listener takes the passive ids nobody accepted with it.
void CmExchange::abandon(CmId& id, uint64_t now) {
  switch (id.state) {
    case CmState::kReqSent:
      wire_.send_rej(id.remote_ip, id.tid, id.local_comm_id, 0, cm::kRejTimeout, cm::kRefReq, nullptr, 0, now);
      break;
    case CmState::kReqRcvd:
    case CmState::kRepSent:
    case CmState::kRepRcvd:
      wire_.send_rej(id.remote_ip, id.tid, id.local_comm_id, id.remote_comm_id, cm::kRejConsumerDefined,
                     id.state == CmState::kRepRcvd ? cm::kRefRep : cm::kRefReq, nullptr, 0, now);
      break;
    case CmState::kEstablished: send_dreq(id, now); break;
    case CmState::kDreqRcvd: send_drep(id, now, false); break;
    case CmState::kSidrReqRcvd: {
      cm::Message m;
      m.attr_id = cm::kSidrRep;
      m.tid = id.tid;
      m.local_comm_id = id.remote_comm_id;
      m.sidr_status = cm::kSidrReject;
      wire_.send(nullptr, id.remote_ip, m, now, false);
      break;
    }
    default: break;
  }
  if (id.state == CmState::kListen) {
    std::vector<uint32_t> children;
    for (auto& [h, c] : ids_.all())
      if (c->listener == id.handle && awaits_answer(c->state)) children.push_back(h);
    for (uint32_t h : children) admission_.forget_held(h);  // none of them is told to the program now
    for (uint32_t h : children)
      if (CmId* c = ids_.find(h)) abandon(*c, now);
  }
  ids_.erase(id.handle);
}

// ------------------------------------------------------------------------- receive

void CmExchange::on_mad(uint32_t src_ip, uint16_t src_port, const ParsedPacket& pkt, uint64_t now) {
  ++mads_received_;
  cm::Message m;
  cm::DecodeError err = pkt.h.bth.opcode != kUdSendOnly   ? cm::DecodeError::kNotCm
                        : pkt.h.deth.qkey != cm::kGsiQkey ? cm::DecodeError::kNotCm
                                                          : cm::decode(pkt.payload, &m);
  if (err != cm::DecodeError::kOk) {
    if (tracer_.on()) trace_drop(tracer_, Drop::kCmNotDecodable, 1, cm::decode_error_name(err));
    return;
  }
  if (tracer_.on())
    tracer_.event(TraceKind::kCmRx)
        .s("cm", cm::attr_name(m.attr_id))
        .ip("src", src_ip)
        .u("local_comm_id", m.local_comm_id)
        .u("remote_comm_id", m.remote_comm_id);
  switch (m.attr_id) {
    case cm::kReq: return on_req(src_ip, src_port, m, now);
    case cm::kRep: return on_rep(src_ip, m, now);
    case cm::kRtu: return on_rtu(src_ip, m, now);
    case cm::kRej: return on_rej(src_ip, m, now);
    case cm::kMra: return on_mra(src_ip, m, now);
    case cm::kDreq: return on_dreq(src_ip, m, now);
    case cm::kDrep: return on_drep(src_ip, m, now);
    case cm::kSidrReq: return on_sidr_req(src_ip, src_port, m, now);
    case cm::kSidrRep: return on_sidr_rep(src_ip, m, now);
    default: return;
  }
}

// IBA 12.6.2: a REQ for a service nobody listens on is rejected with "invalid service ID"
// (reason 8), which rdma_cm reports as RDMA_CM_EVENT_REJECTED, status 8. A malformed REQ is
// dropped, and one the listener has no room for is rejected (cm/admission.cc).
void CmExchange::on_req(uint32_t src_ip, uint16_t udp_port, const cm::Message& m, uint64_t now) {
  if (CmId* dup = ids_.find_by_remote(m.local_comm_id, src_ip)) {  // IBA 12.9.7: a duplicate REQ
    if (dup->state == CmState::kRepSent) {
      cm::Message rep;
      cm::decode(dup->last_mad, &rep);
      wire_.send(nullptr, src_ip, rep, now, false);
    }
    return;
  }
  cm::CmaHdr hdr;
  CmId* listener = ids_.find_listener(cm::service_port_space(m.service_id), cm::service_port(m.service_id));
  if (!listener || !cm::decode_cma_hdr(m.private_data, &hdr)) {
    log_.log(LogLevel::kInfo, "cm_no_listener", now, [&] {
      return "rejected a REQ from " + ip_string(src_ip) + " for service ID " + hex(m.service_id) +
             ": nobody listens on port " + std::to_string(cm::service_port(m.service_id));
    });
    wire_.send_rej(src_ip, m.tid, keys_.next() | 1, m.local_comm_id, cm::kRejInvalidServiceId, cm::kRefReq, nullptr, 0,
                   now);
    return;
  }
  if (const char* why = admission_.malformed_req(src_ip, m, hdr, *listener))
    return admission_.drop_malformed(src_ip, m, why, now);
  if (!admission_.admit_request(*listener, src_ip, udp_port, now)) {  // a REQ flood must not fill the NIC
    wire_.send_rej(src_ip, m.tid, keys_.next() | 1, m.local_comm_id, cm::kRejConsumerDefined, cm::kRefReq, nullptr, 0,
                   now);
    return;
  }
  CmId& id = ids_.add(listener->client, listener->channel, listener->cookie, listener->ps, IBV_QPT_RC);
  take_request(id, *listener, src_ip, udp_port, hdr.src_port, m);
  id.local_comm_id = keys_.next() | 1;
  id.remote_qpn = m.qpn;
  id.remote_psn = m.starting_psn;
  id.responder_resources = m.initiator_depth;  // seen from this side (kernel cma_set_req_event_data)
  id.initiator_depth = m.responder_resources;
  id.retry_count = m.retry_count;
  id.rnr_retry_count = m.rnr_retry_count;
  id.mtu = m.path_mtu < uint8_t(nic_.mtu) ? ibv_mtu(m.path_mtu) : nic_.mtu;
  id.interval_ns = (4096ull << m.remote_cm_response_timeout) + 2 * (4096ull << 16);
  id.retries_left = m.max_cm_retries;
  ids_.set_state(id, CmState::kReqRcvd, "REQ received");
  abi::CmEventMsg ev = events_.event_for(id, abi::kCmConnectRequest);
  ev.new_id = id.handle;
  ev.cookie = listener->cookie;
  ev.flow_control = m.flow_control;
  ev.srq = m.srq;
  ev.private_len = uint8_t(cm::private_data_size(cm::kReq) - cm::kCmaHdrBytes);
  std::memcpy(ev.private_data, user_data(m), ev.private_len);
  admission_.offer_request(id, ev);
}

void CmExchange::on_rep(uint32_t src_ip, const cm::Message& m, uint64_t now) {
  CmId* id = ids_.find_by_local_comm_id(m.remote_comm_id);
  if (!id || id->remote_ip != src_ip) return;
  if (id->state == CmState::kEstablished && id->last_attr == cm::kRtu) {  // our RTU was lost
    cm::Message rtu;
    cm::decode(id->last_mad, &rtu);
    wire_.send(nullptr, src_ip, rtu, now, false);
    return;
  }
  if (id->state != CmState::kReqSent) return;
  stop_timer(*id);
  id->remote_comm_id = m.local_comm_id;
  id->remote_qpn = m.qpn;
  id->remote_psn = m.starting_psn;
  id->responder_resources = m.initiator_depth;
  id->initiator_depth = m.responder_resources;
  id->rnr_retry_count = m.rnr_retry_count;
  ids_.set_state(*id, CmState::kRepRcvd, "REP received");
  abi::CmEventMsg ev = events_.event_for(*id, abi::kCmConnectResponse);
  ev.flow_control = m.flow_control;
  ev.srq = m.srq;
  ev.private_len = uint8_t(cm::private_data_size(cm::kRep));
  std::memcpy(ev.private_data, m.private_data, ev.private_len);
  events_.deliver(*id, ev);
}

void CmExchange::on_rtu(uint32_t src_ip, const cm::Message& m, uint64_t) {
  CmId* id = ids_.find_by_local_comm_id(m.remote_comm_id);
  if (!id || id->remote_ip != src_ip || id->state != CmState::kRepSent) return;
  stop_timer(*id);
  ids_.set_state(*id, CmState::kEstablished, "RTU received");
  abi::CmEventMsg ev = events_.event_for(*id, abi::kCmEstablished);
  ev.private_len = uint8_t(cm::private_data_size(cm::kRtu));
  std::memcpy(ev.private_data, m.private_data, ev.private_len);
  events_.deliver(*id, ev);
}

// The kernel's cma reports every REJ as RDMA_CM_EVENT_REJECTED with the reason as status.
void CmExchange::on_rej(uint32_t src_ip, const cm::Message& m, uint64_t) {
  CmId* id = ids_.find_by_local_comm_id(m.remote_comm_id);
  if (!id || id->remote_ip != src_ip) return;
  if (id->state != CmState::kReqSent && id->state != CmState::kRepSent && id->state != CmState::kRepRcvd &&
      id->state != CmState::kReqRcvd)
    return;
  stop_timer(*id);
  if (id->held) return ids_.erase(id->handle);  // the program never heard of it: nothing to say
  const bool passive_waiting = id->state == CmState::kReqRcvd;
  ids_.set_state(*id, CmState::kClosed, "REJ received");
  if (passive_waiting) return;  // the program has not accepted: the kernel says nothing either
  abi::CmEventMsg ev = events_.event_for(*id, abi::kCmRejected, m.reason);
  ev.private_len = uint8_t(cm::private_data_size(cm::kRej));
  std::memcpy(ev.private_data, m.private_data, ev.private_len);
  events_.deliver(*id, ev);
}

// IBA 12.6.6: the peer needs longer; wait its service timeout before sending again.
void CmExchange::on_mra(uint32_t src_ip, const cm::Message& m, uint64_t now) {
  CmId* id = ids_.find_by_local_comm_id(m.remote_comm_id);
  if (!id || id->remote_ip != src_ip || !id->deadline_ns) return;
  id->deadline_ns = now + (4096ull << (m.service_timeout & 31)) + id->interval_ns;
}

void CmExchange::on_dreq(uint32_t src_ip, const cm::Message& m, uint64_t now) {
  CmId* id = ids_.find_by_local_comm_id(m.remote_comm_id);
  if (!id || id->remote_ip != src_ip || id->remote_comm_id != m.local_comm_id) {
    // IBA 12.9.6: a DREQ for a connection we no longer have still gets its DREP.
    cm::Message drep;
    drep.attr_id = cm::kDrep;
    drep.tid = m.tid;
    drep.local_comm_id = m.remote_comm_id;
    drep.remote_comm_id = m.local_comm_id;
    wire_.send(nullptr, src_ip, drep, now, false);
    return;
  }
  id->tid = m.tid;
  switch (id->state) {
    case CmState::kTimewait: send_drep(*id, now, false); return;
    case CmState::kDreqSent:  // both sides disconnected at once: answer and wait
      stop_timer(*id);
      send_drep(*id, now, false);
      enter_timewait(*id, now);
      events_.deliver(*id, events_.event_for(*id, abi::kCmDisconnected));
      return;
    case CmState::kEstablished:
    case CmState::kRepSent:
      stop_timer(*id);
      ids_.set_state(*id, CmState::kDreqRcvd, "DREQ received");
      events_.deliver(*id, events_.event_for(*id, abi::kCmDisconnected));
      return;
    default: return;
  }
}

void CmExchange::on_drep(uint32_t src_ip, const cm::Message& m, uint64_t now) {
  CmId* id = ids_.find_by_local_comm_id(m.remote_comm_id);
  if (!id || id->remote_ip != src_ip || id->state != CmState::kDreqSent) return;
  stop_timer(*id);
  enter_timewait(*id, now);
  events_.deliver(*id, events_.event_for(*id, abi::kCmDisconnected));
}

// IBA 12.11.1: SIDR_REQ asks which UD QP serves a service ID; no listener: "unsupported".
void CmExchange::on_sidr_req(uint32_t src_ip, uint16_t udp_port, const cm::Message& m, uint64_t now) {
  cm::CmaHdr hdr;
  CmId* listener = ids_.find_listener(cm::service_port_space(m.service_id), cm::service_port(m.service_id));
  if (!listener || listener->qp_type != IBV_QPT_UD || !cm::decode_cma_hdr(m.private_data, &hdr)) {
    cm::Message rep;
    rep.attr_id = cm::kSidrRep;
    rep.tid = m.tid;
    rep.local_comm_id = m.local_comm_id;
    rep.service_id = m.service_id;
    rep.sidr_status = cm::kSidrUnsupported;
    wire_.send(nullptr, src_ip, rep, now, false);
    return;
  }
  for (auto& [h, other] : ids_.all())  // a retransmitted SIDR_REQ is already being handled
    if (other->listener == listener->handle && other->remote_ip == src_ip && other->remote_comm_id == m.local_comm_id)
      return;
  if (!admission_.admit_request(*listener, src_ip, udp_port, now)) return;
  CmId& id = ids_.add(listener->client, listener->channel, listener->cookie, listener->ps, IBV_QPT_UD);
  take_request(id, *listener, src_ip, udp_port, hdr.src_port, m);
  ids_.set_state(id, CmState::kSidrReqRcvd, "SIDR_REQ received");
  abi::CmEventMsg ev = events_.event_for(id, abi::kCmConnectRequest);
  ev.new_id = id.handle;
  ev.private_len = uint8_t(cm::private_data_size(cm::kSidrReq) - cm::kCmaHdrBytes);
  std::memcpy(ev.private_data, user_data(m), ev.private_len);
  admission_.offer_request(id, ev);
}

void CmExchange::on_sidr_rep(uint32_t src_ip, const cm::Message& m, uint64_t) {
  CmId* id = ids_.find_by_local_comm_id(m.local_comm_id);
  if (!id || id->remote_ip != src_ip || id->state != CmState::kSidrReqSent) return;
  stop_timer(*id);
  if (m.sidr_status != cm::kSidrSuccess) {
    ids_.set_state(*id, CmState::kClosed, "SIDR_REP refused");
    abi::CmEventMsg ev = events_.event_for(*id, abi::kCmUnreachable, m.sidr_status);
    ev.private_len = uint8_t(cm::private_data_size(cm::kSidrRep));
    std::memcpy(ev.private_data, m.private_data, ev.private_len);
    events_.deliver(*id, ev);
    return;
  }
  id->remote_qpn = m.qpn;
  id->remote_qkey = m.qkey;
  ids_.set_state(*id, CmState::kEstablished, "SIDR_REP received");
  abi::CmEventMsg ev = events_.event_for(*id, abi::kCmEstablished);
  ev.private_len = uint8_t(cm::private_data_size(cm::kSidrRep));
  std::memcpy(ev.private_data, m.private_data, ev.private_len);
  events_.deliver(*id, ev);
}

// ------------------------------------------------------------------------- timers

uint64_t CmExchange::next_deadline() const {
  uint64_t best = 0;
  for (const auto& [h, id] : ids_.all())
    if (id->deadline_ns && (!best || id->deadline_ns < best)) best = id->deadline_ns;
  return best;
}

void CmExchange::on_timer(uint64_t now) {
  std::vector<uint32_t> due;
  for (auto& [h, id] : ids_.all())
    if (id->deadline_ns && id->deadline_ns <= now) due.push_back(h);
  for (uint32_t h : due) {
    if (CmId* id = ids_.find(h)) on_timeout(*id, now);
  }
}

// IBA 12.7.22/12.7.33: send again while retries are left; then give up as the kernel's cma
// reports it: UNREACHABLE (-ETIMEDOUT) for REQ, REP and SIDR_REQ, DISCONNECTED for DREQ.
void CmExchange::on_timeout(CmId& id, uint64_t now) {
  id.deadline_ns = 0;
  if (id.state == CmState::kTimewait) {
    ids_.set_state(id, CmState::kClosed, "timewait over");
    events_.deliver(id, events_.event_for(id, abi::kCmTimewaitExit));
    return;
  }
  if (id.retries_left > 0) {
    --id.retries_left;
    cm::Message m;
    cm::decode(id.last_mad, &m);
    tracer_.event(TraceKind::kTimer)
        .s("what", "cm_response_timeout")
        .u("id", id.handle)
        .s("action", "resend")
        .s("cm", cm::attr_name(m.attr_id))
        .u("retries_left", id.retries_left);
    wire_.send(&id, id.remote_ip, m, now, true);
    return;
  }
  logger_.log(LogLevel::kInfo, std::string("rdma_cm: no answer from ") + ip_string(id.remote_ip) + " to " +
                                   cm::attr_name(id.last_attr) + " after the last retry (" + cm_state_name(id.state) +
                                   ")");
  const CmState was = id.state;
  if (was == CmState::kDreqSent) {
    enter_timewait(id, now);
    events_.deliver(id, events_.event_for(id, abi::kCmDisconnected));
    return;
  }
  ids_.set_state(id, CmState::kClosed, "CM response timeout");
  if (was == CmState::kReqSent || was == CmState::kRepSent || was == CmState::kSidrReqSent)
    events_.deliver(id, events_.event_for(id, abi::kCmUnreachable, -ETIMEDOUT));
}

}  // namespace simnic::core
