// rdma_get_cm_event: one message from the channel's socket (a NIC's CmEventMsg, or one
// librdmacm posted itself), turned into an rdma_cm_event. A CONNECT_REQUEST makes the new id;
// a CONNECT_RESPONSE moves the QP to RTS and completes with RTU (ESTABLISHED), as librdmacm's
// ucma_process_conn_resp does.
#include <arpa/inet.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "rdmacm/cma.h"

namespace simnic::rdmacm {
namespace {

static_assert(int(abi::kCmTimewaitExit) == int(RDMA_CM_EVENT_TIMEWAIT_EXIT) &&
              int(abi::kCmConnectRequest) == int(RDMA_CM_EVENT_CONNECT_REQUEST));

Nic* nic_of_listener(CmaId* listener, uint32_t nic_ip) {
  if (listener->nic && listener->nic->ipv4 == nic_ip) return listener->nic;
  for (auto& [nic, h] : listener->listeners)
    if (nic->ipv4 == nic_ip) return nic;
  return nullptr;
}

void copy_conn(CmaEvent* e, const abi::CmEventMsg& m) {
  rdma_conn_param& c = e->event.param.conn;
  c.private_data = m.private_len ? e->private_data : nullptr;
  c.private_data_len = m.private_len;
  c.responder_resources = m.responder_resources;
  c.initiator_depth = m.initiator_depth;
  c.flow_control = m.flow_control;
  c.retry_count = m.retry_count;
  c.rnr_retry_count = m.rnr_retry_count;
  c.srq = m.srq;
  c.qp_num = m.qp_num;
}

// The address handle attributes of the peer: RoCE v2, its IPv4-mapped GID, GID index 0.
void copy_ud(CmaEvent* e, const abi::CmEventMsg& m) {
  rdma_ud_param& u = e->event.param.ud;
  u.private_data = m.private_len ? e->private_data : nullptr;
  u.private_data_len = m.private_len;
  u.qp_num = m.qp_num;
  u.qkey = m.qkey;
  u.ah_attr.is_global = 1;
  u.ah_attr.port_num = 1;
  u.ah_attr.grh.hop_limit = 64;
  u.ah_attr.grh.sgid_index = 0;
  gid_of(m.remote_ip, &u.ah_attr.grh.dgid);
}

// A new id for a connection request, on the NIC and channel of the listener.
CmaId* new_passive_id(CmaId* listener, const abi::CmEventMsg& m) {
  Nic* nic = nic_of_listener(listener, m.nic_ip);
  if (!nic) return nullptr;
  rdma_cm_id* raw = nullptr;
  if (rdma_create_id(listener->id.channel, &raw, listener->id.context, listener->id.ps)) return nullptr;
  auto* p = reinterpret_cast<CmaId*>(raw);
  p->nic = nic;
  p->handle = m.new_id;
  p->port = m.local_port;
  raw->verbs = nic->verbs;
  raw->pd = nic->pd;
  raw->port_num = 1;
  set_sin(&raw->route.addr.src_sin, m.local_ip, m.local_port);
  set_sin(&raw->route.addr.dst_sin, m.remote_ip, m.remote_port);
  gid_of(m.local_ip, &raw->route.addr.addr.ibaddr.sgid);
  gid_of(m.remote_ip, &raw->route.addr.addr.ibaddr.dgid);
  raw->route.addr.addr.ibaddr.pkey = 0xffff;
  p->initiator_depth = m.initiator_depth;
  p->responder_resources = m.responder_resources;
  // The NIC tells this id's events to the listener's cookie until told otherwise.
  abi::CmMigrateReq mig{m.new_id, 0, p->cookie};
  for (auto& [n, h] : listener->channel()->attached)
    if (n == nic) mig.channel = h;
  if (nic_call(nic, abi::Op::CmMigrateId, &mig, sizeof mig, nullptr, 0)) {
    rdma_destroy_id(raw);
    return nullptr;
  }
  if (listener->sync && rdma_migrate_id(raw, nullptr)) {  // as ucma_process_conn_req
    rdma_destroy_id(raw);
    return nullptr;
  }
  return p;
}

// The active side's REP arrived: RTR, RTS, then RTU. Returns the event the program sees.
void process_conn_resp(CmaEvent* e) {
  CmaId* p = e->id_priv;
  if (!p->id.qp) return;  // the program calls rdma_establish itself
  int err = modify_qp_to(p, IBV_QPS_RTR, -1);
  if (!err) err = modify_qp_to(p, IBV_QPS_RTS, -1);
  if (!err) {
    abi::CmAcceptReq req{};
    req.id = p->handle;
    err = nic_call(p->nic, abi::Op::CmAccept, &req, sizeof req, nullptr, 0);
  }
  if (err) {
    modify_qp_err(p);
    rdma_reject(&p->id, nullptr, 0);
    p->connect_error = true;
    e->event.event = RDMA_CM_EVENT_CONNECT_ERROR;
    e->event.status = -err;
    return;
  }
  e->event.event = RDMA_CM_EVENT_ESTABLISHED;
}

// Fills *e from m; false when the event is for no live id and is dropped.
bool process(CmaEvent* e, const abi::CmEventMsg& m) {
  e->id_priv = lookup_id(m.cookie);
  if (!e->id_priv) return false;
  std::memcpy(e->private_data, m.private_data, sizeof e->private_data);
  e->event.id = &e->id_priv->id;
  e->event.event = rdma_cm_event_type(m.event);
  e->event.status = m.status;
  const bool ud = e->id_priv->id.qp_type == IBV_QPT_UD;
  switch (m.event) {
    case RDMA_CM_EVENT_CONNECT_REQUEST: {
      CmaId* child = new_passive_id(e->id_priv, m);
      if (!child) return false;
      e->event.listen_id = &e->id_priv->id;
      e->event.id = &child->id;
      ud ? copy_ud(e, m) : copy_conn(e, m);
      e->id_priv = child;
      return true;
    }
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      copy_conn(e, m);
      process_conn_resp(e);
      return true;
    case RDMA_CM_EVENT_ESTABLISHED: ud ? copy_ud(e, m) : copy_conn(e, m); return true;
    case RDMA_CM_EVENT_REJECTED:
      if (e->id_priv->connect_error) return false;
      copy_conn(e, m);
      modify_qp_err(e->id_priv);
      return true;
    case RDMA_CM_EVENT_UNREACHABLE: ud ? copy_ud(e, m) : copy_conn(e, m); return true;
    case RDMA_CM_EVENT_MULTICAST_JOIN:
    case RDMA_CM_EVENT_MULTICAST_ERROR: {
      copy_ud(e, m);
      group_gid_of(m.remote_ip, &e->event.param.ud.ah_attr.grh.dgid);  // the group's GID
      uint64_t context = 0;
      std::memcpy(&context, m.private_data, sizeof context);
      e->event.param.ud.private_data = reinterpret_cast<void*>(uintptr_t(context));
      e->event.param.ud.private_data_len = 0;
      // Datagrams to a group go to QPN 0xFFFFFF (IBA 9.2) with the Q_Key every rdma_cm UD QP has
      // (kernel cma_iboe_join_multicast / cma_set_qkey: RDMA_UDP_QKEY).
      e->event.param.ud.qp_num = 0xFFFFFF;
      e->event.param.ud.qkey = abi::kRdmaUdpQkey;
      return true;
    }
    case RDMA_CM_EVENT_DISCONNECTED:
      if (e->id_priv->connect_error) return false;
      copy_conn(e, m);
      return true;
    default: return true;
  }
}

}  // namespace
}  // namespace simnic::rdmacm

using namespace simnic::rdmacm;
namespace abi = simnic::abi;

extern "C" {

int rdma_get_cm_event(struct rdma_event_channel* channel, struct rdma_cm_event** event) {
  if (!channel || !event) return fail(EINVAL);
  auto* e = new CmaEvent;
  for (;;) {
    std::memset(&e->event, 0, sizeof e->event);
    abi::CmEventMsg m{};
    // Blocks unless the program set O_NONBLOCK; events are written whole, so a message is
    // either all there or not yet.
    ssize_t n = ::recv(channel->fd, &m, sizeof m, MSG_WAITALL);
    if (n < 0 && errno == EINTR) continue;
    if (n != ssize_t(sizeof m)) {
      int err = n < 0 ? errno : ENODATA;
      delete e;
      return fail(err);
    }
    if (process(e, m)) break;
  }
  *event = &e->event;
  return 0;
}

int rdma_ack_cm_event(struct rdma_cm_event* event) {
  if (!event) return fail(EINVAL);
  delete reinterpret_cast<CmaEvent*>(event);
  return 0;
}

const char* rdma_event_str(enum rdma_cm_event_type event) {
  switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR: return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR: return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR: return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE: return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED: return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN: return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR: return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE: return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
  }
  return "UNKNOWN EVENT";
}

struct ibv_context** rdma_get_devices(int* num_devices) {
  std::vector<ibv_context*> found;
  for (Nic* nic : all_nics())
    if (open_nic(nic) == 0) found.push_back(nic->verbs);
  auto** list = static_cast<ibv_context**>(std::calloc(found.size() + 1, sizeof(ibv_context*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  std::copy(found.begin(), found.end(), list);
  if (num_devices) *num_devices = int(found.size());
  return list;
}

void rdma_free_devices(struct ibv_context** list) { std::free(list); }

}  // extern "C"
