// The NIC-wide counters `simnic status` shows, each with what it counts: one table, read by
// simnicd's core (DeviceCounters, simnic/core/observe/counters.h) and by the CLI's status view, which
// cannot include the core (scripts/check_layers.py), hence here with the other shared tables.
#pragma once
#include <cstring>

namespace simnic::abi {

// X(name, what it counts). Every drop has a counter that says why (simnic/core/observe/drop_reasons.h).
#define SIMNIC_DEVICE_COUNTERS(X)                                                                               \
  X(tx_packets, "RoCEv2 packets sent")                                                                          \
  X(tx_bytes, "bytes sent (BTH to ICRC)")                                                                       \
  X(direct_sends, "of those, requests a program sent itself from this NIC's socket (a lent PSN, docs/shim.md)") \
  X(rx_packets, "packets received")                                                                             \
  X(rx_bytes, "bytes received")                                                                                 \
  X(rx_drop_malformed, "not a well-formed RoCEv2 packet")                                                       \
  X(rx_drop_icrc, "bad ICRC: corrupted, or not computed as RoCEv2 does")                                        \
  X(rx_drop_no_qp, "for a QPN this NIC does not have (a wrong dest_qp_num?)")                                   \
  X(rx_drop_qp_state, "for a QP that cannot take it now (not yet RTR, or in ERR)")                              \
  X(rx_drop_wrong_source, "from someone other than the QP's connected peer, or (loopback) not a NIC's port")    \
  X(rx_drop_unexpected, "a response nobody waits for, or another transport's opcode")                           \
  X(rx_drop_qkey, "UD: the Q_Key did not match")                                                                \
  X(rx_drop_no_wqe, "UC/UD: no receive posted (no RNR on UC/UD: the message is lost)")                          \
  X(rx_drop_uc_message, "UC messages discarded after a lost packet")                                            \
  X(rx_drop_out_of_sequence, "RC requests beyond a PSN gap (NAKed once, then dropped)")                         \
  X(rx_drop_mcast, "multicast: no QP here attached to the group, or not a UD SEND to QPN 0xFFFFFF")             \
  X(mcast_tx_packets, "UD datagrams sent to a multicast group (counted in tx_packets too)")                     \
  X(mcast_deliveries, "multicast datagrams handed to an attached QP (one per QP)")                              \
  X(rx_drop_bad_msn, "RC ACKs/NAKs whose MSN counts messages never sent (forged or corrupt)")                   \
  X(rx_drop_ud_too_long, "UD: longer than the next receive WQE (dropped, the WQE stays posted)")                \
  X(rx_drop_ud_throttled, "UD: from a new sender while the NIC saw a QPN/Q_Key sweep (docs/security.md)")       \
  X(retransmits, "packets sent again (go-back-N after a NAK, a timeout or an RNR wait)")                        \
  X(timeouts, "ACK timers that expired: no ACK in time")                                                        \
  X(timeouts_deferred, "ACK timers put off without a retry: the packet waited, it was not lost (a busy host)")  \
  X(naks_sent, "NAKs sent: a PSN gap, a bad rkey, an invalid request")                                          \
  X(naks_received, "NAKs received from peers")                                                                  \
  X(rnr_naks_sent, "RNR NAKs sent: a SEND came and no receive was posted")                                      \
  X(rnr_naks_received, "RNR NAKs received: the peer had no receive posted")                                     \
  X(receive_waits,                                                                                              \
    "RC requests that found no receive posted while the program was behind (completions to poll, or a receive " \
    "taken moments ago), and waited for its next receive instead of an RNR NAK")                                \
  X(duplicates, "requests or ACKs received twice (after a resend)")                                             \
  X(acks_sent, "ACKs and NAKs this NIC sent as a responder")                                                    \
  X(acks_received, "ACKs and NAKs its requesters received")                                                     \
  X(completions, "CQEs written")                                                                                \
  X(completion_errors, "CQEs with a status other than success")                                                 \
  X(cq_overruns, "completions lost: a CQ was full")                                                             \
  X(dma_errors, "reads or writes of a program's memory that failed")

// What counter `name` counts; nullptr for a name that is not a device counter.
inline const char* device_counter_meaning(const char* name) {
#define SIMNIC_COUNTER_MEANING(counter, meaning) \
  if (std::strcmp(name, #counter) == 0) return meaning;
  SIMNIC_DEVICE_COUNTERS(SIMNIC_COUNTER_MEANING)
#undef SIMNIC_COUNTER_MEANING
  return nullptr;
}

}  // namespace simnic::abi
