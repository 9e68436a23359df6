// QPs on ids, and the connection calls: rdma_create_qp moves the QP to INIT (RTS for UD);
// rdma_accept and the CONNECT_RESPONSE event move it through RTR to RTS with the attributes
// the NIC's connection manager gives (rdma_init_qp_attr), as librdmacm does with the kernel's.
#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "rdmacm/cma.h"

namespace simnic::rdmacm {
namespace {

// Kernel defaults (cma.c, ib_cm): REQ retries and response timeout; a test may shorten them.
uint8_t env_u8(const char* name, uint8_t dflt, uint8_t max) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  long n = std::strtol(v, nullptr, 10);
  return n < 1 ? dflt : uint8_t(std::min<long>(n, max));
}

int destroy_cqs(rdma_cm_id* id) {
  if (id->recv_cq) ibv_destroy_cq(id->recv_cq);
  if (id->recv_cq_channel) ibv_destroy_comp_channel(id->recv_cq_channel);
  if (id->send_cq && id->send_cq != id->recv_cq) ibv_destroy_cq(id->send_cq);
  if (id->send_cq_channel) ibv_destroy_comp_channel(id->send_cq_channel);
  id->recv_cq = id->send_cq = nullptr;
  id->recv_cq_channel = id->send_cq_channel = nullptr;
  return -1;
}

// As librdmacm's ucma_create_cqs: a CQ with its own completion channel for each direction the
// caller gave no CQ for.
int create_cqs(rdma_cm_id* id, uint32_t send_size, uint32_t recv_size) {
  if (recv_size) {
    id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
    if (!id->recv_cq_channel) return destroy_cqs(id);
    id->recv_cq = ibv_create_cq(id->verbs, int(recv_size), id, id->recv_cq_channel, 0);
    if (!id->recv_cq) return destroy_cqs(id);
  }
  if (send_size) {
    id->send_cq_channel = ibv_create_comp_channel(id->verbs);
    if (!id->send_cq_channel) return destroy_cqs(id);
    id->send_cq = ibv_create_cq(id->verbs, int(send_size), id, id->send_cq_channel, 0);
    if (!id->send_cq) return destroy_cqs(id);
  }
  return 0;
}

int copy_private(uint8_t* dst, size_t max, const void* src, size_t len, uint8_t* out_len) {
  if (len > max) return EINVAL;
  if (len && src) std::memcpy(dst, src, len);
  *out_len = uint8_t(len);
  return 0;
}

}  // namespace

int modify_qp_to(CmaId* p, ibv_qp_state state, int override_rd_atomic) {
  if (!p->id.qp) return 0;
  abi::CmInitQpAttrReq req{p->handle, uint32_t(state)};
  abi::CmInitQpAttrReply rep{};
  if (int e = nic_call(p->nic, abi::Op::CmInitQpAttr, &req, sizeof req, &rep, sizeof rep)) return e;
  if (override_rd_atomic >= 0) {
    if (state == IBV_QPS_RTR) rep.attr.max_dest_rd_atomic = uint8_t(override_rd_atomic);
    if (state == IBV_QPS_RTS) rep.attr.max_rd_atomic = uint8_t(override_rd_atomic);
  }
  if (state == IBV_QPS_RTS && p->ack_timeout) rep.attr.timeout = p->ack_timeout;
  return ibv_modify_qp(p->id.qp, &rep.attr, rep.attr_mask);
}

void modify_qp_err(CmaId* p) {
  if (!p->id.qp) return;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(p->id.qp, &a, IBV_QP_STATE);
}

// A synchronous id waits for the event its call causes, and fails as librdmacm's does.
int ucma_complete(CmaId* p) {
  if (!p->sync) return 0;
  if (p->id.event) {
    rdma_ack_cm_event(p->id.event);
    p->id.event = nullptr;
  }
  if (rdma_get_cm_event(p->id.channel, &p->id.event)) return -1;
  const rdma_cm_event* ev = p->id.event;
  if (ev->event == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
  if (ev->status < 0) return fail(-ev->status);
  if (ev->status > 0) return fail(ev->status == 8 ? ECONNREFUSED : EIO);
  return 0;
}

}  // namespace simnic::rdmacm

using namespace simnic::rdmacm;
namespace abi = simnic::abi;

extern "C" {

int rdma_init_qp_attr(struct rdma_cm_id* id, struct ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  auto* p = reinterpret_cast<CmaId*>(id);
  if (!p || !p->nic || !qp_attr || !qp_attr_mask) return fail(EINVAL);
  abi::CmInitQpAttrReq req{p->handle, uint32_t(qp_attr->qp_state)};
  abi::CmInitQpAttrReply rep{};
  if (int e = nic_call(p->nic, abi::Op::CmInitQpAttr, &req, sizeof req, &rep, sizeof rep)) return fail(e);
  *qp_attr = rep.attr;
  *qp_attr_mask = rep.attr_mask;
  return 0;
}

int rdma_create_qp_ex(struct rdma_cm_id* id, struct ibv_qp_init_attr_ex* attr) {
  if (!id || !attr || id->qp) return fail(EINVAL);
  auto* p = reinterpret_cast<CmaId*>(id);
  if (!p->nic || !id->verbs) return fail(EINVAL);  // bind or resolve first
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
    attr->pd = id->pd;
  } else if (attr->pd->context != id->verbs) {
    return fail(EINVAL);
  }
  if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
      (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq))
    return fail(EINVAL);
  if (create_cqs(id, attr->send_cq || id->send_cq ? 0 : attr->cap.max_send_wr,
                 attr->recv_cq || id->recv_cq ? 0 : attr->cap.max_recv_wr))
    return -1;
  if (!attr->send_cq) attr->send_cq = id->send_cq;
  if (!attr->recv_cq) attr->recv_cq = id->recv_cq;
  if (id->srq && !attr->srq) attr->srq = id->srq;
  ibv_qp* qp;
  if ((attr->comp_mask & ~uint32_t(IBV_QP_INIT_ATTR_PD)) == 0) {
    ibv_qp_init_attr plain{};
    plain.qp_context = attr->qp_context;
    plain.send_cq = attr->send_cq;
    plain.recv_cq = attr->recv_cq;
    plain.srq = attr->srq;
    plain.cap = attr->cap;
    plain.qp_type = attr->qp_type;
    plain.sq_sig_all = attr->sq_sig_all;
    qp = ibv_create_qp(attr->pd, &plain);
    if (qp) attr->cap = plain.cap;
  } else {
    qp = ibv_create_qp_ex(id->verbs, attr);
  }
  if (!qp) {
    int e = errno;
    destroy_cqs(id);
    return fail(e);
  }
  id->qp = qp;
  // INIT now (receives may be posted at once); a UD QP goes on to RTS, as ucma_init_ud_qp.
  int e = modify_qp_to(p, IBV_QPS_INIT, -1);
  if (!e && id->qp_type == IBV_QPT_UD) e = modify_qp_to(p, IBV_QPS_RTR, -1);
  if (!e && id->qp_type == IBV_QPT_UD) e = modify_qp_to(p, IBV_QPS_RTS, -1);
  if (e) {
    id->qp = nullptr;
    ibv_destroy_qp(qp);
    destroy_cqs(id);
    return fail(e);
  }
  id->pd = qp->pd;
  return 0;
}

int rdma_create_qp(struct rdma_cm_id* id, struct ibv_pd* pd, struct ibv_qp_init_attr* qp_init_attr) {
  if (!id || !qp_init_attr) return fail(EINVAL);
  ibv_qp_init_attr_ex ex{};
  std::memcpy(&ex, qp_init_attr, sizeof *qp_init_attr);
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd ? pd : id->pd;
  int ret = rdma_create_qp_ex(id, &ex);
  if (ret == 0) std::memcpy(qp_init_attr, &ex, sizeof *qp_init_attr);
  return ret;
}

void rdma_destroy_qp(struct rdma_cm_id* id) {
  if (!id || !id->qp) return;
  ibv_destroy_qp(id->qp);
  id->qp = nullptr;
  destroy_cqs(id);
}

int rdma_create_srq_ex(struct rdma_cm_id* id, struct ibv_srq_init_attr_ex* attr) {
  if (!id || !attr) return fail(EINVAL);
  if (attr->comp_mask & ~uint32_t(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_CQ))
    return fail(EOPNOTSUPP);
  if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC) return fail(EOPNOTSUPP);
  ibv_pd* pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) && attr->pd ? attr->pd : id->pd;
  ibv_srq_init_attr plain{};
  plain.srq_context = attr->srq_context;
  plain.attr = attr->attr;
  ibv_srq* srq = ibv_create_srq(pd, &plain);
  if (!srq) return -1;
  attr->attr = plain.attr;
  id->srq = srq;
  id->pd = pd;
  return 0;
}

int rdma_create_srq(struct rdma_cm_id* id, struct ibv_pd* pd, struct ibv_srq_init_attr* attr) {
  if (!attr) return fail(EINVAL);
  ibv_srq_init_attr_ex ex{};
  ex.srq_context = attr->srq_context;
  ex.attr = attr->attr;
  ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
  ex.srq_type = IBV_SRQT_BASIC;
  ex.pd = pd;
  int ret = rdma_create_srq_ex(id, &ex);
  if (ret == 0) attr->attr = ex.attr;
  return ret;
}

void rdma_destroy_srq(struct rdma_cm_id* id) {
  if (!id || !id->srq) return;
  ibv_destroy_srq(id->srq);
  id->srq = nullptr;
}

int rdma_connect(struct rdma_cm_id* id, struct rdma_conn_param* conn_param) {
  auto* p = reinterpret_cast<CmaId*>(id);
  if (!p || !p->nic || !id->route.addr.dst_sin.sin_addr.s_addr) return fail(EINVAL);
  abi::CmConnectReq req{};
  req.id = p->handle;
  req.dst_ip = ntohl(id->route.addr.dst_sin.sin_addr.s_addr);
  req.dst_port = ntohs(id->route.addr.dst_sin.sin_port);
  const ibv_device_attr& dev = p->nic->attr;
  req.responder_resources = uint8_t(dev.max_qp_rd_atom);
  req.initiator_depth = uint8_t(dev.max_qp_init_rd_atom);
  req.retry_count = 7;
  req.rnr_retry_count = 7;
  if (conn_param) {
    if (conn_param->responder_resources != RDMA_MAX_RESP_RES)
      req.responder_resources = uint8_t(std::min<int>(conn_param->responder_resources, dev.max_qp_rd_atom));
    if (conn_param->initiator_depth != RDMA_MAX_INIT_DEPTH)
      req.initiator_depth = uint8_t(std::min<int>(conn_param->initiator_depth, dev.max_qp_init_rd_atom));
    req.retry_count = conn_param->retry_count;
    req.rnr_retry_count = conn_param->rnr_retry_count;
    req.flow_control = conn_param->flow_control;
    req.srq = conn_param->srq;
    req.qp_num = conn_param->qp_num;
    if (int e = copy_private(req.private_data, id->qp_type == IBV_QPT_UD ? 180 : 56, conn_param->private_data,
                             conn_param->private_data_len, &req.private_len))
      return fail(e);
  }
  if (id->qp) {
    req.qp_num = id->qp->qp_num;
    req.srq = id->qp->srq ? 1 : 0;
  }
  req.cm_response_timeout = env_u8("SIMNIC_CM_RESPONSE_TIMEOUT", 0, 31);
  req.max_cm_retries = env_u8("SIMNIC_CM_RETRIES", 0, 15);
  if (id->route.path_rec) req.path_mtu = uint8_t(id->route.path_rec->mtu);
  if (int e = nic_call(p->nic, abi::Op::CmConnect, &req, sizeof req, nullptr, 0)) return fail(e);
  return ucma_complete(p);
}

int rdma_accept(struct rdma_cm_id* id, struct rdma_conn_param* conn_param) {
  auto* p = reinterpret_cast<CmaId*>(id);
  if (!p || !p->nic) return fail(EINVAL);
  abi::CmAcceptReq req{};
  req.id = p->handle;
  req.rnr_retry_count = 7;
  if (id->qp_type != IBV_QPT_UD) {
    // As librdmacm's rdma_accept: the request's values (whatever the peer sent: a forged REQ
    // may say 255) or the caller's, never past what this device supports, so that RTR and RTS
    // cannot fail on them.
    int depth = p->initiator_depth, resources = p->responder_resources;
    if (conn_param && conn_param->initiator_depth != RDMA_MAX_INIT_DEPTH) depth = conn_param->initiator_depth;
    if (conn_param && conn_param->responder_resources != RDMA_MAX_RESP_RES) resources = conn_param->responder_resources;
    req.initiator_depth = uint8_t(std::min<int>(depth, p->nic->attr.max_qp_init_rd_atom));
    req.responder_resources = uint8_t(std::min<int>(resources, p->nic->attr.max_qp_rd_atom));
    int e = modify_qp_to(p, IBV_QPS_RTR, req.responder_resources);
    if (!e) e = modify_qp_to(p, IBV_QPS_RTS, req.initiator_depth);
    if (e) {
      modify_qp_err(p);
      rdma_reject(id, nullptr, 0);
      return fail(e);
    }
  }
  if (conn_param) {
    req.rnr_retry_count = conn_param->rnr_retry_count;
    req.flow_control = conn_param->flow_control;
    req.srq = conn_param->srq;
    req.qp_num = conn_param->qp_num;
    req.qkey = conn_param->qp_num ? abi::kRdmaUdpQkey : 0;
    if (int e = copy_private(req.private_data, id->qp_type == IBV_QPT_UD ? 136 : 196, conn_param->private_data,
                             conn_param->private_data_len, &req.private_len))
      return fail(e);
  }
  if (id->qp) {
    req.qp_num = id->qp->qp_num;
    req.srq = id->qp->srq ? 1 : 0;
    if (id->qp_type == IBV_QPT_UD) {
      ibv_qp_attr a{};
      ibv_qp_init_attr ia{};
      req.qkey = ibv_query_qp(id->qp, &a, IBV_QP_QKEY, &ia) == 0 && a.qkey ? a.qkey : abi::kRdmaUdpQkey;
    }
  }
  if (int e = nic_call(p->nic, abi::Op::CmAccept, &req, sizeof req, nullptr, 0)) {
    modify_qp_err(p);
    return fail(e);
  }
  if (id->qp_type == IBV_QPT_UD) return 0;
  return ucma_complete(p);
}

int rdma_establish(struct rdma_cm_id* id) {
  auto* p = reinterpret_cast<CmaId*>(id);
  if (!p || !p->nic || id->qp) return fail(EINVAL);
  abi::CmAcceptReq req{};
  req.id = p->handle;
  if (int e = nic_call(p->nic, abi::Op::CmAccept, &req, sizeof req, nullptr, 0)) return fail(e);
  return 0;
}

int rdma_reject(struct rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  auto* p = reinterpret_cast<CmaId*>(id);
  if (!p || !p->nic) return fail(EINVAL);
  abi::CmRejectReq req{};
  req.id = p->handle;
  if (int e = copy_private(req.private_data, 148, private_data, private_data_len, &req.private_len)) return fail(e);
  if (int e = nic_call(p->nic, abi::Op::CmReject, &req, sizeof req, nullptr, 0)) return fail(e);
  return 0;
}

int rdma_reject_ece(struct rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  return rdma_reject(id, private_data, private_data_len);
}

int rdma_disconnect(struct rdma_cm_id* id) {
  auto* p = reinterpret_cast<CmaId*>(id);
  if (!p || !p->nic) return fail(EINVAL);
  modify_qp_err(p);  // librdmacm's ucma_shutdown: IB transport QPs go to ERR first
  abi::CmDisconnectReq req{};
  req.id = p->handle;
  if (int e = nic_call(p->nic, abi::Op::CmDisconnect, &req, sizeof req, nullptr, 0)) return fail(e);
  return ucma_complete(p);
}

int rdma_notify(struct rdma_cm_id* id, enum ibv_event_type) { return id ? 0 : fail(EINVAL); }

int rdma_set_option(struct rdma_cm_id* id, int level, int optname, void* optval, size_t optlen) {
  auto* p = reinterpret_cast<CmaId*>(id);
  if (!p || !optval) return fail(EINVAL);
  if (level == RDMA_OPTION_ID && optname == RDMA_OPTION_ID_ACK_TIMEOUT && optlen == sizeof(uint8_t)) {
    p->ack_timeout = *static_cast<uint8_t*>(optval);
    return 0;
  }
  if (level == RDMA_OPTION_ID &&
      (optname == RDMA_OPTION_ID_TOS || optname == RDMA_OPTION_ID_REUSEADDR || optname == RDMA_OPTION_ID_AFONLY))
    return 0;  // accepted; simnic has one traffic class and no TIME_WAIT port reuse rules
  return fail(ENOSYS);
}

int rdma_set_local_ece(struct rdma_cm_id*, struct ibv_ece*) { return fail(EOPNOTSUPP); }
int rdma_get_remote_ece(struct rdma_cm_id*, struct ibv_ece*) { return fail(EOPNOTSUPP); }

}  // extern "C"
