// Explanations on the program's own stderr: why simnic refused a verb or completed a work
// request in error, in the words of the rule that was broken. Under `simnic run` (which sets
// SIMNIC_EXPLAIN=1; `simnic run --quiet` or SIMNIC_QUIET=1 turn it off) each distinct
// explanation is printed once, prefixed "simnic: ". stdout is never touched, so a program's
// output stays what it would be on a real NIC.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "shim/shim.h"

namespace simnic::shim {
namespace {

constexpr size_t kMaxDistinct = 256;  // after that, stay quiet: a program in a loop of errors

const char* wc_status_enum(ibv_wc_status s) {
  static const char* const kNames[] = {
      "IBV_WC_SUCCESS",          "IBV_WC_LOC_LEN_ERR",       "IBV_WC_LOC_QP_OP_ERR",     "IBV_WC_LOC_EEC_OP_ERR",
      "IBV_WC_LOC_PROT_ERR",     "IBV_WC_WR_FLUSH_ERR",      "IBV_WC_MW_BIND_ERR",       "IBV_WC_BAD_RESP_ERR",
      "IBV_WC_LOC_ACCESS_ERR",   "IBV_WC_REM_INV_REQ_ERR",   "IBV_WC_REM_ACCESS_ERR",    "IBV_WC_REM_OP_ERR",
      "IBV_WC_RETRY_EXC_ERR",    "IBV_WC_RNR_RETRY_EXC_ERR", "IBV_WC_LOC_RDD_VIOL_ERR",  "IBV_WC_REM_INV_RD_REQ_ERR",
      "IBV_WC_REM_ABORT_ERR",    "IBV_WC_INV_EECN_ERR",      "IBV_WC_INV_EEC_STATE_ERR", "IBV_WC_FATAL_ERR",
      "IBV_WC_RESP_TIMEOUT_ERR", "IBV_WC_GENERAL_ERR"};
  unsigned i = s;
  return i < sizeof kNames / sizeof kNames[0] ? kNames[i] : "IBV_WC_?";
}

}  // namespace

bool explaining() {
  static const bool on = [] {
    const char* e = std::getenv("SIMNIC_EXPLAIN");
    const char* q = std::getenv("SIMNIC_QUIET");
    return e && *e && std::strcmp(e, "0") != 0 && !(q && *q && std::strcmp(q, "0") != 0);
  }();
  return on;
}

void explain(const std::string& line) {
  if (!explaining()) return;
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard lock(mu);
  if (said.size() >= kMaxDistinct || !said.insert(line).second) return;
  std::fprintf(stderr, "simnic: %s\n", line.c_str());
}

// A refusal whose reason simnicd did not give still says what is known: the NIC is gone (EIO
// from a lost connection), or where to look.
static std::string reason_or_fallback(int err, const std::string& why) {
  if (!why.empty()) return why;
  if (err == EIO) return "the NIC is gone (simnicd exited or dropped this program); `simnic status` shows what runs";
  return "simnicd gave no reason; `simnic logs` shows what the NIC logged";
}

void explain_refusal(const std::string& verb, int err, const std::string& why) {
  if (!explaining() || err == 0) return;
  const char* name = strerrorname_np(err);
  explain(verb + ": " + (name ? name : std::to_string(err)) + ": " + reason_or_fallback(err, why));
}

void explain_completion(ibv_context* context, const ibv_wc& wc) {
  if (!explaining() || wc.status == IBV_WC_SUCCESS) return;
  std::string why;
  if (rpc_text(to_shim(context), abi::Op::ExplainQp, abi::HandleReq{wc.qp_num, 0}, &why) != 0 || why.empty())
    why = "(the NIC has no more to say; `simnic logs` shows what it logged)";
  char qpn[16];
  std::snprintf(qpn, sizeof qpn, "0x%x", wc.qp_num);
  explain(std::string("QP ") + qpn + ": a work request completed with " + wc_status_enum(wc.status) + " (" +
          ibv_wc_status_str(wc.status) + "): " + why);
}

void explain_while_waiting(ibv_context* context) {
  if (!explaining()) return;
  ShimContext* c = to_shim(context);
  const int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  int64_t last = c->notices_asked_ns.load(std::memory_order_relaxed);
  if (now - last < 1'000'000'000 || !c->notices_asked_ns.compare_exchange_strong(last, now)) return;
  std::string text;
  if (rpc_text(c, abi::Op::TakeNotices, abi::HandleReq{0, 0}, &text) != 0) return;
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    if (nl > at) explain(text.substr(at, nl - at));
    at = nl + 1;
  }
}

}  // namespace simnic::shim
