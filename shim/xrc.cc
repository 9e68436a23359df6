// XRC (IBA Annex A14): XRC domains, XRC SRQs and XRC INI/TGT QPs. verbs.h reaches these
// through the verbs_context entries fill_xrc_ops sets (ibv_open_xrcd, ibv_close_xrcd,
// ibv_create_srq_ex, ibv_get_srq_num) and through create_qp_ex for the two XRC QP types.
// Posting on an INI QP is ibv_post_send with wr.qp_type.xrc.remote_srqn (post.cc).
#include <sys/mman.h>

#include <cstring>
#include <string>

#include "shim/shim.h"

using namespace simnic::abi;

namespace simnic::shim {

bool send_ops_supported(uint64_t flags);                                                          // post_ex.cc
ShimSrq* new_shim_srq(ibv_pd* pd, void* srq_context, const abi::CreateSrqReply& rep, void* mem);  // qp.cc
ShimQp* new_shim_qp(ibv_context* context, const ibv_qp_init_attr_ex& a, const abi::CreateQpReply& rep,
                    void* mem);  // qp.cc
void enable_wr_api(ShimQp* q);

namespace {

// rdma-core's ibv_cmd_open_xrcd: both the fd and the oflags must be given (fd -1: a private
// domain); bits beyond those it knows are EOPNOTSUPP.
ibv_xrcd* open_xrcd(ibv_context* context, ibv_xrcd_init_attr* attr) {
  if (attr->comp_mask & ~uint32_t(IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS))
    return fail_null<ibv_xrcd>(EOPNOTSUPP);
  if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) || !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS))
    return fail_null<ibv_xrcd>(EINVAL);
  if (attr->fd < -1) return fail_null<ibv_xrcd>(EBADF);
  ShimContext* c = to_shim(context);
  OpenXrcdReq req{attr->fd >= 0 ? 1u : 0u, attr->oflags};
  HandleReply rep{};
  int st = attr->fd >= 0 ? rpc(c, Op::OpenXrcd, req, &rep, nullptr, {attr->fd}) : rpc(c, Op::OpenXrcd, req, &rep);
  if (st) {
    explain_refusal("ibv_open_xrcd", st, last_refusal());
    return fail_null<ibv_xrcd>(st);
  }
  auto* x = new ShimXrcd;
  x->xrcd.context = context;
  x->handle = rep.handle;
  return &x->xrcd;
}

int close_xrcd(ibv_xrcd* xrcd) {
  auto* x = reinterpret_cast<ShimXrcd*>(xrcd);
  std::string why;
  int st = rpc_text(to_shim(xrcd->context), Op::CloseXrcd, HandleReq{x->handle, 0}, &why);
  if (st) {
    explain_refusal("ibv_close_xrcd", st, why);
    return fail_errno(st);
  }
  delete x;
  return 0;
}

uint32_t xrcd_handle(const ibv_xrcd* xrcd) { return reinterpret_cast<const ShimXrcd*>(xrcd)->handle; }

// An XRC SRQ needs its domain, the CQ its receives complete on, and a PD for its buffers.
ibv_srq* create_xrc_srq(ibv_context* context, ibv_srq_init_attr_ex* a) {
  constexpr uint32_t kNeeded = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  if ((a->comp_mask & kNeeded) != kNeeded || !a->pd || !a->xrcd || !a->cq) {
    explain_refusal("ibv_create_srq_ex", EINVAL,
                    "an XRC SRQ needs pd, xrcd and cq, each set and named in comp_mask (IBV_SRQ_INIT_ATTR_PD, "
                    "_XRCD, _CQ)");
    return fail_null<ibv_srq>(EINVAL);
  }
  if (a->pd->context != context || a->xrcd->context != context || a->cq->context != context) {
    explain_refusal("ibv_create_srq_ex", EINVAL, "pd, xrcd and cq must belong to the context the SRQ is created on");
    return fail_null<ibv_srq>(EINVAL);
  }
  ShimContext* c = to_shim(context);
  CreateXrcSrqReq req{a->pd->handle, xrcd_handle(a->xrcd), a->cq->handle, 0, a->attr};
  CreateXrcSrqReply rep{};
  std::vector<int> fds;
  if (int st = rpc(c, Op::CreateXrcSrq, req, &rep, &fds)) {
    explain_refusal("ibv_create_srq_ex", st, last_refusal());
    return fail_null<ibv_srq>(st);
  }
  void* mem = map_rings_or_destroy(c, fds, rep.srq.mem_bytes, Op::DestroySrq, rep.srq.handle);
  if (!mem) return fail_null<ibv_srq>(errno);
  ShimSrq* srq = new_shim_srq(a->pd, a->srq_context, rep.srq, mem);
  srq->srq_num = rep.srq_num;
  a->attr = rep.srq.attr;
  std::lock_guard lock(c->objs_mu);
  c->srqs[rep.srq.handle] = srq;
  return &srq->srq;
}

// verbs.h's ibv_create_srq_ex handles a basic SRQ given by PD (and type) itself; what reaches
// here is an XRC SRQ, a basic SRQ described with more attributes, or tag matching.
ibv_srq* create_srq_ex(ibv_context* context, ibv_srq_init_attr_ex* a) {
  const bool typed = a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE;
  if (typed && a->srq_type == IBV_SRQT_XRC) return create_xrc_srq(context, a);
  if (typed && a->srq_type != IBV_SRQT_BASIC) {  // tag matching
    explain_refusal("ibv_create_srq_ex", EOPNOTSUPP,
                    "srq_type " + std::to_string(int(a->srq_type)) +
                        ": simnic has basic and XRC SRQs, no tag matching");
    return fail_null<ibv_srq>(EOPNOTSUPP);
  }
  if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd) {
    explain_refusal("ibv_create_srq_ex", EINVAL,
                    "a basic SRQ needs pd, set and named in comp_mask (IBV_SRQ_INIT_ATTR_PD)");
    return fail_null<ibv_srq>(EINVAL);
  }
  ibv_srq_init_attr init{a->srq_context, a->attr};
  ibv_srq* srq = ibv_create_srq(a->pd, &init);
  if (srq) a->attr = init.attr;
  return srq;
}

int get_srq_num(ibv_srq* srq, uint32_t* srq_num) {
  const ShimSrq* s = to_shim(srq);
  if (!s->srq_num) return fail_errno(EOPNOTSUPP);  // a basic SRQ has no number (rdma-core: the same)
  *srq_num = s->srq_num;
  return 0;
}

}  // namespace

// ibv_create_qp_ex for IBV_QPT_XRC_SEND (an INI QP: PD and send CQ, no receive side) and
// IBV_QPT_XRC_RECV (a TGT QP: an XRC domain only).
ibv_qp* create_xrc_qp(ibv_context* context, ibv_qp_init_attr_ex* a) {
  const bool ini = a->qp_type == IBV_QPT_XRC_SEND;
  const uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  if (a->comp_mask & ~known) return fail_null<ibv_qp>(EOPNOTSUPP);
  if (ini ? (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || !a->send_cq || a->pd->context != context)
          : (!(a->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !a->xrcd || a->xrcd->context != context))
    return fail_null<ibv_qp>(EINVAL);
  const bool wr_api = ini && (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS);
  if (wr_api && !send_ops_supported(a->send_ops_flags)) return fail_null<ibv_qp>(EOPNOTSUPP);
  ShimContext* c = to_shim(context);
  CreateXrcQpReq req{};
  req.qp.pd = ini ? a->pd->handle : 0;
  req.qp.send_cq = ini ? a->send_cq->handle : 0;
  req.qp.qp_type = a->qp_type;
  req.qp.sq_sig_all = a->sq_sig_all ? 1 : 0;
  req.qp.cap = ini ? a->cap : ibv_qp_cap{};
  req.xrcd = ini ? 0 : xrcd_handle(a->xrcd);
  CreateQpReply rep{};
  std::vector<int> fds;
  if (int st = rpc(c, Op::CreateXrcQp, req, &rep, &fds)) {
    explain_refusal("ibv_create_qp_ex", st, last_refusal());
    return fail_null<ibv_qp>(st);
  }
  void* mem = map_rings_or_destroy(c, fds, rep.mem_bytes, Op::DestroyQp, rep.handle);
  if (!mem) return fail_null<ibv_qp>(errno);
  ShimQp* qp = new_shim_qp(context, *a, rep, mem);
  a->cap = rep.cap;
  if (wr_api) enable_wr_api(qp);
  std::lock_guard lock(c->objs_mu);
  c->qps[rep.handle] = qp;
  return &qp->qpx.qp_base;
}

ibv_qp* create_xrc_qp_on_pd(ibv_pd* pd, ibv_qp_init_attr* init) {
  ibv_qp_init_attr_ex a{};
  a.qp_context = init->qp_context;
  a.send_cq = init->send_cq;
  a.cap = init->cap;
  a.qp_type = init->qp_type;
  a.sq_sig_all = init->sq_sig_all;
  a.comp_mask = IBV_QP_INIT_ATTR_PD;
  a.pd = pd;
  ibv_qp* qp = create_xrc_qp(pd->context, &a);
  if (qp) init->cap = a.cap;
  return qp;
}

// ibv_open_qp: another handle on an XRC TGT QP (the only shareable kind) of a domain this
// context opened. The TGT QP has no rings to share; the handle gets a private page for the
// state word the fast path reads (where every post on a TGT QP fails anyway).
ibv_qp* open_qp(ibv_context* context, ibv_qp_open_attr* a) {
  constexpr uint32_t kNeeded = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  if (a->comp_mask & ~uint32_t(kNeeded | IBV_QP_OPEN_ATTR_CONTEXT)) return fail_null<ibv_qp>(EOPNOTSUPP);
  if ((a->comp_mask & kNeeded) != kNeeded || !a->xrcd || a->xrcd->context != context || a->qp_type != IBV_QPT_XRC_RECV)
    return fail_null<ibv_qp>(EINVAL);
  ShimContext* c = to_shim(context);
  CreateQpReply rep{};
  if (int st = rpc(c, Op::OpenXrcQp, OpenXrcQpReq{xrcd_handle(a->xrcd), a->qp_num}, &rep)) {
    explain_refusal("ibv_open_qp", st, last_refusal());
    return fail_null<ibv_qp>(st);
  }
  const size_t bytes = sizeof(QpShared);
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    rpc_status(c, Op::DestroyQp, HandleReq{rep.handle, 0});
    return fail_null<ibv_qp>(ENOMEM);
  }
  new (mem) QpShared();
  rep.mem_bytes = bytes;
  ibv_qp_init_attr_ex init{};
  init.qp_type = IBV_QPT_XRC_RECV;
  init.qp_context = (a->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? a->qp_context : nullptr;
  ShimQp* qp = new_shim_qp(context, init, rep, mem);
  qp->sq = nullptr;
  std::lock_guard lock(c->objs_mu);
  c->qps[rep.handle] = qp;
  return &qp->qpx.qp_base;
}

void fill_xrc_ops(ShimContext* c) {
  c->vctx.open_qp = open_qp;
  c->vctx.open_xrcd = open_xrcd;
  c->vctx.close_xrcd = close_xrcd;
  c->vctx.create_srq_ex = create_srq_ex;
  c->vctx.get_srq_num = get_srq_num;
}

}  // namespace simnic::shim
