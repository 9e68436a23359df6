// Where received messages land: the receive WQE a message takes (from the QP's RQ or its SRQ),
// the scatter into its buffers, and its completion when the message fails.
#include <cerrno>

#include "simnic/core/device.h"
#include "simnic/core/errors.h"

namespace simnic::core {

void ReceiveQueue::complete_recv_in_error(Qp& qp, ibv_wc_status status) {
  ibv_wc wc{};
  wc.wr_id = qp.resp.recv->wqe.wr_id;
  wc.status = status;
  wc.opcode = IBV_WC_RECV;
  wc.qp_num = qp.qpn;
  wc.src_qp = qp.attr.dest_qp_num;
  dev_.completions().push_cqe(*qp.recv_cq, wc, false);
  qp.resp.recv.reset();
}

// The receive queue a QP's receive WQEs come from: its SRQ's, or its own RQ.
ReceiveQueue::RecvQueue ReceiveQueue::recv_queue(Qp& qp) {
  if (qp.srq) return {&qp.srq->shm->ring, qp.srq->slots, qp.srq->entries};
  return {&qp.shm->rq, qp.rq, qp.rq_entries};
}

// The next receive WQE, left on its queue: false when none is posted.
bool ReceiveQueue::peek_recv_wqe(Qp& qp, RecvInProgress* out) {
  const RecvQueue q = recv_queue(qp);
  uint32_t cons = q.ring->consumer.value.load(std::memory_order_relaxed);
  uint32_t prod = q.ring->producer.value.load(std::memory_order_acquire);
  if (cons == prod) return false;
  out->wqe = q.slots[cons & (q.entries - 1)];
  out->offset = 0;
  out->from_srq = qp.srq != nullptr;
  return true;
}

// Takes the WQE peek_recv_wqe returned off its queue.
void ReceiveQueue::consume_recv_wqe(Qp& qp) {
  const RecvQueue q = recv_queue(qp);
  uint32_t cons = q.ring->consumer.value.load(std::memory_order_relaxed);
  uint32_t prod = q.ring->producer.value.load(std::memory_order_acquire);
  q.ring->consumer.value.store(cons + 1, std::memory_order_release);
  if (!qp.srq) {
    qp.resp.rq_taken_ns = dev_.now();  // ReceiveWait: the program was receiving
    dev_.tracer_.event(TraceKind::kWqeDone).u("qp", qp.qpn).s("queue", "rq").u("index", cons);
  }
  if (qp.srq) {
    // SRQ limit: one async event when the queue falls below the armed limit.
    uint32_t limit = qp.srq->shm->limit.load();
    if (limit && prod - (cons + 1) < limit && qp.srq->shm->limit.compare_exchange_strong(limit, 0)) {
      qp.srq->attr.srq_limit = 0;
      dev_.completions().send_async_event(qp.srq->ctx, IBV_EVENT_SRQ_LIMIT_REACHED, qp.srq->handle);
    }
  }
}

bool ReceiveQueue::take_recv_wqe(Qp& qp, RecvInProgress* out) {
  if (!peek_recv_wqe(qp, out)) return false;
  consume_recv_wqe(qp);
  return true;
}

// The PD a receive WQE's lkeys must belong to: an SRQ's WQEs were posted against the SRQ's PD,
// whatever the PD of the QP that takes them (IBA 10.2.9: an SRQ is created in a PD; 10.6.3.1;
// siw checks the SRQ's PD, rxe the QP's). An XRC TGT QP has no PD of its own: its SRQ's.
const Pd* ReceiveQueue::recv_pd(const Qp& qp, const RecvInProgress& r) const {
  return r.from_srq && qp.srq ? qp.srq->pd : qp.pd;
}

// Lands `len` bytes at `offset` of a receive WQE. Only the bytes placed are checked (lkey, PD,
// LOCAL_WRITE, bounds), as rxe's copy_data and ConnectX do: an SGE larger than its MR is fine
// while the message does not reach past the MR.
int ReceiveQueue::scatter_recv(const Qp& qp, const RecvInProgress& r, uint32_t offset, const uint8_t* src, uint32_t len,
                               std::string* why) {
  return dma_.scatter(qp, r.wqe.sge, r.wqe.num_sge, offset, src, len, why, recv_pd(qp, r));
}

// The error a failed scatter_recv is: a bad scatter list (class A), a message longer than the
// buffers (class C), or a DMA that failed.
Error ReceiveQueue::recv_scatter_error(int e) {
  return e == EMSGSIZE ? Error::kRecvTooShort : e == EINVAL ? Error::kRecvWqeInvalid : Error::kRecvDmaFailed;
}

}  // namespace simnic::core
