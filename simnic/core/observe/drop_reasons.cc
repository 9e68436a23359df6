#include "simnic/core/observe/drop_reasons.h"

#include <cstddef>

namespace simnic::core {

namespace {

using C = DeviceCounters;
constexpr LogLevel kWarn = LogLevel::kWarn, kInfo = LogLevel::kInfo, kDebug = LogLevel::kDebug;

// In the order of enum class Drop.
constexpr DropReason kDropTable[] = {
    {&C::rx_drop_malformed, "malformed", true, kDebug, "not a well-formed RoCEv2 packet",
     "IBA 9.2 (base transport header)"},
    {&C::rx_drop_icrc, "bad_icrc", true, kDebug, "bad ICRC: corrupted, or not computed as RoCEv2 does",
     "IBA Annex A17 (RoCEv2 ICRC)"},
    {&C::rx_drop_wrong_source, "wrong_port", true, kWarn, "not from a NIC's UDP port", ""},
    {&C::rx_drop_ud_throttled, "ud_throttled", false, kWarn, "UD sweep guard: a new sender during a QPN/Q_Key sweep",
     ""},
    {&C::rx_drop_no_qp, "no_qp", true, kWarn, "no such QP", ""},
    {&C::rx_drop_unexpected, "wrong_transport", true, kWarn, "opcode of another transport", ""},
    {&C::rx_drop_wrong_source, "wrong_peer", true, kWarn, "not from the QP's peer",
     "IBA 9.6.1.5.1 (source address check)"},
    {&C::rx_drop_qp_state, "request_state", true, kWarn, "QP cannot receive in this state",
     "IBA 10.3.1 (a QP receives from RTR on)"},
    {&C::rx_drop_qp_state, "response_state", true, kInfo, "a response for a QP that is not sending", ""},
    {&C::rx_drop_bad_msn, "bad_msn", true, kInfo, "an ACK whose MSN counts messages never sent", ""},
    {&C::rx_drop_qkey, "qkey", false, kInfo, "the datagram's Q_Key is not the QP's", "IBA 10.2.5 (Q_Key check)"},
    {&C::rx_drop_no_wqe, "ud_no_wqe", false, kInfo, "no receive WQE posted (UD has no RNR: the datagram is lost)", ""},
    {&C::rx_drop_ud_too_long, "ud_too_long", true, kWarn,
     "a datagram longer than the receive WQE: datagram dropped, WQE kept", "IBA 9.9.3, class D"},
    {&C::rx_drop_uc_message, "uc_message", true, kWarn, "UC message discarded", "IBA 9.8.3.1 (UC PSN rules)"},
    {&C::rx_drop_mcast, "multicast", true, kInfo, "a datagram to a group that no QP here takes",
     "IBA 10.5 (multicast)"},
    {&C::rx_drop_unexpected, "xrc_direction", false, kInfo,
     "an XRC INI QP hears responses only, a TGT QP requests only", "IBA Annex A14 (XRC)"},
    {nullptr, "cm_not_decodable", false, kInfo, "QP1: not a CM MAD this NIC decodes", ""},
    {nullptr, "cm_malformed_req", false, kWarn, "QP1: malformed REQ", ""},
};
static_assert(sizeof kDropTable / sizeof kDropTable[0] == size_t(Drop::kCmMalformedReq) + 1,
              "one row per Drop, in its order");

}  // namespace

const DropReason& drop_reason(Drop d) { return kDropTable[size_t(d)]; }

TraceEvent trace_drop(Tracer& tracer, Drop d, uint32_t qpn, const std::string& detail) {
  const DropReason& r = drop_reason(d);
  TraceEvent e = tracer.event(TraceKind::kPktDrop);
  e.s("drop", r.name).s("reason", r.explanation);
  if (r.counter) e.s("counter", DeviceCounters::name_of(r.counter));
  if (*r.rule) e.s("rule", r.rule);
  if (qpn) e.u("qp", qpn);
  if (!detail.empty()) e.s("detail", detail);
  return e;
}

}  // namespace simnic::core
