// What every engine and verb does to report work: a CQE into a CQ's ring (with the completion
// event it may owe), the flush an error state implies (IBA 10.8, 11.4.2), an affiliated
// asynchronous event. Reaches the notifier, counters, tracer, journal and clock, and the two
// engine steps a flush and a CQE depend on, given as hooks.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include <infiniband/verbs.h>

#include "simnic/core/env.h"
#include "simnic/core/objects/objects.h"
#include "simnic/core/observe/counters.h"
#include "simnic/core/observe/journal.h"
#include "simnic/core/observe/trace.h"

namespace simnic::core {

class Completions {
 public:
  struct EngineHooks {
    // Makes the application-memory writes still queued (the bytes a CQE reports land first).
    std::function<void()> flush_dma_writes;
    // The completer's: completes the QP's oldest send WQE with `status`.
    std::function<void(Qp&, ibv_wc_status)> complete_send_wqe;
  };
  Completions(Notifier& notifier, DeviceCounters& counters, Tracer& tracer, Journal& journal, const uint64_t& now,
              EngineHooks hooks)
      : notifier_(notifier),
        counters_(counters),
        tracer_(tracer),
        journal_(journal),
        now_(now),
        hooks_(std::move(hooks)) {}
  Completions(const Completions&) = delete;
  Completions& operator=(const Completions&) = delete;

  void push_cqe(Cq& cq, const ibv_wc& wc, bool solicited);
  void flush_qp(Qp& qp);  // ERR state: complete everything posted with WR_FLUSH_ERR
  void flush_sq(Qp& qp);  // SQE state: the send queue only
  void send_async_event(Context* ctx, ibv_event_type type, uint32_t handle);
  // After a CQE of ctx's: the sequence moves on, and a poller asleep on it is due a wake-up.
  void note_cqe_written(Context* ctx);
  // Wakes the pollers due one, once per context (simnicd: at the end of every event).
  void wake_sleepers();
  // A context going away is no longer woken (its page is about to be unmapped).
  void forget(const Context* ctx);

 private:
  Notifier& notifier_;
  DeviceCounters& counters_;
  Tracer& tracer_;
  Journal& journal_;
  const uint64_t& now_;
  EngineHooks hooks_;
  // Contexts with a poller asleep that a CQE written in this event owes a wake-up: one
  // FUTEX_WAKE per context per event rather than one per CQE (a 64-CQE receive batch woke a
  // sleeping poller 64 times, each a system call, while the poller had not yet run to count
  // itself awake).
  std::vector<Context*> wake_due_;
};

}  // namespace simnic::core
