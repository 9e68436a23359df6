// NIC-wide counters, shown by `simnic status`. Every drop has a counter that says why.
#pragma once
#include <cstdint>

namespace simnic::core {

#define SIMNIC_DEVICE_COUNTERS(X)                                                   \
  X(tx_packets) X(tx_bytes) X(rx_packets) X(rx_bytes)                               \
  X(rx_drop_malformed) X(rx_drop_icrc) X(rx_drop_no_qp) X(rx_drop_qp_state)         \
  X(rx_drop_wrong_source) X(rx_drop_unexpected)                                     \
  X(rx_drop_qkey) X(rx_drop_no_wqe) X(rx_drop_uc_message) X(rx_drop_out_of_sequence)  \
  X(rx_drop_mcast) X(mcast_tx_packets) X(mcast_deliveries)                          \
  X(rx_drop_bad_msn) X(rx_drop_ud_too_long) X(rx_drop_ud_throttled)                \
  X(retransmits) X(timeouts) X(timeouts_deferred) X(naks_sent) X(naks_received) X(rnr_naks_sent)         \
  X(rnr_naks_received) X(duplicates) X(acks_sent) X(acks_received)                  \
  X(completions) X(completion_errors) X(cq_overruns) X(dma_errors)

struct DeviceCounters {
#define SIMNIC_DECLARE_COUNTER(name) uint64_t name = 0;
  SIMNIC_DEVICE_COUNTERS(SIMNIC_DECLARE_COUNTER)
#undef SIMNIC_DECLARE_COUNTER

  template <class F>
  void for_each(F&& f) const {
#define SIMNIC_VISIT_COUNTER(name) f(#name, name);
    SIMNIC_DEVICE_COUNTERS(SIMNIC_VISIT_COUNTER)
#undef SIMNIC_VISIT_COUNTER
  }
};

}  // namespace simnic::core
