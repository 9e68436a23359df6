// Queue pairs and shared receive queues: created, changed and destroyed over the control
// socket; their work queues live in shared memory that simnicd passes back as a memfd.
#include <sys/mman.h>

#include <cstring>

#include "shim/shim.h"
#include "shim/verbs_ext.h"

using namespace simnic::shim;
using namespace simnic::abi;

namespace simnic::shim {

// The shim's side of a QP whose rings simnicd mapped at `mem`. An XRC INI QP has no receive
// side; a TGT QP has no PD and no CQs either (rdma-core: the same).
ShimQp* new_shim_qp(ibv_context* context, const ibv_qp_init_attr_ex& a, const CreateQpReply& rep, void* mem) {
  const bool tgt = a.qp_type == IBV_QPT_XRC_RECV, xrc = tgt || a.qp_type == IBV_QPT_XRC_SEND;
  auto* qp = new ShimQp;
  std::memset(&qp->qpx, 0, sizeof qp->qpx);
  ibv_qp& q = qp->qpx.qp_base;
  q.context = context;
  q.qp_context = a.qp_context;
  q.pd = tgt ? nullptr : a.pd;
  q.send_cq = tgt ? nullptr : a.send_cq;
  q.recv_cq = xrc ? nullptr : a.recv_cq;
  q.srq = xrc ? nullptr : a.srq;
  q.handle = rep.handle;
  q.qp_num = rep.qp_num;
  q.state = IBV_QPS_RESET;
  q.qp_type = a.qp_type;
  pthread_mutex_init(&q.mutex, nullptr);
  pthread_cond_init(&q.cond, nullptr);
  qp->mem = mem;
  qp->mem_bytes = rep.mem_bytes;
  qp->shm = static_cast<QpShared*>(mem);
  qp->sq = reinterpret_cast<SendWqe*>(static_cast<uint8_t*>(mem) + rep.sq_offset);
  qp->rq = xrc ? nullptr : reinterpret_cast<RecvWqe*>(static_cast<uint8_t*>(mem) + rep.rq_offset);
  qp->sq_entries = rep.sq_entries;
  qp->rq_entries = xrc ? 0 : rep.rq_entries;
  qp->cap = rep.cap;
  return qp;
}

// The shim's side of an SRQ whose ring simnicd mapped at `mem`: ibv_create_srq and XRC SRQs.
ShimSrq* new_shim_srq(ibv_pd* pd, void* srq_context, const CreateSrqReply& rep, void* mem) {
  auto* srq = new ShimSrq;
  std::memset(&srq->srq, 0, sizeof srq->srq);
  srq->srq.context = pd->context;
  srq->srq.srq_context = srq_context;
  srq->srq.pd = pd;
  srq->srq.handle = rep.handle;
  pthread_mutex_init(&srq->srq.mutex, nullptr);
  pthread_cond_init(&srq->srq.cond, nullptr);
  srq->mem = mem;
  srq->mem_bytes = rep.mem_bytes;
  srq->shm = static_cast<SrqShared*>(mem);
  srq->slots = reinterpret_cast<RecvWqe*>(static_cast<uint8_t*>(mem) + rep.wqe_offset);
  srq->entries = rep.entries;
  srq->max_wr = rep.attr.max_wr;
  srq->max_sge = rep.attr.max_sge;
  return srq;
}

// Creates a QP from the attributes both ibv_create_qp and ibv_create_qp_ex carry.
ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
  // verbs.h's ibv_create_qp_ex comes here when the PD is all it was given: an XRC INI QP.
  if (pd && init->qp_type == IBV_QPT_XRC_SEND) return create_xrc_qp_on_pd(pd, init);
  if (!pd || !init->send_cq || !init->recv_cq) {
    explain_refusal("ibv_create_qp", EINVAL,
                    std::string(!pd              ? "pd"
                                : !init->send_cq ? "send_cq"
                                                 : "recv_cq") +
                        " is NULL: a QP needs a PD and both CQs (one CQ may serve as both)");
    return fail_null<ibv_qp>(EINVAL);
  }
  ShimContext* c = to_shim(pd->context);
  CreateQpReq req{};
  req.pd = pd->handle;
  req.send_cq = init->send_cq->handle;
  req.recv_cq = init->recv_cq->handle;
  req.srq = init->srq ? init->srq->handle : 0;
  req.qp_type = init->qp_type;
  req.sq_sig_all = init->sq_sig_all ? 1 : 0;
  req.cap = init->cap;
  CreateQpReply rep{};
  std::vector<int> fds;
  if (int st = rpc(c, Op::CreateQp, req, &rep, &fds)) {
    explain_refusal("ibv_create_qp", st, abi::last_refusal());
    return fail_null<ibv_qp>(st);
  }
  // Through a parent domain's allocator, if the PD is one (domains.cc).
  void* mem = map_rings_or_destroy(c, fds, rep.mem_bytes, Op::DestroyQp, rep.handle, pd, kResTypeQp);
  if (!mem) return fail_null<ibv_qp>(errno);
  ibv_qp_init_attr_ex a{};
  a.qp_context = init->qp_context;
  a.pd = pd;
  a.send_cq = init->send_cq;
  a.recv_cq = init->recv_cq;
  a.srq = init->srq;
  a.qp_type = init->qp_type;
  ShimQp* qp = new_shim_qp(pd->context, a, rep, mem);
  init->cap = rep.cap;  // as rdma-core does: the caller learns what it got
  std::lock_guard lock(c->objs_mu);
  c->qps[rep.handle] = qp;
  return &qp->qpx.qp_base;
}

bool send_ops_supported(uint64_t flags);  // post_ex.cc
void enable_wr_api(ShimQp* q);

ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  if (attr->qp_type == IBV_QPT_XRC_SEND || attr->qp_type == IBV_QPT_XRC_RECV) return create_xrc_qp(context, attr);
  constexpr uint32_t kKnown = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD)) return fail_null<ibv_qp>(EINVAL);
  if ((attr->comp_mask & ~kKnown) || ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags))
    return fail_null<ibv_qp>(EOPNOTSUPP);  // XRC, RSS, TSO, ...: not yet
  const bool wr_api = attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  if (wr_api && !send_ops_supported(attr->send_ops_flags)) return fail_null<ibv_qp>(EOPNOTSUPP);
  if (attr->pd->context != context) return fail_null<ibv_qp>(EINVAL);
  ibv_qp_init_attr init{};
  init.qp_context = attr->qp_context;
  init.send_cq = attr->send_cq;
  init.recv_cq = attr->recv_cq;
  init.srq = attr->srq;
  init.cap = attr->cap;
  init.qp_type = attr->qp_type;
  init.sq_sig_all = attr->sq_sig_all;
  ibv_qp* qp = create_qp(attr->pd, &init);
  if (!qp) return nullptr;
  attr->cap = init.cap;
  if (wr_api) enable_wr_api(to_shim(qp));
  return qp;
}

}  // namespace simnic::shim

extern "C" {

struct ibv_qp* ibv_create_qp(struct ibv_pd* pd, struct ibv_qp_init_attr* qp_init_attr) {
  return create_qp(pd, qp_init_attr);
}

int ibv_modify_qp(struct ibv_qp* qp, struct ibv_qp_attr* attr, int attr_mask) {
  ModifyQpReq req{qp->handle, attr_mask, *attr};
  std::string why;
  int st = rpc_text(to_shim(qp->context), Op::ModifyQp, req, &why);
  explain_refusal("ibv_modify_qp", st, why);
  if (st == 0 && (attr_mask & IBV_QP_STATE)) {
    qp->state = attr->qp_state;
    if (attr->qp_state == IBV_QPS_RESET) {  // as mlx5: no completions of before the reset stay
      remove_completions_of_qp(qp->send_cq, qp->qp_num);
      if (qp->recv_cq != qp->send_cq) remove_completions_of_qp(qp->recv_cq, qp->qp_num);
    }
  }
  return fail_errno(st);
}

int ibv_query_qp(struct ibv_qp* qp, struct ibv_qp_attr* attr, int attr_mask, struct ibv_qp_init_attr* init_attr) {
  QueryQpReply rep{};
  int st = rpc(to_shim(qp->context), Op::QueryQp, QueryQpReq{qp->handle, attr_mask}, &rep);
  if (st != 0) return fail_errno(st);
  *attr = rep.attr;
  attr->cap = rep.cap;
  if (init_attr) {
    std::memset(init_attr, 0, sizeof *init_attr);
    init_attr->qp_context = qp->qp_context;
    init_attr->send_cq = qp->send_cq;
    init_attr->recv_cq = qp->recv_cq;
    init_attr->srq = qp->srq;
    init_attr->cap = rep.cap;
    init_attr->qp_type = ibv_qp_type(rep.qp_type);
    init_attr->sq_sig_all = int(rep.sq_sig_all);
  }
  return 0;
}

int ibv_destroy_qp(struct ibv_qp* ibqp) {
  ShimContext* c = to_shim(ibqp->context);
  int st = rpc_status(c, Op::DestroyQp, HandleReq{ibqp->handle, 0});
  if (st != 0) {
    explain_refusal("ibv_destroy_qp", st, last_refusal());  // EBUSY: still attached to a group
    return fail_errno(st);
  }
  ShimQp* qp = to_shim(ibqp);
  {
    std::lock_guard lock(c->objs_mu);
    c->qps.erase(ibqp->handle);
  }
  unmap_ring(qp->mem, qp->mem_bytes);
  pthread_mutex_destroy(&ibqp->mutex);
  pthread_cond_destroy(&ibqp->cond);
  delete qp;
  return 0;
}

// Only QPs created with send_ops_flags have an ibv_qp_ex (rdma-core returns NULL otherwise).
struct ibv_qp_ex* ibv_qp_to_qp_ex(struct ibv_qp* qp) {
  ShimQp* q = to_shim(qp);
  return q->ex ? &q->qpx : nullptr;
}

struct ibv_srq* ibv_create_srq(struct ibv_pd* pd, struct ibv_srq_init_attr* init) {
  ShimContext* c = to_shim(pd->context);
  CreateSrqReq req{pd->handle, 0, init->attr};
  CreateSrqReply rep{};
  std::vector<int> fds;
  if (int st = rpc(c, Op::CreateSrq, req, &rep, &fds)) {
    explain_refusal("ibv_create_srq", st, last_refusal());
    return fail_null<ibv_srq>(st);
  }
  void* mem = map_rings_or_destroy(c, fds, rep.mem_bytes, Op::DestroySrq, rep.handle, pd, kResTypeSrq);
  if (!mem) return fail_null<ibv_srq>(errno);
  ShimSrq* srq = new_shim_srq(pd, init->srq_context, rep, mem);
  init->attr = rep.attr;
  std::lock_guard lock(c->objs_mu);
  c->srqs[rep.handle] = srq;
  return &srq->srq;
}

int ibv_modify_srq(struct ibv_srq* srq, struct ibv_srq_attr* attr, int attr_mask) {
  return fail_errno(rpc_status(to_shim(srq->context), Op::ModifySrq, ModifySrqReq{srq->handle, attr_mask, *attr}));
}

int ibv_query_srq(struct ibv_srq* srq, struct ibv_srq_attr* attr) {
  QuerySrqReply rep{};
  int st = rpc(to_shim(srq->context), Op::QuerySrq, HandleReq{srq->handle, 0}, &rep);
  if (st == 0) *attr = rep.attr;
  return fail_errno(st);
}

int ibv_destroy_srq(struct ibv_srq* ibsrq) {
  ShimContext* c = to_shim(ibsrq->context);
  int st = rpc_status(c, Op::DestroySrq, HandleReq{ibsrq->handle, 0});
  if (st != 0) {
    explain_refusal("ibv_destroy_srq", st, last_refusal());  // EBUSY: QPs use it; ENOENT: no such SRQ
    return fail_errno(st);
  }
  ShimSrq* srq = to_shim(ibsrq);
  {
    std::lock_guard lock(c->objs_mu);
    c->srqs.erase(ibsrq->handle);
  }
  unmap_ring(srq->mem, srq->mem_bytes);
  pthread_mutex_destroy(&ibsrq->mutex);
  pthread_cond_destroy(&ibsrq->cond);
  delete srq;
  return 0;
}

}  // extern "C"

#include "shim/symver.h"
SIMNIC_DEFAULT_VERSION_1_1(ibv_create_qp);
SIMNIC_DEFAULT_VERSION_1_1(ibv_modify_qp);
SIMNIC_DEFAULT_VERSION_1_1(ibv_query_qp);
SIMNIC_DEFAULT_VERSION_1_1(ibv_destroy_qp);
SIMNIC_DEFAULT_VERSION_1_1(ibv_create_srq);
SIMNIC_DEFAULT_VERSION_1_1(ibv_modify_srq);
SIMNIC_DEFAULT_VERSION_1_1(ibv_query_srq);
SIMNIC_DEFAULT_VERSION_1_1(ibv_destroy_srq);
