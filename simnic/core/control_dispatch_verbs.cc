// Decodes issue 17's verb requests, calls the Device, encodes the replies.
#include "simnic/core/control_dispatch_verbs.h"
#include "simnic/core/control_reply.h"

#include <cerrno>
#include <functional>

namespace simnic::core {

using namespace simnic::abi;
using namespace simnic::core::control;

namespace {

ControlReply rereg_mr(Device& dev, Context* ctx, std::span<const uint8_t> body) {
  ReregMrReq req;
  if (!decode(body, &req)) return fail(EINVAL);
  Mr* mr = nullptr;
  if (int e = dev.rereg_mr(ctx, req, &mr)) return fail(e);
  return ok(RegMrReply{mr->handle, mr->lkey, mr->rkey, 0});
}

ControlReply alloc_dm(Device& dev, Context* ctx, std::span<const uint8_t> body) {
  AllocDmReq req;
  if (!decode(body, &req)) return fail(EINVAL);
  if (req.comp_mask) return fail(EINVAL);  // no ibv_alloc_dm_attr extension is known
  Dm* dm = nullptr;
  if (int e = dev.alloc_dm(ctx, req.length, req.log_align_req, &dm)) return fail(e);
  return ok(AllocDmReply{dm->handle, 0, dm->mem.size}, dm->mem);
}

ControlReply reg_dm_mr(Device& dev, Context* ctx, std::span<const uint8_t> body) {
  RegDmMrReq req;
  if (!decode(body, &req)) return fail(EINVAL);
  Mr* mr = nullptr;
  if (int e = dev.reg_dm_mr(ctx, req, &mr)) return fail(e);
  return ok(RegMrReply{mr->handle, mr->lkey, mr->rkey, 0});
}

ControlReply import_mr(Device& dev, Context* ctx, std::span<const uint8_t> body) {
  HandleReq req;
  if (!decode(body, &req)) return fail(EINVAL);
  Mr* mr = nullptr;
  if (int e = dev.import_mr(ctx, req.handle, &mr)) return fail(e);
  return ok(ImportMrReply{mr->handle, mr->pd->handle, mr->lkey, mr->rkey, mr->iova, mr->length, mr->access,
                          dev.is_dm_mr(mr->handle) ? 1u : 0u});
}

}  // namespace

ControlReply join_context(Device& dev, Context* ctx, const std::vector<int>& fds,
                          const std::function<bool(pid_t, int, int)>& same_file) {
  if (fds.size() != 1 || fds[0] < 0) return fail(EINVAL);
  if (!same_file) return fail(EOPNOTSUPP);
  const int fd = fds[0];
  return fail(dev.join_context(ctx, [&](pid_t pid, int their_fd) { return same_file(pid, their_fd, fd); }));
}

ControlReply handle_verbs_op(Device& dev, Context* ctx, Op op, std::span<const uint8_t> body) {
  switch (op) {
    case Op::ReregMr: return rereg_mr(dev, ctx, body);
    case Op::QueryClock: return ok(QueryClockReply{dev.now()});
    case Op::AllocDm: return alloc_dm(dev, ctx, body);
    case Op::FreeDm: {
      HandleReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      return fail(dev.free_dm(ctx, req.handle));
    }
    case Op::RegDmMr: return reg_dm_mr(dev, ctx, body);
    case Op::ImportPd: {
      HandleReq req;
      if (!decode(body, &req)) return fail(EINVAL);
      if (int e = dev.import_pd(ctx, req.handle)) return fail(e);
      return ok(HandleReply{req.handle, 0});
    }
    case Op::ImportMr: return import_mr(dev, ctx, body);
    default: return fail(EOPNOTSUPP);
  }
}

}  // namespace simnic::core
