#include "simnic/core/shared_parts.h"

#include "simnic/core/device.h"

namespace simnic::core {

SharedParts::SharedParts(Device& dev)
    : journal(dev.env_.logger, dev.counters_, dev.tracer_, dev.now_, dev.tables()),
      trace_points(dev.tracer_, dev.config_, dev.tables()),
      completions(dev.env_.notifier, dev.counters_, dev.tracer_, journal, dev.now_,
                  Completions::EngineHooks{[&dev] { dev.engines_.dma.flush_dma_writes(); },
                                           [&dev](Qp& qp, ibv_wc_status status) {
                                             dev.engines_.completer.complete_send_wqe(qp, status);
                                           }}),
      qp_states(dev.tracer_, journal, trace_points, completions,
                QpStates::EngineHooks{[&dev](Qp& qp) { dev.engines_.requester.mark_busy(qp); },
                                      [&dev](Qp& qp) { dev.engines_.requester.not_busy(qp); },
                                      [&dev](Qp& qp) { dev.engines_.requester.idle(qp); },
                                      [&dev](Qp& qp) { dev.engines_.congestion.sync(qp, true); },
                                      [&dev](Qp& qp) { dev.engines_.requester.end_lend(qp, dev.now_); }}) {}

}  // namespace simnic::core
