// The receive half of XRC (IBA Annex A14): an INI QP hears responses only, a TGT QP requests
// only, each routed to the XRC SRQ its XRCETH names. The XRC verbs are in objects/xrc.cc.
#include "simnic/core/device.h"
#include "simnic/core/text.h"
#include "simnic/proto/opcode_table.h"

namespace simnic::core {

using namespace simnic::proto;

// INI QPs hear responses only, TGT QPs requests only: anything else is dropped.
void Responder::xrc_receive(Qp& qp, const ParsedPacket& pkt, uint64_t now) {
  const bool request = pkt.mask & kIsRequest;
  if (qp.type == IBV_QPT_XRC_SEND && !request) return completer_.receive(qp, pkt, now);
  if (qp.type == IBV_QPT_XRC_RECV && request) {
    if (!can_receive(qp)) return;
    // The request the responder expects next goes to the SRQ its XRCETH names; duplicates and
    // gaps are answered from their PSN alone, as on RC.
    if (pkt.h.bth.psn == qp.resp.epsn && !xrc_route(qp, pkt)) return;
    return receive(qp, pkt, now);
  }
  dev_.journal().drop(Drop::kXrcDirection, qp.qpn, [&] {
    return std::string(request ? "a request for an XRC INI QP" : "a response for an XRC TGT QP");
  });
}

// The XRCETH names an XRC SRQ; it must exist and be in the TGT QP's XRC domain (Annex A14),
// else the request is refused with NAK invalid request and the TGT QP goes to ERR, as for any
// request the responder cannot accept (IBA 9.9.3.1). The TGT QP then works for that SRQ: its
// receive WQEs, its PD for every key of the request, its CQ for the completion.
bool Responder::xrc_route(Qp& tgt, const ParsedPacket& pkt) {
  const uint32_t srqn = pkt.h.xrc_srqn;
  auto it = dev_.srq_by_srqn_.find(srqn);
  Srq* srq = it == dev_.srq_by_srqn_.end() ? nullptr : it->second;
  std::string rule;
  if (!srq) rule = "the XRCETH names XRC SRQ " + hex(srqn) + ", and no XRC SRQ has that number on this NIC";
  else if (srq->xrcd != tgt.xrcd)
    rule = "the XRCETH names XRC SRQ " + hex(srqn) + ", which belongs to another XRC domain than TGT QP " +
           hex(tgt.qpn) + "'s (Annex A14: a TGT QP delivers only to SRQs of its own domain)";
  else if (tgt.resp.recv && tgt.srq != srq)
    rule = "a packet of a message in progress names XRC SRQ " + hex(srqn) + ", not the SRQ the message began in";
  if (!rule.empty()) {
    responder_error(tgt, Error::kXrcSrqInvalid, pkt.h.bth.psn, rule);
    return false;
  }
  tgt.srq = srq;
  tgt.pd = srq->pd;
  tgt.recv_cq = srq->cq;
  return true;
}

}  // namespace simnic::core
