#include "simnic/core/control_dispatch.h"
#include "simnic/core/control_reply.h"

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace simnic::core {

using namespace simnic::abi;
using namespace simnic::core::control;

namespace {

ControlReply text(const std::string& s, int status = 0) {
  ControlReply r;
  r.status = status;
  r.body.assign(s.begin(), s.end());
  return r;
}

// An enum field of a request, read as the raw 32 bits the client sent: loading a value outside
// the enum's range through the enum type is undefined behaviour, so it is checked first.
template <class Req>
uint32_t raw_field(std::span<const uint8_t> body, size_t offset) {
  uint32_t v = 0;
  if (body.size() == sizeof(Req) && offset + sizeof v <= body.size()) std::memcpy(&v, body.data() + offset, sizeof v);
  return v;
}

bool is_qp_type(uint32_t v) {
  for (ibv_qp_type t : {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_RAW_PACKET, IBV_QPT_XRC_SEND,
                        IBV_QPT_XRC_RECV, IBV_QPT_DRIVER})
    if (v == uint32_t(t)) return true;
  return false;
}

// ibv_modify_qp's enum fields: those the mask names must be valid values (else EINVAL); the
// others are never read by the NIC, may be garbage in a real program, and are zeroed.
bool qp_attr_enums_valid(std::span<const uint8_t> body, ModifyQpReq* req) {
  constexpr size_t base = offsetof(ModifyQpReq, attr);
  struct Field { size_t offset; int mask_bit; uint32_t lo, hi; };
  const Field fields[] = {
      {base + offsetof(ibv_qp_attr, qp_state), IBV_QP_STATE, IBV_QPS_RESET, IBV_QPS_ERR},
      {base + offsetof(ibv_qp_attr, cur_qp_state), IBV_QP_CUR_STATE, IBV_QPS_RESET, IBV_QPS_ERR},
      {base + offsetof(ibv_qp_attr, path_mtu), IBV_QP_PATH_MTU, IBV_MTU_256, IBV_MTU_4096},
      {base + offsetof(ibv_qp_attr, path_mig_state), IBV_QP_PATH_MIG_STATE, IBV_MIG_MIGRATED, IBV_MIG_ARMED},
  };
  const int mask = int(raw_field<ModifyQpReq>(body, offsetof(ModifyQpReq, attr_mask)));
  for (const Field& f : fields) {
    const uint32_t v = raw_field<ModifyQpReq>(body, f.offset);
    if ((mask & f.mask_bit) && (v < f.lo || v > f.hi)) return false;
  }
  std::memcpy(static_cast<void*>(req), body.data(), sizeof *req);
  for (const Field& f : fields) {
    if (mask & f.mask_bit) continue;
    const uint32_t zero = 0;
    std::memcpy(reinterpret_cast<uint8_t*>(req) + f.offset, &zero, sizeof zero);
  }
  return true;
}

}  // namespace

ControlDispatcher::ControlDispatcher(Device& device, pid_t daemon_pid, Hooks hooks)
    : dev_(device), daemon_pid_(daemon_pid), hooks_(std::move(hooks)) {}

int ControlDispatcher::check_fd(FdRole role, int fd, const ControlSession& s) const {
  return hooks_.check_fd ? hooks_.check_fd(role, fd, s) : 0;
}

void ControlDispatcher::close(ControlSession& s) {
  if (s.cm_client) dev_.cm().close_client(s.cm_client, 0);
  s.cm_client = 0;
  if (s.ctx) dev_.close_context(s.ctx);
  s.ctx = nullptr;
}

// Every refusal carries the reason the Device gave for it, if any, as its body (control.h).
ControlReply ControlDispatcher::handle(ControlSession& s, Op op, std::span<const uint8_t> body,
                                       std::vector<int>& fds, uint64_t now) {
  dev_.take_refusal();  // none left over from an earlier request
  ControlReply r = handle_op(s, op, body, fds, now);
  std::string why = dev_.take_refusal();
  if (r.status != 0 && r.body.empty()) r.body.assign(why.begin(), why.end());
  return r;
}

ControlReply ControlDispatcher::handle_op(ControlSession& s, Op op, std::span<const uint8_t> body,
                                          std::vector<int>& fds, uint64_t now) {
  if (op == Op::Hello) {
    HelloReq req;
    if (!decode(body, &req)) return fail(EINVAL);
    if (req.abi_version != kAbiVersion) return fail(EPROTO);
    if (s.greeted) return fail(EALREADY);
    if (fds.size() >= 2) {  // an ibv_context: doorbell eventfd + async-event socket
      if (int e = check_fd(FdRole::kDoorbell, fds[0], s)) return fail(e);
      if (int e = check_fd(FdRole::kEventSocket, fds[1], s)) return fail(e);
    }
    s.greeted = true;
    if (fds.size() >= 2) {
      s.ctx = dev_.open_context(s.pid, s.uid, fds[0], fds[1]);
      fds[0] = fds[1] = -1;
    }
    HelloReply rep{};
    std::snprintf(rep.name, sizeof rep.name, "%s", dev_.config().name.c_str());
    rep.node_guid = dev_.node_guid_be();
    uint32_t ip = dev_.config().ipv4;
    uint8_t b[4] = {uint8_t(ip >> 24), uint8_t(ip >> 16), uint8_t(ip >> 8), uint8_t(ip)};
    std::memcpy(&rep.ipv4, b, 4);
    rep.daemon_pid = uint32_t(daemon_pid_);
    rep.abi_version = kAbiVersion;
    rep.num_comp_vectors = 1;
    return ok(rep);
  }
  if (!s.greeted) return fail(EPROTO);

  // Queries that need no context.
  switch (op) {
    case Op::Status:
      return text(dev_.status_text() + (hooks_.extra_status ? hooks_.extra_status() : ""));
    case Op::SetFault: {
      if (!hooks_.set_faults) return fail(EOPNOTSUPP);
      int st = 0;
      std::string out = hooks_.set_faults(std::string(body.begin(), body.end()), &st);
      return text(out, st);
    }
    case Op::Step: {
      if (!hooks_.step) return fail(EOPNOTSUPP);
      int st = 0;
      std::string out = hooks_.step(std::string(body.begin(), body.end()), &st);
      return text(out, st);
    }
    case Op::QueryDevice: return ok(QueryDeviceReply{dev_.device_attr()});
    case Op::QueryPort: {
      QueryPortReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      if (req.port_num != 1) return fail(EINVAL);
      return ok(QueryPortReply{dev_.port_attr()});
    }
    case Op::QueryGid: {
      QueryGidReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      if (req.port_num != 1) return fail(EINVAL);
      GidEntry e;
      if (int st = dev_.query_gid(req.index, &e)) return fail(st);  // ENODATA: an empty slot
      QueryGidReply rep{};
      rep.gid = e.gid;
      rep.gid_type = e.type;
      return ok(rep);
    }
    default: break;
  }
  if (is_cm_op(op)) return handle_cm(s, op, body, fds, now);
  if (!s.ctx) return fail(EPROTO);  // a query-only connection cannot create objects
  Context* ctx = s.ctx;

  switch (op) {
    case Op::AllocPd: {
      HandleReply rep{};
      if (int e = dev_.alloc_pd(ctx, &rep.handle)) return fail(e);
      return ok(rep);
    }
    case Op::DeallocPd: {
      HandleReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      return fail(dev_.dealloc_pd(ctx, req.handle));
    }
    case Op::RegMr: {
      RegMrReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      Mr* mr = nullptr;
      if (int e = dev_.reg_mr(ctx, req.pd, req.addr, req.length, req.iova, req.access, &mr)) return fail(e);
      return ok(RegMrReply{mr->handle, mr->lkey, mr->rkey, 0});
    }
    case Op::DeregMr: {
      HandleReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      return fail(dev_.dereg_mr(ctx, req.handle));
    }
    case Op::AllocMw: {
      AllocMwReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      // Checked before the cast: a value outside the enum is undefined behaviour once loaded.
      if (req.type != IBV_MW_TYPE_1 && req.type != IBV_MW_TYPE_2) return fail(EINVAL);
      Mw* mw = nullptr;
      if (int e = dev_.alloc_mw(ctx, req.pd, ibv_mw_type(req.type), &mw)) return fail(e);
      return ok(AllocMwReply{mw->handle, mw->rkey});
    }
    case Op::DeallocMw: {
      HandleReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      return fail(dev_.dealloc_mw(ctx, req.handle));
    }
    case Op::CreateCompChannel: {
      if (fds.empty() || fds[0] < 0) return fail(EINVAL);
      if (int e = check_fd(FdRole::kEventSocket, fds[0], s)) return fail(e);
      HandleReply rep{};
      if (int e = dev_.create_channel(ctx, fds[0], &rep.handle)) return fail(e);
      fds[0] = -1;
      return ok(rep);
    }
    case Op::DestroyCompChannel: {
      HandleReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      return fail(dev_.destroy_channel(ctx, req.handle));
    }
    case Op::CreateCq: {
      CreateCqReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      Cq* cq = nullptr;
      if (int e = dev_.create_cq(ctx, req.cqe, req.channel, &cq)) return fail(e);
      CreateCqReply rep{cq->handle, cq->cqe, cq->entries, 0, cq->mem.size};
      ControlReply r = ok(rep);
      attach(r, cq->mem);
      return r;
    }
    case Op::DestroyCq: {
      HandleReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      return fail(dev_.destroy_cq(ctx, req.handle));
    }
    case Op::MapContextPage: {
      ShmRegion* page = nullptr;
      if (int e = dev_.map_context_page(ctx, &page)) return fail(e);
      return ok(MapContextPageReply{uint32_t(page->size), 0}, *page);
    }
    case Op::ResizeCq: {
      ResizeCqReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      Cq* cq = nullptr;
      if (int e = dev_.resize_cq(ctx, req.handle, req.cqe, &cq)) return fail(e);
      ControlReply r = ok(CreateCqReply{cq->handle, cq->cqe, cq->entries, 0, cq->mem.size});
      attach(r, cq->mem);
      return r;
    }
    case Op::CreateQp: {
      CreateQpReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      // Only declared ibv_qp_type values reach the cast (create_qp refuses those it lacks).
      if (!is_qp_type(req.qp_type)) return fail(EOPNOTSUPP);
      ibv_qp_init_attr init{};
      init.qp_type = ibv_qp_type(req.qp_type);
      init.sq_sig_all = int(req.sq_sig_all);
      init.cap = req.cap;
      Qp* qp = nullptr;
      if (int e = dev_.create_qp(ctx, init, req.pd, req.send_cq, req.recv_cq, req.srq, &qp)) return fail(e);
      CreateQpReply rep{};
      rep.handle = qp->handle;
      rep.qp_num = qp->qpn;
      rep.cap = qp->cap;
      rep.sq_entries = qp->sq_entries;
      rep.rq_entries = qp->rq_entries;
      rep.sq_offset = uint32_t(reinterpret_cast<uint8_t*>(qp->sq) - static_cast<uint8_t*>(qp->mem.addr));
      rep.rq_offset = uint32_t(reinterpret_cast<uint8_t*>(qp->rq) - static_cast<uint8_t*>(qp->mem.addr));
      rep.mem_bytes = qp->mem.size;
      ControlReply r = ok(rep);
      attach(r, qp->mem);
      return r;
    }
    case Op::ModifyQp: {
      ModifyQpReq req;
      if (body.size() != sizeof req || !qp_attr_enums_valid(body, &req)) return fail(EINVAL);
      return fail(dev_.modify_qp(ctx, req.qp, req.attr, req.attr_mask, now));
    }
    case Op::TakeNotices:
      return text(dev_.take_notices(ctx));
    case Op::ExplainQp: {
      HandleReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      std::string why;
      int e = dev_.explain_qp(ctx, req.handle, &why);
      return e ? fail(e) : text(why);
    }
    case Op::QueryQp: {
      QueryQpReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      QueryQpReply rep{};
      Qp* qp = nullptr;
      if (int e = dev_.query_qp(ctx, req.qp, &rep.attr, &qp)) return fail(e);
      rep.cap = qp->cap;
      rep.qp_type = qp->type;
      rep.sq_sig_all = qp->sq_sig_all;
      return ok(rep);
    }
    case Op::DestroyQp: {
      HandleReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      return fail(dev_.destroy_qp(ctx, req.handle));
    }
    case Op::CreateSrq: {
      CreateSrqReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      Srq* srq = nullptr;
      if (int e = dev_.create_srq(ctx, req.pd, req.attr, &srq)) return fail(e);
      CreateSrqReply rep{};
      rep.handle = srq->handle;
      rep.entries = srq->entries;
      rep.attr = srq->attr;
      rep.wqe_offset = uint32_t(reinterpret_cast<uint8_t*>(srq->slots) - static_cast<uint8_t*>(srq->mem.addr));
      rep.mem_bytes = srq->mem.size;
      ControlReply r = ok(rep);
      attach(r, srq->mem);
      return r;
    }
    case Op::ModifySrq: {
      ModifySrqReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      return fail(dev_.modify_srq(ctx, req.srq, req.attr, req.attr_mask));
    }
    case Op::QuerySrq: {
      HandleReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      QuerySrqReply rep{};
      if (int e = dev_.query_srq(ctx, req.handle, &rep.attr)) return fail(e);
      return ok(rep);
    }
    case Op::DestroySrq: {
      HandleReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      return fail(dev_.destroy_srq(ctx, req.handle));
    }
    case Op::CreateAh: {
      CreateAhReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      HandleReply rep{};
      if (int e = dev_.create_ah(ctx, req.pd, req.attr, &rep.handle)) return fail(e);
      return ok(rep);
    }
    case Op::DestroyAh: {
      HandleReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      return fail(dev_.destroy_ah(ctx, req.handle));
    }
    case Op::AttachMcast:
    case Op::DetachMcast: {
      McastReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      return fail(op == Op::AttachMcast ? dev_.attach_mcast(ctx, req.qp, req.gid, req.lid)
                                        : dev_.detach_mcast(ctx, req.qp, req.gid, req.lid));
    }
    default:
      return handle_xrc_op(ctx, op, body, fds);
  }
}

}  // namespace simnic::core
