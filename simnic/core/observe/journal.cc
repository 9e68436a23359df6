// The journal's lines that are not templates: the budget's summary and the notices' queue.
#include "simnic/core/observe/journal.h"

namespace simnic::core {

// The budget's "N more lines suppressed", written when due (log_limited calls this first).
void Journal::log_budget_summary() {
  if (std::string summary = log_budget_.take_summary(now_); !summary.empty()) log(LogLevel::kWarn, summary);
}

void Journal::notice(uint32_t qpn, const std::string& text) {
  Qp* qp = tables_.find_qp_by_qpn(qpn);
  if (!qp) return;
  auto& q = qp->ctx->notices;
  if (q.size() >= 32) q.pop_front();  // a program that never asks keeps the newest only
  q.push_back(text);
}

std::string Journal::take_notices(Context* ctx) {
  std::string out;
  for (const auto& n : ctx->notices) out += n + "\n";
  ctx->notices.clear();
  return out;
}

}  // namespace simnic::core
