// Where received messages land: the receive WQE a message takes from a QP's RQ or its SRQ
// (with the SRQ limit event), the scatter into its buffers, and its completion when the
// message fails. Owns no state (the rings are the QP's); used by the Responder and the
// DatagramReceiver; calls MemoryAccess (the scatter) and the Device's shared helpers
// (push_cqe, send_async_event, tracer).
#pragma once
#include <cstdint>
#include <string>

#include "simnic/core/errors.h"
#include "simnic/core/objects/objects.h"

namespace simnic::core {

class Device;
class MemoryAccess;

class ReceiveQueue {
 public:
  ReceiveQueue(Device& dev, MemoryAccess& dma) : dev_(dev), dma_(dma) {}

  bool peek_recv_wqe(Qp& qp, RecvInProgress* out);  // the next receive WQE, left posted
  void consume_recv_wqe(Qp& qp);                    // takes the WQE peek_recv_wqe saw
  bool take_recv_wqe(Qp& qp, RecvInProgress* out);
  void complete_recv_in_error(Qp& qp, ibv_wc_status status);  // the receive WQE in progress
  const Pd* recv_pd(const Qp& qp, const RecvInProgress& r) const;
  int scatter_recv(const Qp& qp, const RecvInProgress& r, uint32_t offset, const uint8_t* src, uint32_t len,
                   std::string* why);
  static Error recv_scatter_error(int e);

 private:
  struct RecvQueue {
    abi::RingControl* ring;
    abi::RecvWqe* slots;
    uint32_t entries;
  };
  RecvQueue recv_queue(Qp& qp);

  Device& dev_;
  MemoryAccess& dma_;
};

}  // namespace simnic::core
