// The control requests of the ordinary verbs: PDs, MRs, memory windows, completion channels,
// CQs, QPs, SRQs, address handles, multicast. Decoded here, carried out by Device.
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "simnic/abi/daemon_alive.h"
#include "simnic/service/control_ops.h"

namespace simnic::service::control {

using namespace simnic::abi;
using namespace simnic::core;

namespace {

// An enum field of a request, read as the raw 32 bits the client sent: loading a value outside
// the enum's range through the enum type is undefined behaviour, so it is checked first.
uint32_t raw_field(std::span<const uint8_t> body, size_t offset) {
  uint32_t v = 0;
  if (offset + sizeof v <= body.size()) std::memcpy(&v, body.data() + offset, sizeof v);
  return v;
}

bool is_qp_type(uint32_t v) {
  for (ibv_qp_type t :
       {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_RAW_PACKET, IBV_QPT_XRC_SEND, IBV_QPT_XRC_RECV, IBV_QPT_DRIVER})
    if (v == uint32_t(t)) return true;
  return false;
}

// ibv_modify_qp's enum fields: those the mask names must be valid values (else EINVAL); the
// others are never read by the NIC, may be garbage in a real program, and are zeroed.
bool qp_attr_enums_valid(std::span<const uint8_t> body, ModifyQpReq* req) {
  constexpr size_t base = offsetof(ModifyQpReq, attr);
  struct Field {
    size_t offset;
    int mask_bit;
    uint32_t lo, hi;
  };
  const Field fields[] = {
      {base + offsetof(ibv_qp_attr, qp_state), IBV_QP_STATE, IBV_QPS_RESET, IBV_QPS_ERR},
      {base + offsetof(ibv_qp_attr, cur_qp_state), IBV_QP_CUR_STATE, IBV_QPS_RESET, IBV_QPS_ERR},
      {base + offsetof(ibv_qp_attr, path_mtu), IBV_QP_PATH_MTU, IBV_MTU_256, IBV_MTU_4096},
      {base + offsetof(ibv_qp_attr, path_mig_state), IBV_QP_PATH_MIG_STATE, IBV_MIG_MIGRATED, IBV_MIG_ARMED},
  };
  const int mask = int(raw_field(body, offsetof(ModifyQpReq, attr_mask)));
  for (const Field& f : fields) {
    const uint32_t v = raw_field(body, f.offset);
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

ControlReply cq_reply(Cq& cq) { return ok(CreateCqReply{cq.handle, cq.cqe, cq.entries, 0, cq.mem.size}, cq.mem); }

}  // namespace

uint32_t offset_in(const ShmRegion& mem, const void* p) {
  return uint32_t(static_cast<const uint8_t*>(p) - static_cast<const uint8_t*>(mem.addr));
}

ControlReply alloc_pd(Request& r) {
  HandleReply rep{};
  if (int e = r.dev.memory_verbs().alloc_pd(r.ctx, &rep.handle)) return fail(e);
  return ok(rep);
}

ControlReply reg_mr(Request& r, const RegMrReq& q) {
  Mr* mr = nullptr;
  if (int e = r.dev.memory_verbs().reg_mr(r.ctx, q.pd, q.addr, q.length, q.iova, q.access, &mr)) return fail(e);
  // Shared pages: a refusal only means the NIC reaches this MR by pid; the I/O layer closes
  // the descriptor either way (the NIC maps the memfd, it keeps no descriptor).
  r.dev.memory_verbs().share_pages(*mr, r.fds.empty() ? -1 : r.fds[0], q.pages_base);
  return ok(RegMrReply{mr->handle, mr->lkey, mr->rkey, 0});
}

ControlReply alloc_mw(Request& r, const AllocMwReq& q) {
  // Checked before the cast: a value outside the enum is undefined behaviour once loaded.
  if (q.type != IBV_MW_TYPE_1 && q.type != IBV_MW_TYPE_2) return fail(EINVAL);
  Mw* mw = nullptr;
  if (int e = r.dev.memory_verbs().alloc_mw(r.ctx, q.pd, ibv_mw_type(q.type), &mw)) return fail(e);
  return ok(AllocMwReply{mw->handle, mw->rkey});
}

ControlReply create_comp_channel(Request& r) {
  if (r.fds.empty() || r.fds[0] < 0) return fail(EINVAL);
  if (int e = r.check_fd(FdRole::kEventSocket, r.fds[0])) return fail(e);
  HandleReply rep{};
  if (int e = r.dev.queue_verbs().create_channel(r.ctx, r.fds[0], &rep.handle)) return fail(e);
  r.fds[0] = -1;
  return ok(rep);
}

ControlReply create_cq(Request& r, const CreateCqReq& q) {
  // The kernel's create_cq refuses a vector the device does not have (uverbs_cmd.c: EINVAL).
  if (q.comp_vector >= Addressing::num_comp_vectors())
    return fail(r.dev.journal().refuse(EINVAL, "comp_vector " + std::to_string(q.comp_vector) +
                                                   " does not exist: the NIC has " +
                                                   std::to_string(Addressing::num_comp_vectors()) +
                                                   " completion vectors (ibv_context.num_comp_vectors), 0 to " +
                                                   std::to_string(Addressing::num_comp_vectors() - 1)));
  Cq* cq = nullptr;
  if (int e = r.dev.queue_verbs().create_cq(r.ctx, q.cqe, q.channel, &cq)) return fail(e);
  return cq_reply(*cq);
}

ControlReply resize_cq(Request& r, const ResizeCqReq& q) {
  Cq* cq = nullptr;
  if (int e = r.dev.queue_verbs().resize_cq(r.ctx, q.handle, q.cqe, &cq)) return fail(e);
  return cq_reply(*cq);
}

// The page an idle ibv_poll_cq sleeps on (context_page.cc), once per context, and with it
// simnicd's read-only "alive" page (abi/daemon_alive.h), which the shim reads on every post.
ControlReply map_context_page(Request& r) {
  ShmRegion* page = nullptr;
  if (int e = r.dev.context_verbs().map_context_page(r.ctx, &page)) return fail(e);
  const int alive = r.hooks.daemon_alive_fd ? r.hooks.daemon_alive_fd() : -1;
  ControlReply reply =
      ok(MapContextPageReply{uint32_t(page->size), alive >= 0 ? uint32_t(abi::kDaemonAliveBytes) : 0}, *page);
  if (alive >= 0) reply.fds.push_back(alive);
  return reply;
}

// Posts that send themselves (abi/direct_send.h): the NIC's UDP socket, once per context. From
// then on the NIC lends the context's RC QPs their next PSN whenever they have nothing to send.
ControlReply open_direct_send(Request& r) {
  if (r.ctx->direct_send) return fail(EALREADY);
  const int fd = r.hooks.direct_send_socket ? r.hooks.direct_send_socket() : -1;
  if (fd < 0) return fail(EOPNOTSUPP);
  r.dev.context_verbs().allow_direct_send(r.ctx);
  ControlReply reply = ok(OpenDirectSendReply{r.dev.config().ipv4, r.dev.config().udp_port});
  reply.fds.push_back(fd);
  return reply;
}

ControlReply create_qp(Request& r, const CreateQpReq& q) {
  // Only declared ibv_qp_type values reach the cast (create_qp refuses those it lacks).
  if (!is_qp_type(q.qp_type)) return fail(EOPNOTSUPP);
  ibv_qp_init_attr init{};
  init.qp_type = ibv_qp_type(q.qp_type);
  init.sq_sig_all = int(q.sq_sig_all);
  init.cap = q.cap;
  Qp* qp = nullptr;
  if (int e = r.dev.queue_verbs().create_qp(r.ctx, init, q.pd, q.send_cq, q.recv_cq, q.srq, &qp)) return fail(e);
  return ok(qp_reply(*qp), qp->mem);
}

CreateQpReply qp_reply(const Qp& qp) {
  CreateQpReply rep{};
  rep.handle = qp.handle;
  rep.qp_num = qp.qpn;
  rep.cap = qp.cap;
  rep.sq_entries = qp.sq_entries;
  rep.rq_entries = qp.rq_entries;
  rep.sq_offset = offset_in(qp.mem, qp.sq);
  rep.rq_offset = offset_in(qp.mem, qp.rq);
  rep.mem_bytes = qp.mem.size;
  return rep;
}

// The body is read again as raw bytes: the enum fields are checked before they are loaded.
ControlReply modify_qp(Request& r, const ModifyQpReq&) {
  ModifyQpReq req;
  if (!qp_attr_enums_valid(r.body, &req)) return fail(EINVAL);
  return fail(r.dev.queue_verbs().modify_qp(r.ctx, req.qp, req.attr, req.attr_mask, r.now));
}

ControlReply query_qp(Request& r, const QueryQpReq& q) {
  QueryQpReply rep{};
  Qp* qp = nullptr;
  if (int e = r.dev.queue_verbs().query_qp(r.ctx, q.qp, &rep.attr, &qp)) return fail(e);
  rep.cap = qp->cap;
  rep.qp_type = qp->type;
  rep.sq_sig_all = qp->sq_sig_all;
  return ok(rep);
}

ControlReply create_srq(Request& r, const CreateSrqReq& q) {
  Srq* srq = nullptr;
  if (int e = r.dev.queue_verbs().create_srq(r.ctx, q.pd, q.attr, &srq)) return fail(e);
  return ok(srq_reply(*srq), srq->mem);
}

CreateSrqReply srq_reply(const Srq& srq) {
  return CreateSrqReply{srq.handle, srq.entries, srq.attr, offset_in(srq.mem, srq.slots), 0, srq.mem.size};
}

ControlReply modify_srq(Request& r, const ModifySrqReq& q) {
  return fail(r.dev.queue_verbs().modify_srq(r.ctx, q.srq, q.attr, q.attr_mask));
}

ControlReply query_srq(Request& r, const HandleReq& q) {
  QuerySrqReply rep{};
  if (int e = r.dev.queue_verbs().query_srq(r.ctx, q.handle, &rep.attr)) return fail(e);
  return ok(rep);
}

ControlReply create_ah(Request& r, const CreateAhReq& q) {
  HandleReply rep{};
  if (int e = r.dev.memory_verbs().create_ah(r.ctx, q.pd, q.attr, &rep.handle)) return fail(e);
  return ok(rep);
}

ControlReply attach_mcast(Request& r, const McastReq& q) {
  return fail(r.dev.queue_verbs().attach_mcast(r.ctx, q.qp, q.gid, q.lid));
}

ControlReply detach_mcast(Request& r, const McastReq& q) {
  return fail(r.dev.queue_verbs().detach_mcast(r.ctx, q.qp, q.gid, q.lid));
}

}  // namespace simnic::service::control
