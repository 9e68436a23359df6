// The connection manager's ids, ports and the calls librdmacm makes (abi/cm.h). The MAD
// exchange itself is in cm/messages.cc.
#include "simnic/core/cm/agent.h"

#include <cerrno>
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

const char* cm_state_name(CmState s) {
  static const char* kNames[] = {"IDLE",     "BOUND",         "LISTEN",        "REQ_SENT",  "REP_RCVD",
                                 "REQ_RCVD", "REP_SENT",      "ESTABLISHED",   "DREQ_SENT", "DREQ_RCVD",
                                 "TIMEWAIT", "SIDR_REQ_SENT", "SIDR_REQ_RCVD", "CLOSED"};
  return kNames[int(s)];
}

CmAgent::CmAgent(CmNicInfo nic, PacketSink& wire, Notifier& notifier, Tracer& tracer, Logger& logger)
    : nic_(nic),
      wire_(wire),
      notifier_(notifier),
      tracer_(tracer),
      logger_(logger),
      keys_(nic.key_seed ? nic.key_seed ^ 0x5a5a5a5a : 0) {
  gsi_psn_ = keys_.next() & 0xffffff;
  tx_.resize(512);
}

CmAgent::~CmAgent() {
  for (auto& [h, ch] : channels_) notifier_.release_fd(ch.fd);
}

CmId* CmAgent::owned(uint32_t client, uint32_t handle) {
  auto it = ids_.find(handle);
  return it == ids_.end() || it->second->client != client ? nullptr : it->second.get();
}

CmId* CmAgent::find_by_local_comm_id(uint32_t comm_id) {
  for (auto& [h, id] : ids_)
    if (id->local_comm_id == comm_id && id->state != CmState::kListen) return id.get();
  return nullptr;
}

CmId* CmAgent::find_by_remote(uint32_t remote_comm_id, uint32_t remote_ip) {
  for (auto& [h, id] : ids_)
    if (id->remote_comm_id == remote_comm_id && id->remote_ip == remote_ip && id->listener) return id.get();
  return nullptr;
}

namespace {
std::string hex_ps(uint16_t ps) {
  char b[8];
  std::snprintf(b, sizeof b, "%x", ps);
  return b;
}
}  // namespace

CmId* CmAgent::find_listener(uint16_t ps, uint16_t port) {
  for (auto& [h, id] : ids_)
    if (id->state == CmState::kListen && id->ps == ps && id->local_port == port) return id.get();
  return nullptr;
}

// A port is taken by any id bound to it in the same port space, except the passive ids a
// listener created (they share its port, as accepted TCP sockets do).
bool CmAgent::port_taken(uint16_t ps, uint16_t port) const {
  for (const auto& [h, id] : ids_)
    if (id->ps == ps && id->local_port == port && !id->listener) return true;
  return false;
}

// Like the kernel's cma_alloc_any_port: a random start in the local port range, then onwards.
uint16_t CmAgent::ephemeral_port(uint16_t ps) {
  constexpr uint32_t kLow = 32768, kCount = 61000 - 32768;
  uint32_t start = keys_.next() % kCount;
  for (uint32_t i = 0; i < kCount; ++i) {
    uint16_t p = uint16_t(kLow + (start + i) % kCount);
    if (!port_taken(ps, p)) return p;
  }
  return 0;
}

CmId& CmAgent::add_id(uint32_t client, uint32_t channel, uint64_t cookie, uint16_t ps, ibv_qp_type type) {
  auto id = std::make_unique<CmId>();
  id->handle = next_handle_++;
  id->client = client;
  id->channel = channel;
  id->cookie = cookie;
  id->ps = ps;
  id->qp_type = type;
  id->psn = keys_.next() & 0xffffff;  // a random starting PSN, as the kernel's cma
  id->mtu = nic_.mtu;
  CmId& ref = *id;
  ids_[ref.handle] = std::move(id);
  tracer_.event(TraceKind::kCmId)
      .u("id", ref.handle)
      .s("action", "create")
      .u("ps", ps)
      .s("qp_type", type == IBV_QPT_UD ? "UD" : "RC");
  return ref;
}

namespace {
// A passive id its program has still to accept or reject: it counts against the listener.
bool awaits_answer(CmState s) { return s == CmState::kReqRcvd || s == CmState::kSidrReqRcvd; }
}  // namespace

// An answered (or vanished) request makes room in the listener's backlog for a held one.
void CmAgent::erase_id(uint32_t handle) {
  tracer_.event(TraceKind::kCmId).u("id", handle).s("action", "destroy");
  auto it = ids_.find(handle);
  const uint32_t listener = it != ids_.end() && awaits_answer(it->second->state) ? it->second->listener : 0;
  held_events_.erase(handle);
  ids_.erase(handle);
  if (listener) release_held(listener);
}

void CmAgent::set_state(CmId& id, CmState s, const char* cause) {
  if (id.state == s) return;
  tracer_.event(TraceKind::kCmState)
      .u("id", id.handle)
      .s("from", cm_state_name(id.state))
      .s("to", cm_state_name(s))
      .s("cause", cause)
      .u("local_comm_id", id.local_comm_id)
      .u("remote_comm_id", id.remote_comm_id);
  const bool answered = id.listener && awaits_answer(id.state) && !awaits_answer(s);
  id.state = s;
  if (answered) release_held(id.listener);
}

abi::CmEventMsg CmAgent::event_for(const CmId& id, uint32_t type, int32_t status) const {
  abi::CmEventMsg ev{};
  ev.cookie = id.cookie;
  ev.event = type;
  ev.status = status;
  ev.nic_ip = nic_.ipv4;
  ev.local_ip = nic_.ipv4;
  ev.remote_ip = id.remote_ip;
  ev.local_port = id.local_port;
  ev.remote_port = id.remote_port;
  ev.qp_num = id.remote_qpn;
  ev.qkey = id.remote_qkey;
  ev.responder_resources = id.responder_resources;
  ev.initiator_depth = id.initiator_depth;
  ev.retry_count = id.retry_count;
  ev.rnr_retry_count = id.rnr_retry_count;
  return ev;
}

void CmAgent::deliver(const CmId& id, abi::CmEventMsg ev) {
  static const char* kNames[] = {"ADDR_RESOLVED",   "ADDR_ERROR",       "ROUTE_RESOLVED", "ROUTE_ERROR",
                                 "CONNECT_REQUEST", "CONNECT_RESPONSE", "CONNECT_ERROR",  "UNREACHABLE",
                                 "REJECTED",        "ESTABLISHED",      "DISCONNECTED",   "DEVICE_REMOVAL",
                                 "MULTICAST_JOIN",  "MULTICAST_ERROR",  "ADDR_CHANGE",    "TIMEWAIT_EXIT"};
  tracer_.event(TraceKind::kCmEvent)
      .u("id", id.handle)
      .s("event", ev.event < 16 ? kNames[ev.event] : "?")
      .i("status", ev.status);
  auto ch = channels_.find(id.channel);
  if (ch == channels_.end()) return;
  if (!notifier_.send_event(ch->second.fd, &ev, sizeof ev))
    logger_.log(LogLevel::kWarn, "rdma_cm id " + std::to_string(id.handle) +
                                     ": an event was lost (the program does "
                                     "not read its event channel)");
}

// --------------------------------------------------------------------- calls from librdmacm

int CmAgent::attach_channel(uint32_t client, int fd, uint32_t* handle) {
  size_t mine = 0;
  for (auto& [h, ch] : channels_) mine += ch.client == client;
  if (mine >= 1024) {
    notifier_.release_fd(fd);
    return ENOMEM;
  }
  *handle = next_handle_++;
  channels_[*handle] = Channel{client, fd};
  return 0;
}

int CmAgent::create_id(uint32_t client, const abi::CmCreateIdReq& req, uint32_t* handle) {
  auto ch = channels_.find(req.channel);
  if (ch == channels_.end() || ch->second.client != client) return EINVAL;
  if (req.qp_type != IBV_QPT_RC && req.qp_type != IBV_QPT_UD) return EINVAL;
  size_t mine = 0;
  for (auto& [h, id] : ids_) mine += id->client == client;
  if (mine >= 4096) return ENOMEM;
  *handle = add_id(client, req.channel, req.cookie, req.port_space, ibv_qp_type(req.qp_type)).handle;
  return 0;
}

int CmAgent::destroy_id(uint32_t client, uint32_t handle, uint64_t now) {
  CmId* id = owned(client, handle);
  if (!id) return EINVAL;
  abandon(*id, now);
  return 0;
}

// What the kernel's ib_destroy_cm_id tells the peer for each state, then the id is gone.
// A listener takes the passive ids nobody accepted with it.
void CmAgent::abandon(CmId& id, uint64_t now) {
  switch (id.state) {
    case CmState::kReqSent:
      send_rej(id.remote_ip, id.tid, id.local_comm_id, 0, cm::kRejTimeout, cm::kRefReq, nullptr, 0, now);
      break;
    case CmState::kReqRcvd:
    case CmState::kRepSent:
    case CmState::kRepRcvd:
      send_rej(id.remote_ip, id.tid, id.local_comm_id, id.remote_comm_id, cm::kRejConsumerDefined,
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
      send_mad(nullptr, id.remote_ip, m, now, false);
      break;
    }
    default: break;
  }
  if (id.state == CmState::kListen) {
    std::vector<uint32_t> children;
    for (auto& [h, c] : ids_)
      if (c->listener == id.handle && (c->state == CmState::kReqRcvd || c->state == CmState::kSidrReqRcvd))
        children.push_back(h);
    for (uint32_t h : children) {  // none of them is told to the program now
      ids_[h]->held = false;
      held_events_.erase(h);
    }
    for (uint32_t h : children) abandon(*ids_[h], now);
  }
  erase_id(id.handle);
}

void CmAgent::close_client(uint32_t client, uint64_t now) {
  std::vector<uint32_t> mine;
  for (auto& [h, id] : ids_)
    if (id->client == client) mine.push_back(h);
  for (uint32_t h : mine)
    if (ids_.count(h)) abandon(*ids_[h], now);
  for (auto it = channels_.begin(); it != channels_.end();) {
    if (it->second.client != client) {
      ++it;
      continue;
    }
    notifier_.release_fd(it->second.fd);
    it = channels_.erase(it);
  }
}

int CmAgent::migrate_id(uint32_t client, const abi::CmMigrateReq& req) {
  CmId* id = owned(client, req.id);
  auto ch = channels_.find(req.channel);
  if (!id || ch == channels_.end() || ch->second.client != client) return EINVAL;
  id->channel = req.channel;
  id->cookie = req.cookie;
  return 0;
}

int CmAgent::bind(uint32_t client, const abi::CmBindReq& req, uint16_t* port) {
  CmId* id = owned(client, req.id);
  if (!id) return EINVAL;
  if (id->state != CmState::kIdle) return refuse(EINVAL, "rdma_bind_addr: the id is already bound");
  uint16_t p = req.port ? req.port : ephemeral_port(id->ps);
  if (!p) return EADDRNOTAVAIL;
  if (port_taken(id->ps, p))
    return refuse(EADDRINUSE,
                  "port " + std::to_string(p) + " is already bound in this port space on " + ip_string(nic_.ipv4));
  id->local_port = p;
  set_state(*id, CmState::kBound, "bind");
  *port = p;
  return 0;
}

int CmAgent::listen(uint32_t client, const abi::CmListenReq& req) {
  CmId* id = owned(client, req.id);
  if (!id) return EINVAL;
  if (id->state == CmState::kListen) {  // a new backlog: nothing else changes
    id->backlog = listen_backlog(req.backlog);
    release_held(id->handle);
    return 0;
  }
  if (id->state != CmState::kBound) return refuse(EINVAL, "rdma_listen: bind the id first");
  id->backlog = listen_backlog(req.backlog);
  set_state(*id, CmState::kListen, "listen");
  // Said once per listener: `simnic logs` shows which ports a NIC serves (and tests wait for it).
  logger_.log(LogLevel::kInfo, "rdma_cm id " + std::to_string(id->handle) + " listening on port " +
                                   std::to_string(id->local_port) + " (port space 0x" + hex_ps(id->ps) + ")");
  return 0;
}

int CmAgent::init_qp_attr(uint32_t client, const abi::CmInitQpAttrReq& req, abi::CmInitQpAttrReply* out) {
  CmId* id = owned(client, req.id);
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
  CmId* id = owned(client, req.id);
  if (!id) return EINVAL;
  if (id->state != CmState::kIdle && id->state != CmState::kBound)
    return refuse(EINVAL, std::string("rdma_connect: the id is ") + cm_state_name(id->state));
  if (req.private_len > (id->qp_type == IBV_QPT_UD ? 180 : 56)) return EINVAL;
  if (!id->local_port) id->local_port = ephemeral_port(id->ps);
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
    set_state(*id, CmState::kSidrReqSent, "rdma_connect");
  } else {
    fill_req(*id, req, timeout, retries, &m);
    set_state(*id, CmState::kReqSent, "rdma_connect");
  }
  send_mad(id, req.dst_ip, m, now, true);
  return 0;
}

int CmAgent::accept(uint32_t client, const abi::CmAcceptReq& req, uint64_t now) {
  CmId* id = owned(client, req.id);
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
    set_state(*id, CmState::kEstablished, "RTU sent");
    send_mad(id, id->remote_ip, m, now, false);
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
    set_state(*id, CmState::kEstablished, "SIDR_REP sent");
    send_mad(id, id->remote_ip, m, now, false);
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
  set_state(*id, CmState::kRepSent, "rdma_accept");
  send_mad(id, id->remote_ip, m, now, true);
  return 0;
}

int CmAgent::reject(uint32_t client, const abi::CmRejectReq& req, uint64_t now) {
  CmId* id = owned(client, req.id);
  if (!id) return EINVAL;
  if (id->state == CmState::kSidrReqRcvd) {
    cm::Message m;
    m.attr_id = cm::kSidrRep;
    m.tid = id->tid;
    m.local_comm_id = id->remote_comm_id;
    m.sidr_status = cm::kSidrReject;
    std::memcpy(m.private_data, req.private_data, std::min<size_t>(req.private_len, 136));
    send_mad(nullptr, id->remote_ip, m, now, false);
    set_state(*id, CmState::kClosed, "rdma_reject");
    return 0;
  }
  if (id->state != CmState::kReqRcvd && id->state != CmState::kRepRcvd)
    return refuse(EINVAL, std::string("rdma_reject: the id is ") + cm_state_name(id->state));
  if (req.private_len > 148) return EINVAL;
  send_rej(id->remote_ip, id->tid, id->local_comm_id, id->remote_comm_id, cm::kRejConsumerDefined,
           id->state == CmState::kRepRcvd ? cm::kRefRep : cm::kRefReq, req.private_data, req.private_len, now);
  stop_timer(*id);
  set_state(*id, CmState::kClosed, "rdma_reject");
  return 0;
}

int CmAgent::disconnect(uint32_t client, const abi::CmDisconnectReq& req, uint64_t now) {
  CmId* id = owned(client, req.id);
  if (!id) return EINVAL;
  if (req.private_len > 220) return EINVAL;
  switch (id->state) {
    case CmState::kEstablished:
    case CmState::kRepSent: send_dreq(*id, now, req.private_data, req.private_len); return 0;
    case CmState::kDreqRcvd:
      send_drep(*id, now, true);
      enter_timewait(*id, now);
      return 0;
    case CmState::kDreqSent:
    case CmState::kTimewait:
    case CmState::kClosed: return 0;  // already going or gone
    default:
      return refuse(EINVAL, std::string("rdma_disconnect: the id is ") + cm_state_name(id->state) + ", not connected");
  }
}

}  // namespace simnic::core
