// The responder (IBA 9.7.5.2; rxe_resp.c): takes one QP's requests in PSN order and carries
// them out: SENDs into receive WQEs, WRITEs, READs (their responses sent in turns), atomics
// and ATOMIC WRITE; answers with ACKs, NAKs and RNR NAKs, in order behind owed READ responses.
// UC receive and XRC's routing to the SRQ an XRCETH names are here too (xrc_receive.cc).
// Owns the per-QP responder state's use (qp.resp). Calls Transmit (answers), MemoryAccess
// (rkeys, DMA, stages), ReceiveQueue, WindowBinding (SEND_WITH_INV), Requester (busy set,
// burst), Completer (responses for an XRC INI QP) and ReceiveWait (a request that waits for a
// receive WQE instead of an RNR NAK).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "simnic/core/engines/engine_steps.h"
#include "simnic/core/errors.h"
#include "simnic/core/objects/objects.h"
#include "simnic/proto/packet.h"

namespace simnic::core {

class Device;
class Transmit;
class MemoryAccess;
class ReceiveQueue;
class WindowBinding;
class Requester;
class Completer;
class ReceiveWait;

class Responder {
 public:
  Responder(Device& dev, Transmit& transmit, MemoryAccess& dma, ReceiveQueue& recv, WindowBinding& windows,
            Requester& requester, Completer& completer, ReceiveWait& wait)
      : dev_(dev),
        transmit_(transmit),
        dma_(dma),
        recv_(recv),
        windows_(windows),
        requester_(requester),
        completer_(completer),
        wait_(wait) {}

  // --- Entry points ---
  void receive(Qp& qp, const proto::ParsedPacket& pkt, uint64_t now);
  void xrc_receive(Qp& qp, const proto::ParsedPacket& pkt, uint64_t now);
  bool can_receive(Qp& qp);                           // false (counted, traced) in RESET, INIT and ERR
  bool send_read_responses(Qp& qp, uint32_t budget);  // true when all sent
  void forget_mr(const Mr* mr);                       // dereg_mr: messages in flight lose their MR
  // ACKs an event earns are coalesced into one per QP (send_answer_in_order); on by default.
  struct AckCoalescing {
    bool on = true;
    std::vector<uint32_t> waiting;  // QPNs with a coalesced ACK at the head of their answers
  } coalescing;
  // The answers waiting for the end of the event leave now, before a lent PSN's packet can
  // follow them (direct_send.h). False while READ responses are still owed (they stream out
  // over turns, and what the QP answers later queues behind them).
  bool send_answers_now(Qp& qp);
  // The end of an event (Device::finish_turn): the ACKs it coalesced leave, in the same send
  // as the turn's other answers (send_answer_in_order says why).
  void send_waiting_acks();
  // An ACK, RNR NAK or NAK (AETH `syndrome`) for `psn`, in PSN order behind what is owed.
  void send_ack(Qp& qp, uint8_t syndrome, uint32_t psn);

 private:
  // --- Steps ---
  RespStep resp_check_psn(Qp& qp, const proto::ParsedPacket& pkt);
  RespStep resp_duplicate(Qp& qp, const proto::ParsedPacket& pkt);
  RespStep resp_execute(Qp& qp, const proto::ParsedPacket& pkt);
  bool xrc_route(Qp& tgt, const proto::ParsedPacket& pkt);  // false: refused (NAK sent)
  // --- SEND ---
  void respond_send(Qp& qp, const proto::ParsedPacket& pkt);
  bool resp_begin_send(Qp& qp, const proto::ParsedPacket& pkt);
  void send_rnr_nak(Qp& qp, uint32_t psn, const char* what = "a SEND");
  // --- WRITE ---
  void respond_write(Qp& qp, const proto::ParsedPacket& pkt);
  bool resp_check_write(Qp& qp, const proto::ParsedPacket& pkt);
  bool resp_take_write_imm_wqe(Qp& qp, const proto::ParsedPacket& pkt);
  Error write_rkey_error(const Qp& qp) const;
  bool resp_write_payload(Qp& qp, const proto::ParsedPacket& pkt);
  // --- READ, atomics, ATOMIC WRITE (IBA Annex A19) ---
  void respond_read(Qp& qp, const proto::ParsedPacket& pkt, bool duplicate);
  void respond_atomic(Qp& qp, const proto::ParsedPacket& pkt, bool duplicate);
  void respond_atomic_write(Qp& qp, const proto::ParsedPacket& pkt, bool duplicate);
  const Mr* resp_check_atomic_write(Qp& qp, const proto::ParsedPacket& pkt, uint64_t* mr_va);
  void send_atomic_write_ack(Qp& qp, uint32_t psn);
  // --- Answers ---
  void send_answer_in_order(Qp& qp, const proto::PacketHeaders& h);  // behind owed READ responses
  void send_answer_now(Qp& qp, const proto::PacketHeaders& h);
  void complete_receive(Qp& qp, const ibv_wc& wc, const proto::ParsedPacket& pkt);  // CQE and ACK, in order
  size_t rd_atomic_owed(const Qp& qp) const;
  // --- Errors ---
  void responder_error(Qp& qp, Error e, uint32_t psn, const std::string& detail);
  void raise_responder_async_error(Qp& qp, const ErrorInfo& err);
  // The DMA into or out of `mr` failed with `err`: NAK remote access error for an ODP page
  // fault, remote operational error otherwise.
  void remote_dma_failed(Qp& qp, const Mr& mr, uint64_t va, uint64_t len, uint32_t psn, const std::string& what,
                         int err);
  // --- UC ---
  bool uc_accept(Qp& qp, const proto::ParsedPacket& pkt);
  void uc_discard(Qp& qp, uint32_t psn, const std::string& why);
  void uc_abandon_message(Qp& qp);

  // --- The units it calls ---
  Device& dev_;
  Transmit& transmit_;
  MemoryAccess& dma_;
  ReceiveQueue& recv_;
  WindowBinding& windows_;
  Requester& requester_;
  Completer& completer_;
  ReceiveWait& wait_;
};

}  // namespace simnic::core
