// The QP state changes every part of the NIC makes (a verb's modify, an engine's error, the
// end of a drain): what each state implies for the QP's queues and transport state (IBA 10.3,
// 11.2.4). The engines' own state (the busy set, congestion credit) is reached through hooks.
#pragma once
#include <cstdint>
#include <functional>

#include <infiniband/verbs.h>

#include "simnic/core/engines/completions.h"
#include "simnic/core/objects/objects.h"
#include "simnic/core/observe/journal.h"
#include "simnic/core/observe/trace.h"
#include "simnic/core/observe/trace_points.h"

namespace simnic::core {

class QpStates {
 public:
  struct EngineHooks {
    std::function<void(Qp&)> wake;            // RTS: WQEs may have been posted before it
    std::function<void(Qp&)> forget_busy;     // ERR, RESET: the engines have no more to do on it
    std::function<void(Qp&)> requester_idle;  // SQE: the requester stops
    std::function<void(Qp&)> sync_credit;     // after any change: cc_sync(qp, rewound = true)
    std::function<void(Qp&)> end_lend;        // before any change: a PSN lent to the program comes back
  };
  QpStates(Tracer& tracer, Journal& journal, TracePoints& trace_points, Completions& completions, EngineHooks hooks)
      : tracer_(tracer),
        journal_(journal),
        trace_points_(trace_points),
        completions_(completions),
        hooks_(std::move(hooks)) {}
  QpStates(const QpStates&) = delete;
  QpStates& operator=(const QpStates&) = delete;

  // `cause`: "modify_qp" for the application's ibv_modify_qp (with its attribute `mask`), else
  // what moved the QP (the error reason ibv_query_qp's explanation gives).
  void set_qp_state(Qp& qp, ibv_qp_state state, const char* cause = "modify_qp", uint32_t mask = 0);
  void reset_qp(Qp& qp);
  void check_sq_drained(Qp& qp);  // SQD: ends the drain and notifies once nothing is in flight

 private:
  Tracer& tracer_;
  Journal& journal_;
  TracePoints& trace_points_;
  Completions& completions_;
  EngineHooks hooks_;
};

}  // namespace simnic::core
