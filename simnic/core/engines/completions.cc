// CQEs, completion events, and the flush that the ERROR state implies (IBA 10.8, 11.4.2).
#include "simnic/core/engines/completions.h"

#include <algorithm>

#include "simnic/abi/wc_status.h"
#include "simnic/core/device.h"

namespace simnic::core {

// The name rdma-core gives a completion status (simnicd does not link libibverbs).
const char* wc_status_name(ibv_wc_status status) { return abi::wc_status_str(status); }

void Completions::push_cqe(Cq& cq, const ibv_wc& wc, bool solicited) {
  hooks_.flush_dma_writes();  // the bytes a CQE reports are in memory before the CQE is (issue 14)
  auto& ring = cq.shm->ring;
  uint32_t prod = ring.producer.value.load(std::memory_order_relaxed);
  uint32_t cons = ring.consumer.value.load(std::memory_order_acquire);
  if (prod - cons >= cq.entries) {
    // The CQ overran: like an RNIC, the CQ is in error and the CQE is lost (IBA 11.4.2.1).
    ++counters_.cq_overruns;
    if (!cq.overrun) {
      cq.overrun = true;
      cq.shm->overrun.store(1);
      journal_.log(LogLevel::kError, "CQ " + std::to_string(cq.handle) + " overrun: more completions than its " +
                                         std::to_string(cq.cqe) + " entries; completions are being lost");
      send_async_event(cq.ctx, IBV_EVENT_CQ_ERR, cq.handle);
    }
    return;
  }
  cq.slots[prod & (cq.entries - 1)] = wc;
  cq.timestamps[prod & (cq.entries - 1)] = now_;
  ring.producer.value.store(prod + 1, std::memory_order_release);
  note_cqe_written(cq.ctx);
  tracer_.event(TraceKind::kCqe)
      .u("cq", cq.handle)
      .u("qp", wc.qp_num)
      .u("index", prod)
      .u("wr_id", wc.wr_id)
      .s("status", wc_status_name(wc.status))
      .u("status_num", wc.status)
      .s("opcode", wc_opcode_name(wc.opcode))
      .u("byte_len", wc.byte_len);
  ++counters_.completions;
  if (wc.status != IBV_WC_SUCCESS) ++counters_.completion_errors;

  // One event per arming (ibv_req_notify_cq); "solicited only" also wakes on errors.
  uint32_t arm = cq.shm->arm.load(std::memory_order_acquire);
  bool wake = arm == abi::kCqArmNext || (arm == abi::kCqArmSolicited && (solicited || wc.status != IBV_WC_SUCCESS));
  if (wake && cq.shm->arm.compare_exchange_strong(arm, abi::kCqDisarmed) && cq.channel) {
    notifier_.completion_event(cq.channel->fd, cq.handle);
    tracer_.event(TraceKind::kCqEvent).u("cq", cq.handle);
  }
}

void Completions::send_async_event(Context* ctx, ibv_event_type type, uint32_t handle) {
  if (ctx && ctx->async_fd >= 0) notifier_.async_event(ctx->async_fd, type, handle);
}

void Completions::flush_sq(Qp& qp) {
  // Every outstanding and later send WQE completes with WR_FLUSH_ERR, signaled or not.
  uint32_t sq_prod = qp.shm->sq.producer.value.load(std::memory_order_acquire);
  if (sq_prod - qp.comp.sq_consumer > qp.sq_entries) sq_prod = qp.comp.sq_consumer + qp.sq_entries;  // a confused app
  while (qp.comp.sq_consumer != sq_prod) hooks_.complete_send_wqe(qp, IBV_WC_WR_FLUSH_ERR);
  qp.req.sq_next = qp.comp.sq_consumer;
  qp.req.pkt_in_wqe = 0;
  qp.req.rd_atomic_outstanding = 0;
  qp.comp.timer_deadline_ns = 0;
}

void Completions::flush_qp(Qp& qp) {
  flush_sq(qp);

  auto flush_recv = [&](uint64_t wr_id) {
    ibv_wc wc{};
    wc.wr_id = wr_id;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = qp.qpn;
    push_cqe(*qp.recv_cq, wc, false);
  };
  if (qp.resp.recv) {
    flush_recv(qp.resp.recv->wqe.wr_id);
    qp.resp.recv.reset();
  }
  if (qp.rq_entries) {  // WQEs on an SRQ belong to the SRQ and are not flushed
    auto& ring = qp.shm->rq;
    uint32_t cons = ring.consumer.value.load(std::memory_order_relaxed);
    uint32_t prod = ring.producer.value.load(std::memory_order_acquire);
    if (prod - cons > qp.rq_entries) prod = cons + qp.rq_entries;
    for (; cons != prod; ++cons) {
      flush_recv(qp.rq[cons & (qp.rq_entries - 1)].wr_id);
      tracer_.event(TraceKind::kWqeDone).u("qp", qp.qpn).s("queue", "rq").u("index", cons);
      ring.consumer.value.store(cons + 1, std::memory_order_release);
    }
  }
}

void Completions::note_cqe_written(Context* ctx) {
  if (!ctx || !ctx->shared) return;
  // Sequentially consistent on both sides (here: bump, then look for sleepers; the shim: count
  // itself a sleeper, then compare the sequence), so a poller either sees the new sequence or
  // is seen asleep and woken: no CQE waits out the shim's sleep timeout.
  // The wake itself waits for the end of the event (wake_sleepers), which is at most one batch
  // of packets away: the poller cannot run before the NIC's turn ends on a busy CPU anyway.
  ctx->shared->cqe_seq.fetch_add(1, std::memory_order_seq_cst);
  if (!ctx->shared->sleepers.load(std::memory_order_seq_cst)) return;
  if (std::find(wake_due_.begin(), wake_due_.end(), ctx) == wake_due_.end()) wake_due_.push_back(ctx);
}

void Completions::wake_sleepers() {
  for (Context* ctx : wake_due_)
    if (ctx->shared) notifier_.wake_sleepers(&ctx->shared->cqe_seq);
  wake_due_.clear();
}

void Completions::forget(const Context* ctx) { std::erase(wake_due_, ctx); }

}  // namespace simnic::core
