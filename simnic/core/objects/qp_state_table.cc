#include "simnic/core/objects/qp_state_table.h"

#include <array>

namespace simnic::core {

namespace {

// Mask groups, as IBA Table 91 lists them per transition.
constexpr uint32_t kPkeyPort = IBV_QP_PKEY_INDEX | IBV_QP_PORT;
constexpr uint32_t kPath = IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE;

struct Row {
  ibv_qp_state from, to;
  // Required and optional masks for RC, UC and UD.
  uint32_t rc_req, rc_opt, uc_req, uc_opt, ud_req, ud_opt;
};

// Any state may go to RESET or ERR with no attributes (listed separately below).
constexpr Row kRows[] = {
    {IBV_QPS_RESET, IBV_QPS_INIT, kPkeyPort | IBV_QP_ACCESS_FLAGS, 0, kPkeyPort | IBV_QP_ACCESS_FLAGS, 0,
     kPkeyPort | IBV_QP_QKEY, 0},
    {IBV_QPS_INIT, IBV_QPS_INIT, 0, kPkeyPort | IBV_QP_ACCESS_FLAGS, 0, kPkeyPort | IBV_QP_ACCESS_FLAGS, 0,
     kPkeyPort | IBV_QP_QKEY},
    {IBV_QPS_INIT, IBV_QPS_RTR,
     IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
     IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
     IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
     IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY},
    {IBV_QPS_RTR, IBV_QPS_RTS,
     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
     IBV_QP_CUR_STATE | kPath | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER, IBV_QP_SQ_PSN,
     IBV_QP_CUR_STATE | kPath | IBV_QP_ACCESS_FLAGS, IBV_QP_SQ_PSN, IBV_QP_CUR_STATE | IBV_QP_QKEY},
    {IBV_QPS_RTS, IBV_QPS_RTS, 0, IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | kPath | IBV_QP_MIN_RNR_TIMER, 0,
     IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | kPath, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY},
    {IBV_QPS_RTS, IBV_QPS_SQD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY, 0,
     IBV_QP_EN_SQD_ASYNC_NOTIFY},
    {IBV_QPS_SQD, IBV_QPS_RTS, 0, IBV_QP_CUR_STATE | kPath | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER, 0,
     IBV_QP_CUR_STATE | kPath | IBV_QP_ACCESS_FLAGS, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY},
    {IBV_QPS_SQD, IBV_QPS_SQD, 0,
     IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |
         IBV_QP_MAX_DEST_RD_ATOMIC | kPath | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_MIN_RNR_TIMER,
     0, IBV_QP_AV | kPath | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY},
};

// XRC INI (IBV_QPT_XRC_SEND) and TGT (IBV_QPT_XRC_RECV) QPs, per transition (Annex A14; the
// kernel's qp_state_table XRC columns): an INI QP is an RC requester with no responder, so it
// takes none of the responder's attributes; a TGT QP is an RC responder with no requester.
struct XrcRow {
  ibv_qp_state from, to;
  uint32_t ini_req, ini_opt, tgt_req, tgt_opt;
};

constexpr uint32_t kRcRtsOpt = IBV_QP_CUR_STATE | kPath | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER;
constexpr XrcRow kXrcRows[] = {
    {IBV_QPS_RESET, IBV_QPS_INIT, kPkeyPort | IBV_QP_ACCESS_FLAGS, 0, kPkeyPort | IBV_QP_ACCESS_FLAGS, 0},
    {IBV_QPS_INIT, IBV_QPS_INIT, 0, kPkeyPort | IBV_QP_ACCESS_FLAGS, 0, kPkeyPort | IBV_QP_ACCESS_FLAGS},
    {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
     IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
     IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
     IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX},
    {IBV_QPS_RTR, IBV_QPS_RTS,
     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
     kRcRtsOpt & ~IBV_QP_MIN_RNR_TIMER, IBV_QP_TIMEOUT | IBV_QP_SQ_PSN, kRcRtsOpt},
    {IBV_QPS_RTS, IBV_QPS_RTS, 0, kRcRtsOpt & ~IBV_QP_MIN_RNR_TIMER, 0, kRcRtsOpt},
    {IBV_QPS_RTS, IBV_QPS_SQD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY},
    {IBV_QPS_SQD, IBV_QPS_RTS, 0, kRcRtsOpt & ~IBV_QP_MIN_RNR_TIMER, 0, kRcRtsOpt},
    {IBV_QPS_SQD, IBV_QPS_SQD, 0,
     IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | kPath |
         IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
     0,
     IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_MAX_DEST_RD_ATOMIC | kPath | IBV_QP_ACCESS_FLAGS |
         IBV_QP_PKEY_INDEX | IBV_QP_MIN_RNR_TIMER},
};

QpTransition xrc_transition(ibv_qp_state from, ibv_qp_state to, bool tgt) {
  for (const XrcRow& r : kXrcRows)
    if (r.from == from && r.to == to)
      return tgt ? QpTransition{true, r.tgt_req, r.tgt_opt} : QpTransition{true, r.ini_req, r.ini_opt};
  return {};  // SQE -> RTS: an XRC send queue error takes the QP to ERR, as RC
}

// SQE -> RTS exists for UC and UD only: an RC send queue error takes the QP to ERR instead.
constexpr uint32_t kSqeToRtsUcOpt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS;
constexpr uint32_t kSqeToRtsUdOpt = IBV_QP_CUR_STATE | IBV_QP_QKEY;

constexpr const char* kStateNames[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};

constexpr std::pair<uint32_t, const char*> kMaskNames[] = {
    {IBV_QP_STATE, "IBV_QP_STATE"},
    {IBV_QP_CUR_STATE, "IBV_QP_CUR_STATE"},
    {IBV_QP_EN_SQD_ASYNC_NOTIFY, "IBV_QP_EN_SQD_ASYNC_NOTIFY"},
    {IBV_QP_ACCESS_FLAGS, "IBV_QP_ACCESS_FLAGS"},
    {IBV_QP_PKEY_INDEX, "IBV_QP_PKEY_INDEX"},
    {IBV_QP_PORT, "IBV_QP_PORT"},
    {IBV_QP_QKEY, "IBV_QP_QKEY"},
    {IBV_QP_AV, "IBV_QP_AV"},
    {IBV_QP_PATH_MTU, "IBV_QP_PATH_MTU"},
    {IBV_QP_TIMEOUT, "IBV_QP_TIMEOUT"},
    {IBV_QP_RETRY_CNT, "IBV_QP_RETRY_CNT"},
    {IBV_QP_RNR_RETRY, "IBV_QP_RNR_RETRY"},
    {IBV_QP_RQ_PSN, "IBV_QP_RQ_PSN"},
    {IBV_QP_MAX_QP_RD_ATOMIC, "IBV_QP_MAX_QP_RD_ATOMIC"},
    {IBV_QP_ALT_PATH, "IBV_QP_ALT_PATH"},
    {IBV_QP_MIN_RNR_TIMER, "IBV_QP_MIN_RNR_TIMER"},
    {IBV_QP_SQ_PSN, "IBV_QP_SQ_PSN"},
    {IBV_QP_MAX_DEST_RD_ATOMIC, "IBV_QP_MAX_DEST_RD_ATOMIC"},
    {IBV_QP_PATH_MIG_STATE, "IBV_QP_PATH_MIG_STATE"},
    {IBV_QP_CAP, "IBV_QP_CAP"},
    {IBV_QP_DEST_QPN, "IBV_QP_DEST_QPN"},
    {IBV_QP_RATE_LIMIT, "IBV_QP_RATE_LIMIT"},
};

bool valid_state(int s) { return s >= IBV_QPS_RESET && s <= IBV_QPS_ERR; }

}  // namespace

uint32_t xrc_ignored_attrs_removed(ibv_qp_type type, uint32_t mask) {
  if (type == IBV_QPT_XRC_SEND) return mask & ~uint32_t(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (type == IBV_QPT_XRC_RECV) return mask & ~uint32_t(IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY);
  return mask;
}

const char* qp_type_name(ibv_qp_type t) {
  switch (t) {
    case IBV_QPT_RC: return "RC";
    case IBV_QPT_UC: return "UC";
    case IBV_QPT_UD: return "UD";
    case IBV_QPT_XRC_SEND: return "XRC_INI";
    case IBV_QPT_XRC_RECV: return "XRC_TGT";
    default: return "this QP type";
  }
}

const char* qp_state_name(ibv_qp_state s) { return valid_state(s) ? kStateNames[s] : "UNKNOWN"; }

const char* qp_attr_mask_name(uint32_t bit) {
  for (auto& [b, n] : kMaskNames)
    if (b == bit) return n;
  return "IBV_QP_(unknown bit)";
}

std::string qp_attr_mask_names(uint32_t mask) {
  std::string out;
  for (uint32_t bit = 1; bit && bit <= mask; bit <<= 1) {
    if (!(mask & bit)) continue;
    if (!out.empty()) out += "|";
    out += qp_attr_mask_name(bit);
  }
  return out;
}

QpTransition qp_transition(ibv_qp_state from, ibv_qp_state to, ibv_qp_type type) {
  if (!valid_state(from) || !valid_state(to)) return {};
  if (type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV) {
    if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) return {true, 0, 0};
    return xrc_transition(from, to, type == IBV_QPT_XRC_RECV);
  }
  if (type != IBV_QPT_RC && type != IBV_QPT_UC && type != IBV_QPT_UD) return {};
  if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) return {true, 0, 0};
  if (from == IBV_QPS_RESET && to == IBV_QPS_RESET) return {true, 0, 0};
  if (from == IBV_QPS_SQE && to == IBV_QPS_RTS) {
    if (type == IBV_QPT_UC) return {true, 0, kSqeToRtsUcOpt};
    if (type == IBV_QPT_UD) return {true, 0, kSqeToRtsUdOpt};
    return {};
  }
  for (const Row& r : kRows) {
    if (r.from != from || r.to != to) continue;
    switch (type) {
      case IBV_QPT_RC: return {true, r.rc_req, r.rc_opt};
      case IBV_QPT_UC: return {true, r.uc_req, r.uc_opt};
      default: return {true, r.ud_req, r.ud_opt};
    }
  }
  return {};
}

bool qp_modify_is_ok(ibv_qp_state from, ibv_qp_state to, ibv_qp_type type, uint32_t mask, std::string* why) {
  auto fail = [&](std::string s) {
    if (why) *why = std::move(s);
    return false;
  };
  if (!valid_state(from) || !valid_state(to)) return fail("not a QP state");
  const std::string move = std::string(qp_state_name(from)) + "->" + qp_state_name(to);
  if ((mask & IBV_QP_CUR_STATE) && from != IBV_QPS_RTR && from != IBV_QPS_RTS && from != IBV_QPS_SQD &&
      from != IBV_QPS_SQE)
    return fail("IBV_QP_CUR_STATE may only be given from RTR, RTS, SQD or SQE, not " +
                std::string(qp_state_name(from)));
  QpTransition t = qp_transition(from, to, type);
  if (!t.valid) return fail(move + " is not a valid QP transition for " + qp_type_name(type));
  uint32_t missing = t.required & ~mask;
  if (missing)
    return fail(move + " on " + qp_type_name(type) + " requires " + qp_attr_mask_names(t.required) + "; missing " +
                qp_attr_mask_names(missing));
  uint32_t extra = mask & ~(t.required | t.optional | IBV_QP_STATE);
  if (extra)
    return fail(qp_attr_mask_names(extra) + (extra & (extra - 1) ? " are" : " is") + " not allowed on " + move +
                " for " + qp_type_name(type) +
                (t.required | t.optional ? " (allowed: " + qp_attr_mask_names(t.required | t.optional) + ")" : ""));
  return true;
}

}  // namespace simnic::core
