// XRC, the eXtended Reliable Connected transport (IBA Annex A14). An XRC INI QP is an RC
// requester with no receive side: each SEND names, in its XRCETH, the XRC SRQ it goes to at the
// responder. An XRC TGT QP is an RC responder with no send queue and no receive queue of its
// own: it takes receive WQEs from the SRQ each request names, and the SRQ must belong to the
// TGT QP's XRC domain. XRC domains (XRCDs) group SRQs and TGT QPs; a domain opened with a file
// is shared by every context of this NIC that opens the same file, as the kernel shares it
// between processes by inode.
#include <fcntl.h>

#include <algorithm>
#include <cerrno>

#include "simnic/core/device.h"
#include "simnic/core/objects/qp_state_table.h"
#include "simnic/core/text.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/psn.h"

namespace simnic::core {

using namespace simnic::proto;

// ---------------------------------------------------------------- XRC domains

Xrcd* Device::opened_xrcd(Context* ctx, uint32_t handle) {
  auto it = xrcds_.find(handle);
  if (it == xrcds_.end() || !it->second->opens.count(ctx)) return nullptr;
  return it->second.get();
}

// ib_uverbs_open_xrcd's rules: a file's domain is found by its inode; without O_CREAT a file
// with no domain yet is EAGAIN, and with O_EXCL a file that has one is EINVAL.
int Device::open_xrcd(Context* ctx, bool has_file, uint64_t dev, uint64_t ino, int oflags, uint32_t* handle) {
  Xrcd* x = nullptr;
  if (has_file) {
    for (auto& [h, d] : xrcds_)
      if (d->has_file && d->file_dev == dev && d->file_ino == ino) x = d.get();
    if (!x && !(oflags & O_CREAT))
      return refuse(EAGAIN, "no XRC domain is open on this file yet, and oflags lacks O_CREAT to make one");
    if (x && (oflags & O_EXCL))
      return refuse(EINVAL, "O_EXCL: an XRC domain is already open on this file (XRC domain " +
                                std::to_string(x->handle) + ")");
  }
  // As many as PDs: opens per program, and (new domains) per NIC.
  if (ctx->xrcds.size() >= DeviceLimits::kMaxPd || (!x && xrcds_.size() >= DeviceLimits::kMaxPd)) return ENOMEM;
  if (!x) {
    auto d = std::make_unique<Xrcd>();
    d->handle = new_handle();
    d->has_file = has_file;
    d->file_dev = dev;
    d->file_ino = ino;
    x = d.get();
    xrcds_[d->handle] = std::move(d);
  }
  ++x->opens[ctx];
  ctx->xrcds.push_back(x->handle);
  *handle = x->handle;
  tracer_.event(TraceKind::kXrcdOpen)
      .u("ctx", ctx->id)
      .u("xrcd", x->handle)
      .b("shared", has_file)
      .u("opens", x->opens.size());
  return 0;
}

int Device::close_xrcd(Context* ctx, uint32_t handle) {
  Xrcd* x = opened_xrcd(ctx, handle);
  if (!x) return EINVAL;
  const bool last = x->opens.size() == 1 && x->opens.begin()->second == 1;
  if (last && x->users)
    return refuse(EBUSY, "XRC domain " + std::to_string(handle) + " still holds " + std::to_string(x->users) +
                             " XRC SRQs and TGT QPs: destroy them first");
  if (--x->opens[ctx] == 0) x->opens.erase(ctx);
  auto it = std::find(ctx->xrcds.begin(), ctx->xrcds.end(), handle);
  if (it != ctx->xrcds.end()) ctx->xrcds.erase(it);
  tracer_.event(TraceKind::kXrcdClose).u("ctx", ctx->id).u("xrcd", handle);
  xrcd_put(x);
  return 0;
}

void Device::xrcd_put(Xrcd* x) {
  if (x->opens.empty() && x->users == 0) xrcds_.erase(x->handle);
}

// A context that goes away lets go of every domain it opened, even one that still holds other
// contexts' SRQs or QPs (they keep it alive until they are destroyed).
void Device::close_xrcds(Context* ctx) {
  for (uint32_t h : std::vector<uint32_t>(ctx->xrcds)) {
    auto it = xrcds_.find(h);
    if (it == xrcds_.end()) continue;
    Xrcd* x = it->second.get();
    x->opens.erase(ctx);
    xrcd_put(x);
  }
  ctx->xrcds.clear();
  std::erase_if(tgt_opens_, [&](const auto& o) { return o.second.first == ctx; });
}

// ---------------------------------------------------------------- XRC SRQs

int Device::create_xrc_srq(Context* ctx, uint32_t pd, uint32_t xrcd, uint32_t cq_handle, const ibv_srq_attr& attr,
                           Srq** out) {
  Xrcd* x = opened_xrcd(ctx, xrcd);
  Cq* cq = owned(cqs_, ctx, cq_handle);
  if (!x || !cq) return refuse(EINVAL, "an XRC SRQ needs an XRC domain this program opened and one of its CQs");
  if (int e = create_srq(ctx, pd, attr, out)) return e;
  Srq& srq = **out;
  for (;;) {  // a 24-bit number no other XRC SRQ has (0 is left out: it reads as "unset")
    srq.srqn = keys_.next() & 0xffffff;
    if (srq.srqn && !srq_by_srqn_.count(srq.srqn)) break;
  }
  srq.xrcd = x;
  srq.cq = cq;
  ++x->users;
  ++cq->users;
  srq_by_srqn_[srq.srqn] = &srq;
  tracer_.event(TraceKind::kXrcSrqCreate)
      .u("ctx", ctx->id)
      .u("srq", srq.handle)
      .u("srqn", srq.srqn)
      .u("xrcd", x->handle)
      .u("cq", cq->handle)
      .u("max_wr", srq.attr.max_wr);
  return 0;
}

// TGT QPs that were delivering into the SRQ forget it; a message half received into it is lost
// (its next packet finds no SRQ and is refused).
void Device::xrc_release_srq(Srq& srq) {
  for (auto& [h, qp] : qps_) {
    if (qp->srq != &srq || qp->type != IBV_QPT_XRC_RECV) continue;
    qp->resp.recv.reset();
    qp->srq = nullptr;
    qp->pd = nullptr;
    qp->recv_cq = nullptr;
  }
  srq_by_srqn_.erase(srq.srqn);
  --srq.cq->users;
  --srq.xrcd->users;
  tracer_.event(TraceKind::kXrcSrqDestroy).u("ctx", srq.ctx->id).u("srq", srq.handle).u("srqn", srq.srqn);
  Xrcd* x = srq.xrcd;
  srq.xrcd = nullptr;
  xrcd_put(x);
}

// ---------------------------------------------------------------- XRC QPs

int Device::create_xrc_qp(Context* ctx, const ibv_qp_init_attr& init, uint32_t pd_handle, uint32_t send_cq,
                          uint32_t xrcd, Qp** out) {
  const bool tgt = init.qp_type == IBV_QPT_XRC_RECV;
  Pd* pd = tgt ? nullptr : owned(pds_, ctx, pd_handle);
  Cq* scq = tgt ? nullptr : owned(cqs_, ctx, send_cq);
  Xrcd* x = tgt ? opened_xrcd(ctx, xrcd) : nullptr;
  if (tgt ? !x : (!pd || !scq))
    return refuse(EINVAL, tgt ? "an XRC TGT QP (IBV_QPT_XRC_RECV) needs an XRC domain this program opened"
                              : "an XRC INI QP (IBV_QPT_XRC_SEND) needs a PD and a send CQ");
  if (init.cap.max_send_wr > DeviceLimits::kMaxQpWr || init.cap.max_send_sge > abi::kMaxSge ||
      init.cap.max_inline_data > abi::kMaxInlineData)
    return refuse(EINVAL, "cap asks for more than the device has (ibv_query_device)");
  if (int e = check_room(ctx, qps_.size(), &Context::qps, DeviceLimits::kMaxQp, "QPs", "max_qp")) return e;
  auto qp = std::make_unique<Qp>();
  qp->sq_entries = tgt ? 1 : round_up_pow2(std::max(1u, init.cap.max_send_wr));
  qp->cap.max_send_wr = tgt ? 0 : qp->sq_entries;
  qp->cap.max_send_sge = tgt ? 0 : abi::kMaxSge;
  qp->cap.max_inline_data = tgt ? 0 : abi::kMaxInlineData;
  if (int e = map_qp_queues(ctx, *qp, xrc_qp_layout(qp->sq_entries))) return e;
  qp->handle = new_handle();
  qp->qpn = new_qpn();
  qp->ctx = ctx;
  set_qp_identity(*qp, init, pd, scq);
  qp->xrcd = x;
  if (pd) ++pd->users;
  if (scq) ++scq->users;
  if (x) ++x->users;
  *out = add_qp(std::move(qp));
  log(LogLevel::kInfo, "QP " + hex((*out)->qpn) + " created (" + qp_type_name((*out)->type) + ")");
  return 0;
}

int Device::destroy_xrc_qp(Context* ctx, Qp& qp) {
  if (qp.type == IBV_QPT_XRC_RECV && hand_over_tgt_qp(qp)) return 0;
  std::erase_if(tgt_opens_, [&](const auto& o) { return o.second.second == &qp; });
  if (qp.type == IBV_QPT_XRC_SEND) {
    --qp.pd->users;
    --qp.send_cq->users;
  }
  Xrcd* x = qp.xrcd;
  remove_qp(ctx, qp);
  if (x) {
    --x->users;
    xrcd_put(x);
  }
  return 0;
}

// ---------------------------------------------------------------- ibv_open_qp

int Device::open_xrc_qp(Context* ctx, uint32_t xrcd, uint32_t qpn, uint32_t* handle, Qp** out) {
  Xrcd* x = opened_xrcd(ctx, xrcd);
  Qp* qp = find_qp_by_qpn(qpn);
  if (!x || !qp || qp->type != IBV_QPT_XRC_RECV || qp->xrcd != x)
    return refuse(EINVAL, "ibv_open_qp: QP " + hex(qpn) + " is no XRC TGT QP of an XRC domain this program opened");
  if (tgt_opens_.size() >= DeviceLimits::kMaxQp) return ENOMEM;  // this program's opens are among them
  *handle = new_handle();
  tgt_opens_[*handle] = {ctx, qp};
  *out = qp;
  tracer_.event(TraceKind::kQpOpen).u("ctx", ctx->id).u("qp", qp->qpn).u("xrcd", x->handle);
  return 0;
}

Qp* Device::opened_qp(Context* ctx, uint32_t handle) {
  auto it = tgt_opens_.find(handle);
  return it != tgt_opens_.end() && it->second.first == ctx ? it->second.second : nullptr;
}

int Device::close_opened_qp(Context* ctx, uint32_t handle) {
  if (!opened_qp(ctx, handle)) return EINVAL;
  tgt_opens_.erase(handle);
  return 0;
}

// The TGT QP's creator destroys it while another context holds it through ibv_open_qp: the QP
// goes on, owned by that context under that handle (the kernel keeps a shared TGT QP alive until
// its last handle goes: Annex A14 lets the creating process exit while others use the QP).
bool Device::hand_over_tgt_qp(Qp& qp) {
  auto it = std::find_if(tgt_opens_.begin(), tgt_opens_.end(),
                         [&](const auto& o) { return o.second.second == &qp && o.second.first != qp.ctx; });
  if (it == tgt_opens_.end()) return false;
  Context* from = qp.ctx;
  Context* to = it->second.first;
  const uint32_t handle = it->first;
  tgt_opens_.erase(it);
  std::erase_if(tgt_opens_, [&](const auto& o) { return o.second.second == &qp && o.second.first == from; });
  std::unique_ptr<Qp> keep = std::move(qps_[qp.handle]);
  qps_.erase(qp.handle);
  from->qps.erase(std::remove(from->qps.begin(), from->qps.end(), qp.handle), from->qps.end());
  const uint64_t bytes = xrc_qp_layout(qp.sq_entries).charged;
  refund_queue_memory(from, bytes);
  to->queue_bytes += bytes;  // charged past the limit if need be: the QP exists already
  queue_bytes_ += bytes;
  qp.handle = handle;
  qp.ctx = to;
  to->qps.push_back(handle);
  qps_[handle] = std::move(keep);
  tracer_.event(TraceKind::kQpHandover).u("qp", qp.qpn).u("from_ctx", from->id).u("to_ctx", to->id);
  return true;
}

}  // namespace simnic::core
