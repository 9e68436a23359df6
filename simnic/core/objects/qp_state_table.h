// The QP state machine's transition table: which (from, to) moves ibv_modify_qp allows and,
// per QP type, the attributes each move requires and permits (IBA 11.2.4.2 / Table 91; the
// same rows as the kernel's qp_state_table in drivers/infiniband/core/verbs.c).
#pragma once
#include <cstdint>
#include <string>

#include <infiniband/verbs.h>

namespace simnic::core {

struct QpTransition {
  bool valid = false;
  uint32_t required = 0;  // ibv_qp_attr_mask bits, IBV_QP_STATE excluded
  uint32_t optional = 0;
};

QpTransition qp_transition(ibv_qp_state from, ibv_qp_state to, ibv_qp_type type);

// ib_modify_qp_is_ok(): the target is `to` (the caller passes `from` when the mask lacks
// IBV_QP_STATE); IBV_QP_CUR_STATE only from RTR, RTS, SQD, SQE; every required bit present and
// nothing outside required|optional|IBV_QP_STATE. On failure `why` names the rule broken.
bool qp_modify_is_ok(ibv_qp_state from, ibv_qp_state to, ibv_qp_type type, uint32_t mask, std::string* why);

// uverbs' modify_qp_mask(): the attributes an XRC QP has no use for are dropped from the mask
// before it is checked (an INI QP's responder ones, a TGT QP's requester ones), so programs
// written for RC (perftest -c XRC) may pass them.
uint32_t xrc_ignored_attrs_removed(ibv_qp_type type, uint32_t mask);

const char* qp_state_name(ibv_qp_state state);
const char* qp_type_name(ibv_qp_type type);  // "RC", "UC", "UD"
const char* qp_attr_mask_name(uint32_t single_bit);
std::string qp_attr_mask_names(uint32_t mask);  // "IBV_QP_STATE|IBV_QP_PORT"

}  // namespace simnic::core
