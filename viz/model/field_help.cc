#include "viz/model/field_help.h"

#include <map>

namespace simnic::viz {

namespace {

struct Help {
  const char* key;
  const char* text;
};

// Fields that mean the same in every event.
constexpr Help kCommon[] = {
    {"seq", "per-NIC event number: every state change gets the next one, with no gaps"},
    {"t_ns", "simulated time since the NIC started, in ns (it stops while the NIC is paused in step mode)"},
    {"nic", "which simulated NIC (one simnicd process = one host's RNIC)"},
    {"kind", "what happened"},
    {"qp", "the local queue pair number (QPN) this concerns"},
    {"cq", "the completion queue's handle"},
    {"ctx", "the application context (one ibv_open_device)"},
    {"pd", "protection domain: MRs and QPs of one PD may be used together"},
    {"wall_ns", "wall-clock time matching t_ns, used to line up several NICs' traces"},
};

// Fields of packets: the RoCEv2 headers, decoded.
constexpr Help kPacket[] = {
    {"src", "IPv4 source address (the sending NIC's loopback address)"},
    {"dst", "IPv4 destination address; UDP port 4791 marks RoCEv2"},
    {"opcode",
     "BTH opcode: transport (RC/UC/UD/XRC) and operation; FIRST/MIDDLE/LAST/ONLY split a message into MTU-sized "
     "packets"},
    {"opcode_num", "BTH opcode byte: top 3 bits transport, low 5 bits operation"},
    {"op_flags",
     "what the opcode is, from the NIC's opcode table: REQUEST/RESPONSE, FIRST/MIDDLE/LAST, "
     "SEND/WRITE/READ_REQ/READ_RESP/ATOMIC/ATOMIC_WRITE/ACK, and the transport RC/UC/UD/XRC"},
    {"psn", "BTH packet sequence number (24 bits, wraps at 2^24): the responder expects PSNs in order"},
    {"dest_qp", "BTH destination QP: which queue pair on the receiving NIC gets the packet"},
    {"ack_req", "BTH AckReq bit: the requester asks for an ACK for this packet (set on the last packet of a message)"},
    {"se", "BTH solicited event bit: wakes a receiver that armed its CQ with solicited_only"},
    {"payload", "bytes of data carried after the headers (at most the path MTU)"},
    {"fault", "what simnicd's fault injector did to this packet (drop, dup, delay)"},
    {"reth", "RDMA extended transport header: where in the remote memory a WRITE/READ goes"},
    {"reth.va", "RETH virtual address: the remote buffer's address, checked against the MR the rkey names"},
    {"reth.rkey", "RETH remote key: which remote MR, and so which rights (REMOTE_WRITE/READ)"},
    {"reth.len", "RETH DMA length: the whole message's length in bytes (not just this packet)"},
    {"aeth", "ACK extended transport header: positive ACK, RNR NAK or NAK, plus the MSN"},
    {"aeth.syndrome", "AETH syndrome byte: 0b00 = ACK (low bits: credits), 0b01 = RNR NAK (timer), 0b11 = NAK (code)"},
    {"aeth.class", "ACK, RNR_NAK (receiver not ready: no receive WQE) or NAK (an error, see code)"},
    {"aeth.value", "the syndrome's low 5 bits: credit count, RNR timer code or NAK code"},
    {"aeth.msn", "message sequence number: how many requests the responder has completed"},
    {"imm", "immediate data: 32 bits delivered in the receiver's completion (wc.imm_data)"},
    {"atomic", "atomic extended transport header: target address, rkey and operands"},
    {"atomic.va", "address of the 8-byte aligned remote word"},
    {"atomic.rkey", "remote key: the MR must allow REMOTE_ATOMIC"},
    {"atomic.swap_add", "value to swap in (CMP_AND_SWP) or to add (FETCH_AND_ADD)"},
    {"atomic.compare", "value to compare with (CMP_AND_SWP)"},
    {"atomic_ack", "atomic ACK extended transport header"},
    {"atomic_ack.orig", "the remote word's value before the atomic: returned to the requester's buffer"},
    {"deth", "datagram extended transport header (UD): the Q_Key and the sender's QP"},
    {"deth.qkey", "Q_Key: the receiving UD QP accepts the datagram only if it equals its own Q_Key"},
    {"deth.src_qp", "the sending QP's number, reported to the receiver as wc.src_qp"},
    {"ieth_rkey", "IETH: the rkey a SEND_WITH_INV invalidates at the receiver (a type 2 memory window)"},
    {"xrc_srqn",
     "XRCETH (every XRC request): the XRC SRQ at the responder the message lands in; it must be in the "
     "receiving TGT QP's XRC domain, else NAK invalid request"},
};

using FieldsByKind = std::map<std::string, std::map<std::string, std::string>>;

// Fields of the events about work requests, completions and the verbs objects.
FieldsByKind object_fields() {
  return {
      {"wqe_posted",
       {{"queue", "sq = send queue (requests this side starts), rq = receive queue (buffers for incoming SENDs)"},
        {"index", "the ring slot's free-running producer index (slot = index mod ring size)"},
        {"wr_id", "the application's own 64-bit cookie, returned unchanged in the completion"},
        {"opcode", "the work request's operation (ibv_wr_opcode)"},
        {"length", "total bytes of all scatter/gather entries"},
        {"flags", "send flags: SIGNALED = wants a CQE, INLINE = data copied into the WQE, FENCE, SOLICITED"}}},
      {"wqe_done", {{"queue", "which ring"}, {"index", "this slot is free again: the consumer index moved past it"}}},
      {"cqe",
       {{"index", "the CQ ring slot's free-running producer index"},
        {"wr_id", "the wr_id of the work request this completes"},
        {"status", "ibv_wc_status: SUCCESS, or why it failed (e.g. WR_FLUSH_ERR after the QP went to ERR)"},
        {"status_num", "the ibv_wc_status number"},
        {"opcode", "ibv_wc_opcode: which operation completed"},
        {"byte_len", "bytes transferred (for receives: bytes that arrived)"}}},
      {"qp_state",
       {{"from", "state before the transition"},
        {"to", "state after: RESET -> INIT -> RTR (can receive) -> RTS (can send); ERR flushes every WQE"},
        {"mask", "the ibv_qp_attr_mask given to ibv_modify_qp: which attributes changed"},
        {"cause", "modify_qp = the application asked; anything else = an error forced it"}}},
      {"qp_create",
       {{"type",
         "RC = reliable connected, UC = unreliable connected, UD = unreliable datagram, XRC_INI = XRC "
         "initiator (sends only), XRC_TGT = XRC target (receives into the XRC SRQs of its domain)"},
        {"sq_entries", "send queue ring size"},
        {"rq_entries", "receive queue ring size"},
        {"send_cq", "CQ for send completions"},
        {"recv_cq", "CQ for receive completions"}}},
      {"mr_create",
       {{"mr", "the MR's handle"},
        {"lkey", "local key: SGEs of local WQEs name the MR with it"},
        {"rkey", "remote key: peers name this MR with it in RETH/AtomicETH"},
        {"addr", "start of the registered range (iova)"},
        {"length", "bytes registered"},
        {"access", "ibv_access_flags: what local and remote operations may do to it"}}},
      {"mw_bind",
       {{"mw", "the window's handle"},
        {"rkey", "the window's new rkey: the old one is dead from now on"},
        {"mr", "the MR the window opens part of (0: a type 1 window was unbound)"},
        {"addr", "first byte the window opens, in the MR's addresses"},
        {"length", "bytes the window opens"},
        {"access", "the remote rights the window grants (the MR itself may grant none)"}}},
      {"cq_create", {{"cqe", "CQEs the application asked for"}, {"entries", "ring size the NIC allocated"}}},
      {"xrcd_open",
       {{"xrcd", "the XRC domain's handle (the same for every context that opened the same file)"},
        {"shared", "true: opened with a file, so every program opening that file on this NIC shares it"},
        {"opens", "how many contexts have it open now"}}},
      {"xrc_srq_create",
       {{"srqn", "the XRC SRQ number (ibv_get_srq_num): what requesters put in the XRCETH"},
        {"xrcd", "its XRC domain: only TGT QPs of this domain deliver into it"},
        {"cq", "the CQ its receives complete on"}}},
  };
}

// Fields of the events about the wire, the engines, timers, memory and multicast.
FieldsByKind protocol_fields() {
  return {
      {"nak",
       {{"psn", "the PSN the NAK names (the one expected, for a sequence error)"},
        {"code", "why the responder refused: PSN_SEQ_ERR, INVALID_REQUEST, REMOTE_ACCESS_ERR, REMOTE_OP_ERR, RNR"},
        {"rule", "the rule that was broken, in words"}}},
      {"retransmit",
       {{"psn", "the first PSN sent again (go-back-N from there)"},
        {"cause",
         "nak_seq = NAK sequence error, timeout = no ACK in 4.096us x 2^timeout, rnr = RNR NAK, read_gap, "
         "implied_nak"}}},
      {"timer",
       {{"what", "ack_timeout = local ACK timer (retransmit if it fires), rnr_wait = waiting after an RNR NAK"},
        {"action", "armed, fired or stopped"},
        {"due_ns", "simulated time it fires at"}}},
      {"dma",
       {{"dir", "read = the NIC reads host memory (to send), write = the NIC writes host memory (received data)"},
        {"key", "the lkey or rkey the access was checked against"},
        {"addr", "host virtual address"},
        {"length", "bytes moved"}}},
      {"odp_fault",
       {{"mr", "the ODP MR's handle"},
        {"key", "the rkey (remote access) or lkey (local) the access named"},
        {"addr", "the first byte asked for (iova)"},
        {"length", "bytes asked for"},
        {"side",
         "remote = a peer's WRITE, READ or atomic (NAK remote access error); local = this NIC's own "
         "gather or scatter (IBV_WC_LOC_PROT_ERR)"}}},
      {"error", {{"status", "the completion status this error produces"}, {"rule", "the rule that was broken"}}},
      {"pkt_drop",
       {{"reason", "why the NIC discarded an incoming packet (counted, never fatal)"},
        {"drop", "the reason's name in the NIC's drop table (simnic/core/observe/drop_reasons.h)"},
        {"counter", "the counter of `simnic status` it was counted in"},
        {"rule", "the IBA rule the packet broke, when one applies"},
        {"detail", "what exactly was wrong with this packet"}}},
      {"engine_steps",
       {{"engine", "completer (a response) or responder (a request)"},
        {"psn", "the packet's PSN"},
        {"steps", "the named steps it walked, in order, as rxe's comp_state and resp_states"}}},
      {"mcast_attach",
       {{"mgid", "the group's multicast GID (MGID)"},
        {"group", "the IPv4 multicast address its datagrams are sent to (RoCEv2)"},
        {"members", "QPs of this NIC attached to the group now"}}},
      {"mcast_detach",
       {{"mgid", "the group's multicast GID (MGID)"},
        {"group", "the IPv4 multicast address its datagrams are sent to (RoCEv2)"},
        {"members", "QPs of this NIC still attached to the group"}}},
      {"mcast_deliver",
       {{"group", "the IPv4 multicast address the datagram was sent to"},
        {"src_qp", "the sending QP (from the DETH)"}}},
      {"nic_up",
       {{"addr", "this NIC's IPv4 address"},
        {"port", "UDP port (4791 = RoCEv2)"},
        {"mtu", "active path MTU in bytes"}}},
      {"step", {{"paused", "true: the NIC holds every event until `simnic step NAME next`; simulated time stops"}}},
  };
}

// Fields whose meaning depends on the kind.
const FieldsByKind& by_kind() {
  static const FieldsByKind m = [] {
    FieldsByKind all = object_fields();
    all.merge(protocol_fields());
    return all;
  }();
  return m;
}

}  // namespace

std::string explain_field(const std::string& kind, const std::string& key) {
  auto k = by_kind().find(kind);
  if (k != by_kind().end()) {
    auto f = k->second.find(key);
    if (f != k->second.end()) return f->second;
  }
  for (const Help& h : kCommon)
    if (key == h.key) return h.text;
  if (kind == "pkt_tx" || kind == "pkt_rx")
    for (const Help& h : kPacket)
      if (key == h.key) return h.text;
  return "";
}

std::string explain_kind(const std::string& kind) {
  static const std::map<std::string, std::string> m = {
      {"nic_up", "the NIC started (or a snapshot of it for a new viewer)"},
      {"ctx_open", "an application opened the device (ibv_open_device)"},
      {"ctx_close", "an application closed the device or died; its resources are freed"},
      {"pd_create", "ibv_alloc_pd"},
      {"pd_destroy", "ibv_dealloc_pd"},
      {"mr_create", "ibv_reg_mr: memory the NIC may access, with keys and rights"},
      {"mr_destroy", "ibv_dereg_mr"},
      {"dm_create", "ibv_alloc_dm: device memory held by the NIC, mapped by the program; an MR over it is zero-based"},
      {"dm_destroy", "ibv_free_dm"},
      {"mw_create", "ibv_alloc_mw: a memory window, a remote key that can open part of an MR"},
      {"mw_destroy", "ibv_dealloc_mw"},
      {"mw_bind", "a BIND_MW work request (or ibv_bind_mw) gave the window a range, rights and a new rkey"},
      {"mw_invalidate", "the window was freed by LOCAL_INV or by the peer's SEND_WITH_INV: its rkey opens nothing now"},
      {"cq_create", "ibv_create_cq: a ring the NIC writes completions into"},
      {"cq_destroy", "ibv_destroy_cq"},
      {"cq_resize", "ibv_resize_cq: a new ring; the pending completions moved into it"},
      {"qp_create", "ibv_create_qp: a send ring and a receive ring"},
      {"qp_destroy", "ibv_destroy_qp"},
      {"qp_state", "the QP changed state (ibv_modify_qp, or an error)"},
      {"xrcd_open", "ibv_open_xrcd: an XRC domain, shared by the programs that open the same file"},
      {"xrcd_close", "ibv_close_xrcd"},
      {"xrc_srq_create", "ibv_create_srq_ex (IBV_SRQT_XRC): an SRQ that XRC TGT QPs of its domain deliver into"},
      {"xrc_srq_destroy", "ibv_destroy_srq of an XRC SRQ"},
      {"qp_open", "ibv_open_qp: another context of the XRC domain got a handle on this TGT QP"},
      {"qp_handover", "the TGT QP's creator let go of it; a context that had opened it owns it now"},
      {"doorbell", "the application rang the doorbell: new WQEs to look at"},
      {"wqe_posted", "the NIC picked up a work request from a ring"},
      {"wqe_done", "a ring slot was freed (its work request finished)"},
      {"pkt_tx", "a packet left this NIC (RoCEv2 over UDP)"},
      {"pkt_rx", "a packet arrived at this NIC"},
      {"pkt_drop", "an incoming packet was discarded"},
      {"engine_steps", "the steps an engine walked for one incoming packet"},
      {"nak", "the responder refused a request: a NAK goes back"},
      {"retransmit", "the requester sends again from a PSN"},
      {"cc_cut", "a loss halved the window of bytes this NIC may have in flight towards the peer"},
      {"timer", "a transport timer changed"},
      {"dma", "the NIC read or wrote application memory"},
      {"odp_fault",
       "a DMA through an on-demand-paging MR met a page the program has not mapped: a peer's "
       "access is NAKed (remote access error), a local one completes with local protection error"},
      {"cqe", "a completion was written to a CQ"},
      {"cq_event", "a completion event was sent to the CQ's channel (ibv_get_cq_event wakes up)"},
      {"error", "a rule was broken: this is what and where"},
      {"step", "step mode turned on or off"},
      {"mcast_attach", "ibv_attach_mcast: a UD QP joined a multicast group (the NIC joins its IP group)"},
      {"mcast_detach", "ibv_detach_mcast (or the program died): a UD QP left a multicast group"},
      {"mcast_deliver", "a datagram sent to a multicast group is handed to one attached QP of this NIC"},
      {"cm_id", "rdma_create_id / rdma_destroy_id: a connection manager id on this NIC"},
      {"cm_state", "a connection manager id changed state (REQ, REP, RTU, DREQ... exchanged with the peer)"},
      {"cm_rx", "a connection manager MAD (REQ, REP, RTU, REJ, DREQ...) arrived on QP1"},
      {"cm_event", "an rdma_cm event was sent to the program's event channel (rdma_get_cm_event wakes up)"},
  };
  auto it = m.find(kind);
  return it == m.end() ? "" : it->second;
}

std::string explain_syndrome(unsigned syn) {
  unsigned cls = (syn >> 5) & 3, v = syn & 31;
  switch (cls) {
    case 0: return "ACK, credit count code " + std::to_string(v);
    case 1: return "RNR NAK: receiver not ready, wait timer code " + std::to_string(v);
    case 3:
      switch (v) {
        case 0: return "NAK: PSN sequence error (go back and resend)";
        case 1: return "NAK: invalid request";
        case 2: return "NAK: remote access error (rkey, bounds or rights)";
        case 3: return "NAK: remote operational error";
        case 4: return "NAK: invalid RD request";
        default: return "NAK code " + std::to_string(v);
      }
    default: return "reserved";
  }
}

}  // namespace simnic::viz
