// The extended send API (ibv_qp_to_qp_ex, ibv_wr_start ... ibv_wr_complete): WQEs are built
// in place in the shared SQ ring between wr_start and wr_complete, then published together
// with one doorbell. As in rdma-core, an error in any WR makes wr_complete post none of them.
#include <cstring>
#include <string>

#include "shim/shim.h"

using namespace simnic::abi;

namespace simnic::shim {

bool opcode_allowed(ibv_qp_type type, ibv_wr_opcode op);  // post.cc
int bind_mw_error(const ibv_context* context, const ibv_mw* mw, const ibv_mw_bind_info& b,
                  std::string* why);                                                        // post.cc
void fill_bind_mw(const ibv_mw& mw, uint32_t rkey, const ibv_mw_bind_info& b, SendWqe& w);  // post.cc

namespace {

ShimQp* to_shim_ex(ibv_qp_ex* q) { return reinterpret_cast<ShimQp*>(q); }

thread_local SendWqe t_scratch;  // where setters write after an error, so they never crash

void fail(ShimQp* q, int err) {
  if (!q->wr_err) q->wr_err = err;
  q->wr_cur = &t_scratch;
}

// Starts a new WQE with the wr_id and flags the application set on the qp_ex.
SendWqe* begin(ibv_qp_ex* qx, ibv_wr_opcode op) {
  ShimQp* q = to_shim_ex(qx);
  if (q->wr_err) return q->wr_cur = &t_scratch;
  if (!opcode_allowed(q->qpx.qp_base.qp_type, op)) return fail(q, EINVAL), q->wr_cur;
  uint32_t cons = q->shm->sq.consumer.value.load(std::memory_order_acquire);
  if (q->wr_prod - cons >= q->cap.max_send_wr) return fail(q, ENOMEM), q->wr_cur;
  SendWqe* w = &q->sq[q->wr_prod++ & (q->sq_entries - 1)];
  std::memset(w, 0, offsetof(SendWqe, sge));
  w->wr_id = qx->wr_id;
  w->opcode = op;
  w->send_flags = qx->wr_flags;
  return q->wr_cur = w;
}

void wr_send(ibv_qp_ex* q) { begin(q, IBV_WR_SEND); }
void wr_send_imm(ibv_qp_ex* q, __be32 imm) { begin(q, IBV_WR_SEND_WITH_IMM)->imm_data = imm; }
void wr_send_inv(ibv_qp_ex* q, uint32_t rkey) { begin(q, IBV_WR_SEND_WITH_INV)->imm_data = rkey; }

void rdma(ibv_qp_ex* q, ibv_wr_opcode op, uint32_t rkey, uint64_t addr) {
  SendWqe* w = begin(q, op);
  w->rkey = rkey;
  w->remote_addr = addr;
}
void wr_rdma_write(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) { rdma(q, IBV_WR_RDMA_WRITE, rkey, addr); }
void wr_rdma_read(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) { rdma(q, IBV_WR_RDMA_READ, rkey, addr); }
void wr_rdma_write_imm(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, __be32 imm) {
  rdma(q, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr);
  to_shim_ex(q)->wr_cur->imm_data = imm;
}
void wr_atomic_cmp_swp(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap) {
  rdma(q, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr);
  to_shim_ex(q)->wr_cur->compare_add = compare;
  to_shim_ex(q)->wr_cur->swap = swap;
}
void wr_atomic_fetch_add(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t add) {
  rdma(q, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr);
  to_shim_ex(q)->wr_cur->compare_add = add;
}

// RDMA ATOMIC WRITE (IBA Annex A19): the 8 bytes at atomic_wr are copied into the WQE now, as
// inline data (as rdma-core's rxe provider copies them), so no setter follows.
void wr_atomic_write(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, const void* atomic_wr) {
  if (!atomic_wr) return fail(to_shim_ex(q), EINVAL);
  rdma(q, IBV_WR_ATOMIC_WRITE, rkey, addr);
  SendWqe* w = to_shim_ex(q)->wr_cur;
  std::memcpy(w->inline_data, atomic_wr, 8);
  w->inline_len = 8;
  w->num_sge = 0;
  w->send_flags |= IBV_SEND_INLINE;
}

void wr_set_ud_addr(ibv_qp_ex* q, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  SendWqe* w = to_shim_ex(q)->wr_cur;
  if (!w || !ah) return fail(to_shim_ex(q), EINVAL);
  w->ah = ah->handle;
  w->remote_qpn = remote_qpn;
  w->remote_qkey = remote_qkey;
}

void wr_set_sge_list(ibv_qp_ex* q, size_t num_sge, const ibv_sge* sg_list) {
  ShimQp* s = to_shim_ex(q);
  if (!s->wr_cur) return fail(s, EINVAL);
  if (num_sge > s->cap.max_send_sge) return fail(s, EINVAL);
  s->wr_cur->num_sge = uint32_t(num_sge);
  s->wr_cur->inline_len = 0;
  if (num_sge) std::memcpy(s->wr_cur->sge, sg_list, num_sge * sizeof(ibv_sge));
}
void wr_set_sge(ibv_qp_ex* q, uint32_t lkey, uint64_t addr, uint32_t length) {
  ibv_sge sge{addr, length, lkey};
  wr_set_sge_list(q, 1, &sge);
}

void wr_set_inline_data_list(ibv_qp_ex* q, size_t num_buf, const ibv_data_buf* bufs) {
  ShimQp* s = to_shim_ex(q);
  if (!s->wr_cur) return fail(s, EINVAL);
  size_t total = 0;
  for (size_t i = 0; i < num_buf; ++i) total += bufs[i].length;
  if (total > s->cap.max_inline_data) return fail(s, EINVAL);
  size_t off = 0;
  for (size_t i = 0; i < num_buf; ++i) {
    std::memcpy(s->wr_cur->inline_data + off, bufs[i].addr, bufs[i].length);
    off += bufs[i].length;
  }
  s->wr_cur->inline_len = uint32_t(total);
  s->wr_cur->num_sge = 0;
  s->wr_cur->send_flags |= IBV_SEND_INLINE;
}
void wr_set_inline_data(ibv_qp_ex* q, void* addr, size_t length) {
  ibv_data_buf buf{addr, length};
  wr_set_inline_data_list(q, 1, &buf);
}

void wr_local_inv(ibv_qp_ex* q, uint32_t rkey) { begin(q, IBV_WR_LOCAL_INV)->imm_data = rkey; }
void wr_bind_mw(ibv_qp_ex* q, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* b) {
  std::string why = "ibv_wr_bind_mw without bind info";
  int e = b ? bind_mw_error(q->qp_base.context, mw, *b, &why) : EINVAL;
  if (e) {
    explain_refusal("ibv_wr_bind_mw", e, why);  // ibv_wr_complete will return e
    return fail(to_shim_ex(q), e);
  }
  fill_bind_mw(*mw, rkey, *b, *begin(q, IBV_WR_BIND_MW));
}

void wr_set_xrc_srqn(ibv_qp_ex* q, uint32_t remote_srqn) {
  ShimQp* s = to_shim_ex(q);
  if (!s->wr_cur) return fail(s, EINVAL);  // a setter before any wr_* operation
  s->wr_cur->remote_srqn = remote_srqn;
}

// Operations simnic does not offer: the batch fails at wr_complete with EOPNOTSUPP.
void wr_send_tso(ibv_qp_ex* q, void*, uint16_t, uint16_t) { fail(to_shim_ex(q), EOPNOTSUPP); }

void wr_start(ibv_qp_ex* q) {
  ShimQp* s = to_shim_ex(q);
  s->sq_mu.lock();
  s->wr_start_prod = s->wr_prod = s->shm->sq.producer.value.load(std::memory_order_relaxed);
  s->wr_err = 0;
  s->wr_cur = nullptr;
}

int wr_complete(ibv_qp_ex* q) {
  ShimQp* s = to_shim_ex(q);
  auto state = ibv_qp_state(s->shm->state.load(std::memory_order_acquire));
  if (!s->wr_err && (state == IBV_QPS_RESET || state == IBV_QPS_INIT || state == IBV_QPS_RTR)) s->wr_err = EINVAL;
  if (!s->wr_err && to_shim(q->qp_base.context)->lost.load(std::memory_order_relaxed)) s->wr_err = EIO;
  int err = s->wr_err;
  bool posted = !err && s->wr_prod != s->wr_start_prod;
  if (posted) s->shm->sq.producer.value.store(s->wr_prod, std::memory_order_release);
  if (posted) note_posts(int(s->wr_prod - s->wr_start_prod));
  s->wr_cur = nullptr;
  s->sq_mu.unlock();
  if (posted && abi::send_must_ring(*s->shm)) ring_doorbell(to_shim(q->qp_base.context));
  return err;
}

void wr_abort(ibv_qp_ex* q) {
  ShimQp* s = to_shim_ex(q);
  s->wr_cur = nullptr;
  s->sq_mu.unlock();
}

}  // namespace

constexpr uint64_t kSupportedSendOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                                       IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                                       IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
                                       IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_LOCAL_INV |
                                       IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_ATOMIC_WRITE;

bool send_ops_supported(uint64_t flags) { return (flags & ~kSupportedSendOps) == 0; }

void enable_wr_api(ShimQp* q) {
  ibv_qp_ex& x = q->qpx;
  q->ex = true;
  x.comp_mask = 0;
  x.wr_send = wr_send;
  x.wr_send_imm = wr_send_imm;
  x.wr_send_inv = wr_send_inv;
  x.wr_rdma_write = wr_rdma_write;
  x.wr_rdma_write_imm = wr_rdma_write_imm;
  x.wr_rdma_read = wr_rdma_read;
  x.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  x.wr_atomic_fetch_add = wr_atomic_fetch_add;
  x.wr_set_ud_addr = wr_set_ud_addr;
  x.wr_set_sge = wr_set_sge;
  x.wr_set_sge_list = wr_set_sge_list;
  x.wr_set_inline_data = wr_set_inline_data;
  x.wr_set_inline_data_list = wr_set_inline_data_list;
  x.wr_local_inv = wr_local_inv;
  x.wr_bind_mw = wr_bind_mw;
  x.wr_send_tso = wr_send_tso;
  x.wr_set_xrc_srqn = wr_set_xrc_srqn;
  x.wr_atomic_write = wr_atomic_write;
  x.wr_start = wr_start;
  x.wr_complete = wr_complete;
  x.wr_abort = wr_abort;
}

}  // namespace simnic::shim
