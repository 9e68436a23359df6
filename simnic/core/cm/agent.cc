// The calls librdmacm makes (abi/cm.h), served by the connection manager's parts. The MAD
// exchange itself is in cm/messages.cc, the id table in cm/id_table.cc.
#include "simnic/core/cm/agent.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "simnic/core/text.h"

namespace simnic::core {

using namespace simnic::proto;

namespace {
// The kernel's defaults (drivers/infiniband/core/cma.c): CMA_CM_RESPONSE_TIMEOUT,
// CMA_MAX_CM_RETRIES and, for RoCE, CMA_IBOE_PACKET_LIFETIME.
constexpr uint8_t kDefaultCmResponseTimeout = 20;
constexpr uint8_t kDefaultMaxCmRetries = 15;
}  // namespace

CmAgent::CmAgent(CmNicInfo nic, PacketSink& wire, Notifier& notifier, Tracer& tracer, Logger& logger)
    : nic_(nic),
      logger_(logger),
      keys_(nic.key_seed ? nic.key_seed ^ 0x5a5a5a5a : 0),
      log_(logger),
      mad_wire_(nic_, keys_, wire, tracer),  // the first key drawn: the GSI QP's first PSN
      ids_(nic_, keys_, tracer, admission_),
      events_(nic_, ids_, notifier, tracer, logger),
      admission_(nic_, ids_, events_, exchange_, log_, tracer),
      exchange_(nic_, keys_, ids_, mad_wire_, events_, admission_, log_, tracer, logger) {}

namespace {
std::string hex_ps(uint16_t ps) {
  char b[8];
  std::snprintf(b, sizeof b, "%x", ps);
  return b;
}
}  // namespace

// --------------------------------------------------------------------- calls from librdmacm

int CmAgent::create_id(uint32_t client, const abi::CmCreateIdReq& req, uint32_t* handle) {
  if (!events_.owns(client, req.channel)) return EINVAL;
  if (req.qp_type != IBV_QPT_RC && req.qp_type != IBV_QPT_UD) return EINVAL;
  size_t mine = 0;
  for (auto& [h, id] : ids_.all()) mine += id->client == client;
  if (mine >= 4096) return ENOMEM;
  *handle = ids_.add(client, req.channel, req.cookie, req.port_space, ibv_qp_type(req.qp_type)).handle;
  return 0;
}

int CmAgent::destroy_id(uint32_t client, uint32_t handle, uint64_t now) {
  CmId* id = ids_.owned(client, handle);
  if (!id) return EINVAL;
  exchange_.abandon(*id, now);
  return 0;
}

void CmAgent::close_client(uint32_t client, uint64_t now) {
  std::vector<uint32_t> mine;
  for (auto& [h, id] : ids_.all())
    if (id->client == client) mine.push_back(h);
  for (uint32_t h : mine)
    if (CmId* id = ids_.find(h)) exchange_.abandon(*id, now);
  events_.close_client(client);
}

int CmAgent::migrate_id(uint32_t client, const abi::CmMigrateReq& req) {
  CmId* id = ids_.owned(client, req.id);
  if (!id || !events_.owns(client, req.channel)) return EINVAL;
  id->channel = req.channel;
  id->cookie = req.cookie;
  return 0;
}

int CmAgent::bind(uint32_t client, const abi::CmBindReq& req, uint16_t* port) {
  CmId* id = ids_.owned(client, req.id);
  if (!id) return EINVAL;
  if (id->state != CmState::kIdle) return refuse(EINVAL, "rdma_bind_addr: the id is already bound");
  uint16_t p = req.port ? req.port : ids_.ephemeral_port(id->ps);
  if (!p) return EADDRNOTAVAIL;
  if (ids_.port_taken(id->ps, p))
    return refuse(EADDRINUSE,
                  "port " + std::to_string(p) + " is already bound in this port space on " + ip_string(nic_.ipv4));
  id->local_port = p;
  ids_.set_state(*id, CmState::kBound, "bind");
  *port = p;
  return 0;
}

int CmAgent::listen(uint32_t client, const abi::CmListenReq& req) {
  CmId* id = ids_.owned(client, req.id);
  if (!id) return EINVAL;
  if (id->state == CmState::kListen) {  // a new backlog: nothing else changes
    id->backlog = listen_backlog(req.backlog);
    admission_.release_held(id->handle);
    return 0;
  }
  if (id->state != CmState::kBound) return refuse(EINVAL, "rdma_listen: bind the id first");
  id->backlog = listen_backlog(req.backlog);
  ids_.set_state(*id, CmState::kListen, "listen");
  // Said once per listener: `simnic logs` shows which ports a NIC serves (and tests wait for it).
  logger_.log(LogLevel::kInfo, "rdma_cm id " + std::to_string(id->handle) + " listening on port " +
                                   std::to_string(id->local_port) + " (port space 0x" + hex_ps(id->ps) + ")");
  return 0;
}

int CmAgent::init_qp_attr(uint32_t client, const abi::CmInitQpAttrReq& req, abi::CmInitQpAttrReply* out) {
  CmId* id = ids_.owned(client, req.id);
  if (!id) return EINVAL;
  *out = {};
  ibv_qp_attr& a = out->attr;
  a.qp_state = ibv_qp_state(req.qp_state);
  if (req.qp_state == IBV_QPS_INIT) {
    a.pkey_index = 0;
    a.port_num = 1;
    out->attr_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    if (id->qp_type == IBV_QPT_UD) {
      a.qkey = abi::kRdmaUdpQkey;
      out->attr_mask |= IBV_QP_QKEY;
    } else {
      a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
      out->attr_mask |= IBV_QP_ACCESS_FLAGS;
    }
    return 0;
  }
  if (id->qp_type == IBV_QPT_UD) {
    out->attr_mask = IBV_QP_STATE | (req.qp_state == IBV_QPS_RTS ? IBV_QP_SQ_PSN : 0);
    a.sq_psn = id->psn;
    return 0;
  }
  if (req.qp_state == IBV_QPS_RTR) {
    if (!id->remote_qpn) return refuse(EINVAL, "rdma_init_qp_attr(RTR): the id has no peer yet");
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.grh.sgid_index = 0;
    const uint32_t ip = id->remote_ip;
    uint8_t* g = a.ah_attr.grh.dgid.raw;
    g[10] = g[11] = 0xff;  // ::ffff:a.b.c.d, the IPv4-mapped GID of RoCE v2
    g[12] = uint8_t(ip >> 24), g[13] = uint8_t(ip >> 16), g[14] = uint8_t(ip >> 8), g[15] = uint8_t(ip);
    a.path_mtu = id->mtu;
    a.dest_qp_num = id->remote_qpn;
    a.rq_psn = id->remote_psn;
    a.max_dest_rd_atomic = id->responder_resources;
    a.min_rnr_timer = 0;  // as the kernel's cm_init_qp_rtr_attr
    out->attr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    return 0;
  }
  if (req.qp_state == IBV_QPS_RTS) {
    a.sq_psn = id->psn;
    a.timeout = id->local_ack_timeout;
    a.retry_cnt = id->retry_count;
    a.rnr_retry = id->rnr_retry_count;
    a.max_rd_atomic = id->initiator_depth;
    out->attr_mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                     IBV_QP_MAX_QP_RD_ATOMIC;
    return 0;
  }
  return EINVAL;
}

// --------------------------------------------------------------------- connection calls

// IBA Table 106: the REQ of an RC connection, its primary path RoCE v2 between the two
// IPv4-mapped GIDs.
void CmAgent::fill_req(CmId& id, const abi::CmConnectReq& req, uint8_t timeout, uint8_t retries, cm::Message* m) {
  m->attr_id = cm::kReq;
  m->local_comm_id = id.local_comm_id;
  m->local_ca_guid = nic_.node_guid_be;
  m->qpn = req.qp_num;
  m->responder_resources = req.responder_resources;
  m->initiator_depth = req.initiator_depth;
  m->remote_cm_response_timeout = timeout;
  m->local_cm_response_timeout = timeout;
  m->flow_control = req.flow_control;
  m->starting_psn = id.psn;
  m->retry_count = id.retry_count;
  m->rnr_retry_count = id.rnr_retry_count;
  m->max_cm_retries = retries;
  m->srq = req.srq;
  m->path_mtu = uint8_t(req.path_mtu && req.path_mtu < uint8_t(nic_.mtu) ? req.path_mtu : uint8_t(nic_.mtu));
  m->local_ack_timeout = id.local_ack_timeout;
  m->hop_limit = 64;
  const uint32_t ips[2] = {nic_.ipv4, req.dst_ip};
  for (int i = 0; i < 2; ++i) {
    uint8_t* g = i == 0 ? m->local_gid : m->remote_gid;
    g[10] = g[11] = 0xff;
    g[12] = uint8_t(ips[i] >> 24), g[13] = uint8_t(ips[i] >> 16), g[14] = uint8_t(ips[i] >> 8), g[15] = uint8_t(ips[i]);
  }
  id.mtu = ibv_mtu(m->path_mtu);
}

int CmAgent::connect(uint32_t client, const abi::CmConnectReq& req, uint64_t now) {
  CmId* id = ids_.owned(client, req.id);
  if (!id) return EINVAL;
  if (id->state != CmState::kIdle && id->state != CmState::kBound)
    return refuse(EINVAL, std::string("rdma_connect: the id is ") + cm_state_name(id->state));
  if (req.private_len > (id->qp_type == IBV_QPT_UD ? 180 : 56)) return EINVAL;
  if (!id->local_port) id->local_port = ids_.ephemeral_port(id->ps);
  id->remote_ip = req.dst_ip;
  id->remote_port = req.dst_port;
  id->local_comm_id = keys_.next() | 1;  // never 0: 0 means "not known yet" in a REJ
  id->tid = uint64_t(id->local_comm_id) << 32 | (keys_.next() & 0xffff);
  id->qpn = req.qp_num;
  id->retry_count = req.retry_count & 7;
  id->rnr_retry_count = req.rnr_retry_count & 7;
  const uint8_t timeout = req.cm_response_timeout ? req.cm_response_timeout : kDefaultCmResponseTimeout;
  const uint8_t retries = req.max_cm_retries ? req.max_cm_retries : kDefaultMaxCmRetries;
  cm::Message m;
  m.tid = id->tid;
  m.service_id = cm::service_id(id->ps, req.dst_port);
  cm::CmaHdr hdr{4, id->local_port, nic_.ipv4, req.dst_ip};
  cm::encode_cma_hdr(hdr, m.private_data);
  std::memcpy(m.private_data + cm::kCmaHdrBytes, req.private_data, req.private_len);
  // IBA 12.7.22: wait 4.096us * 2^timeout (plus twice the packet lifetime) for an answer.
  id->interval_ns = (4096ull << timeout) + 2 * (4096ull << 16);
  id->retries_left = retries;
  if (id->qp_type == IBV_QPT_UD) {
    m.attr_id = cm::kSidrReq;
    m.local_comm_id = id->local_comm_id;
    if (req.timeout_ms) {  // SIDR: the caller's route timeout, as rdma_cm uses it
      id->interval_ns = uint64_t(req.timeout_ms) * 1000000ull;
      id->retries_left = retries < 3 ? retries : 3;
    }
    ids_.set_state(*id, CmState::kSidrReqSent, "rdma_connect");
  } else {
    fill_req(*id, req, timeout, retries, &m);
    ids_.set_state(*id, CmState::kReqSent, "rdma_connect");
  }
  mad_wire_.send(id, req.dst_ip, m, now, true);
  return 0;
}

int CmAgent::accept(uint32_t client, const abi::CmAcceptReq& req, uint64_t now) {
  CmId* id = ids_.owned(client, req.id);
  if (!id) return EINVAL;
  if (req.private_len > 196) return EINVAL;
  cm::Message m;
  m.tid = id->tid;
  if (id->state == CmState::kRepRcvd) {  // the active side completes with RTU (librdmacm's "accept")
    m.attr_id = cm::kRtu;
    m.local_comm_id = id->local_comm_id;
    m.remote_comm_id = id->remote_comm_id;
    std::memcpy(m.private_data, req.private_data, req.private_len);
    stop_timer(*id);
    ids_.set_state(*id, CmState::kEstablished, "RTU sent");
    mad_wire_.send(id, id->remote_ip, m, now, false);
    return 0;
  }
  if (id->state == CmState::kSidrReqRcvd) {
    m.attr_id = cm::kSidrRep;
    m.local_comm_id = id->remote_comm_id;
    m.sidr_status = cm::kSidrSuccess;
    m.qpn = req.qp_num;
    m.qkey = req.qkey ? req.qkey : abi::kRdmaUdpQkey;
    m.service_id = cm::service_id(id->ps, id->local_port);
    std::memcpy(m.private_data, req.private_data, req.private_len);
    ids_.set_state(*id, CmState::kEstablished, "SIDR_REP sent");
    mad_wire_.send(id, id->remote_ip, m, now, false);
    return 0;
  }
  if (id->state != CmState::kReqRcvd)
    return refuse(EINVAL, std::string("rdma_accept: the id is ") + cm_state_name(id->state));
  id->qpn = req.qp_num;
  id->responder_resources = req.responder_resources;
  id->initiator_depth = req.initiator_depth;
  m.attr_id = cm::kRep;
  m.local_comm_id = id->local_comm_id;
  m.remote_comm_id = id->remote_comm_id;
  m.qpn = req.qp_num;
  m.starting_psn = id->psn;
  m.responder_resources = req.responder_resources;
  m.initiator_depth = req.initiator_depth;
  m.target_ack_delay = 15;
  m.flow_control = req.flow_control;
  m.rnr_retry_count = req.rnr_retry_count & 7;
  m.srq = req.srq;
  m.local_ca_guid = nic_.node_guid_be;
  std::memcpy(m.private_data, req.private_data, req.private_len);
  ids_.set_state(*id, CmState::kRepSent, "rdma_accept");
  mad_wire_.send(id, id->remote_ip, m, now, true);
  return 0;
}

int CmAgent::reject(uint32_t client, const abi::CmRejectReq& req, uint64_t now) {
  CmId* id = ids_.owned(client, req.id);
  if (!id) return EINVAL;
  if (id->state == CmState::kSidrReqRcvd) {
    cm::Message m;
    m.attr_id = cm::kSidrRep;
    m.tid = id->tid;
    m.local_comm_id = id->remote_comm_id;
    m.sidr_status = cm::kSidrReject;
    std::memcpy(m.private_data, req.private_data, std::min<size_t>(req.private_len, 136));
    mad_wire_.send(nullptr, id->remote_ip, m, now, false);
    ids_.set_state(*id, CmState::kClosed, "rdma_reject");
    return 0;
  }
  if (id->state != CmState::kReqRcvd && id->state != CmState::kRepRcvd)
    return refuse(EINVAL, std::string("rdma_reject: the id is ") + cm_state_name(id->state));
  if (req.private_len > 148) return EINVAL;
  mad_wire_.send_rej(id->remote_ip, id->tid, id->local_comm_id, id->remote_comm_id, cm::kRejConsumerDefined,
                     id->state == CmState::kRepRcvd ? cm::kRefRep : cm::kRefReq, req.private_data, req.private_len,
                     now);
  stop_timer(*id);
  ids_.set_state(*id, CmState::kClosed, "rdma_reject");
  return 0;
}

int CmAgent::disconnect(uint32_t client, const abi::CmDisconnectReq& req, uint64_t now) {
  CmId* id = ids_.owned(client, req.id);
  if (!id) return EINVAL;
  if (req.private_len > 220) return EINVAL;
  switch (id->state) {
    case CmState::kEstablished:
    case CmState::kRepSent: exchange_.send_dreq(*id, now, req.private_data, req.private_len); return 0;
    case CmState::kDreqRcvd:
      exchange_.send_drep(*id, now, true);
      exchange_.enter_timewait(*id, now);
      return 0;
    case CmState::kDreqSent:
    case CmState::kTimewait:
    case CmState::kClosed: return 0;  // already going or gone
    default:
      return refuse(EINVAL, std::string("rdma_disconnect: the id is ") + cm_state_name(id->state) + ", not connected");
  }
}

}  // namespace simnic::core
