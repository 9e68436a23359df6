// Every cell of the QP transition table: 7 x 7 state pairs for RC, UC and UD. The expected
// rows are written out here from IBA Table 91 (as the kernel's qp_state_table has them), so
// a slip in either copy shows up as a difference.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "simnic/core/objects/qp_state_table.h"

namespace simnic::core {
namespace {

constexpr uint32_t PKEY = IBV_QP_PKEY_INDEX, PORT = IBV_QP_PORT, QKEY = IBV_QP_QKEY, ACCESS = IBV_QP_ACCESS_FLAGS,
                   AV = IBV_QP_AV, MTU = IBV_QP_PATH_MTU, DQPN = IBV_QP_DEST_QPN, RQPSN = IBV_QP_RQ_PSN,
                   DEST_RD = IBV_QP_MAX_DEST_RD_ATOMIC, RNR_TIMER = IBV_QP_MIN_RNR_TIMER, ALT = IBV_QP_ALT_PATH,
                   SQPSN = IBV_QP_SQ_PSN, TIMEOUT = IBV_QP_TIMEOUT, RETRY = IBV_QP_RETRY_CNT,
                   RNR_RETRY = IBV_QP_RNR_RETRY, QP_RD = IBV_QP_MAX_QP_RD_ATOMIC, CUR = IBV_QP_CUR_STATE,
                   MIG = IBV_QP_PATH_MIG_STATE, SQD_NOTIFY = IBV_QP_EN_SQD_ASYNC_NOTIFY;

struct Row {
  uint32_t req[3];  // RC, UC, UD
  uint32_t opt[3];
};

using Key = std::pair<ibv_qp_state, ibv_qp_state>;

const std::map<Key, Row>& expected() {
  static const std::map<Key, Row> rows = {
      {{IBV_QPS_RESET, IBV_QPS_RESET}, {{0, 0, 0}, {0, 0, 0}}},
      {{IBV_QPS_RESET, IBV_QPS_ERR}, {{0, 0, 0}, {0, 0, 0}}},
      {{IBV_QPS_RESET, IBV_QPS_INIT}, {{PKEY | PORT | ACCESS, PKEY | PORT | ACCESS, PKEY | PORT | QKEY}, {0, 0, 0}}},
      {{IBV_QPS_INIT, IBV_QPS_RESET}, {{0, 0, 0}, {0, 0, 0}}},
      {{IBV_QPS_INIT, IBV_QPS_ERR}, {{0, 0, 0}, {0, 0, 0}}},
      {{IBV_QPS_INIT, IBV_QPS_INIT}, {{0, 0, 0}, {PKEY | PORT | ACCESS, PKEY | PORT | ACCESS, PKEY | PORT | QKEY}}},
      {{IBV_QPS_INIT, IBV_QPS_RTR},
       {{AV | MTU | DQPN | RQPSN | DEST_RD | RNR_TIMER, AV | MTU | DQPN | RQPSN, 0},
        {ALT | ACCESS | PKEY, ALT | ACCESS | PKEY, PKEY | QKEY}}},
      {{IBV_QPS_RTR, IBV_QPS_RESET}, {{0, 0, 0}, {0, 0, 0}}},
      {{IBV_QPS_RTR, IBV_QPS_ERR}, {{0, 0, 0}, {0, 0, 0}}},
      {{IBV_QPS_RTR, IBV_QPS_RTS},
       {{TIMEOUT | RETRY | RNR_RETRY | SQPSN | QP_RD, SQPSN, SQPSN},
        {CUR | ALT | ACCESS | RNR_TIMER | MIG, CUR | ALT | ACCESS | MIG, CUR | QKEY}}},
      {{IBV_QPS_RTS, IBV_QPS_RESET}, {{0, 0, 0}, {0, 0, 0}}},
      {{IBV_QPS_RTS, IBV_QPS_ERR}, {{0, 0, 0}, {0, 0, 0}}},
      {{IBV_QPS_RTS, IBV_QPS_RTS},
       {{0, 0, 0}, {CUR | ACCESS | ALT | MIG | RNR_TIMER, CUR | ACCESS | ALT | MIG, CUR | QKEY}}},
      {{IBV_QPS_RTS, IBV_QPS_SQD}, {{0, 0, 0}, {SQD_NOTIFY, SQD_NOTIFY, SQD_NOTIFY}}},
      {{IBV_QPS_SQD, IBV_QPS_RESET}, {{0, 0, 0}, {0, 0, 0}}},
      {{IBV_QPS_SQD, IBV_QPS_ERR}, {{0, 0, 0}, {0, 0, 0}}},
      {{IBV_QPS_SQD, IBV_QPS_RTS},
       {{0, 0, 0}, {CUR | ALT | ACCESS | RNR_TIMER | MIG, CUR | ALT | ACCESS | MIG, CUR | QKEY}}},
      {{IBV_QPS_SQD, IBV_QPS_SQD},
       {{0, 0, 0},
        {PORT | AV | TIMEOUT | RETRY | RNR_RETRY | QP_RD | DEST_RD | ALT | ACCESS | PKEY | RNR_TIMER | MIG,
         AV | ALT | ACCESS | PKEY | MIG, PKEY | QKEY}}},
      {{IBV_QPS_SQE, IBV_QPS_RESET}, {{0, 0, 0}, {0, 0, 0}}},
      {{IBV_QPS_SQE, IBV_QPS_ERR}, {{0, 0, 0}, {0, 0, 0}}},
      {{IBV_QPS_SQE, IBV_QPS_RTS}, {{0, 0, 0}, {0, CUR | ACCESS, CUR | QKEY}}},
      {{IBV_QPS_ERR, IBV_QPS_RESET}, {{0, 0, 0}, {0, 0, 0}}},
      {{IBV_QPS_ERR, IBV_QPS_ERR}, {{0, 0, 0}, {0, 0, 0}}},
  };
  return rows;
}

// An RC QP never enters SQE (its send errors take it to ERR, IBA 10.3.1), so simnic refuses
// SQE->RTS for RC where the kernel's table, which is type-blind about validity, allows it.
bool rc_never_in_sqe(ibv_qp_state from, ibv_qp_state to, ibv_qp_type type) {
  return from == IBV_QPS_SQE && to == IBV_QPS_RTS && type == IBV_QPT_RC;
}

constexpr ibv_qp_state kStates[] = {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
                                    IBV_QPS_SQD,   IBV_QPS_SQE,  IBV_QPS_ERR};
constexpr ibv_qp_type kTypes[] = {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD};

TEST(QpStateTable, EveryCellMatchesTable91) {
  int cells = 0;
  for (auto from : kStates)
    for (auto to : kStates)
      for (int t = 0; t < 3; ++t) {
        ++cells;
        QpTransition got = qp_transition(from, to, kTypes[t]);
        auto it = rc_never_in_sqe(from, to, kTypes[t]) ? expected().end() : expected().find({from, to});
        SCOPED_TRACE(std::string(qp_state_name(from)) + "->" + qp_state_name(to) + " type " + std::to_string(t));
        if (it == expected().end()) {
          EXPECT_FALSE(got.valid);
          continue;
        }
        EXPECT_TRUE(got.valid);
        EXPECT_EQ(got.required, it->second.req[t]) << qp_attr_mask_names(got.required);
        EXPECT_EQ(got.optional, it->second.opt[t]) << qp_attr_mask_names(got.optional);
      }
  EXPECT_EQ(cells, 147);
}

// The rules on top of the table, cell by cell: each valid move succeeds with exactly its
// required attributes, fails without any one of them, and fails with one it does not allow.
TEST(QpStateTable, ModifyChecksRequiredAndAllowedBitsOfEveryValidCell) {
  for (const auto& [key, row] : expected())
    for (int t = 0; t < 3; ++t) {
      auto [from, to] = key;
      if (rc_never_in_sqe(from, to, kTypes[t])) continue;
      SCOPED_TRACE(std::string(qp_state_name(from)) + "->" + qp_state_name(to) + " type " + std::to_string(t));
      std::string why;
      const uint32_t req = row.req[t] | IBV_QP_STATE;
      EXPECT_TRUE(qp_modify_is_ok(from, to, kTypes[t], req, &why)) << why;
      for (uint32_t bit = 1; bit <= IBV_QP_DEST_QPN; bit <<= 1) {
        if (row.req[t] & bit) {
          EXPECT_FALSE(qp_modify_is_ok(from, to, kTypes[t], req & ~bit, &why)) << bit;
        }
        if (!((row.req[t] | row.opt[t] | IBV_QP_STATE) & bit)) {
          EXPECT_FALSE(qp_modify_is_ok(from, to, kTypes[t], req | bit, &why)) << qp_attr_mask_name(bit);
        }
      }
    }
}

TEST(QpStateTable, InvalidMovesAreRefusedWhateverTheMask) {
  std::string why;
  EXPECT_FALSE(qp_modify_is_ok(IBV_QPS_RESET, IBV_QPS_RTS, IBV_QPT_RC, 0x1fffff, &why));
  EXPECT_FALSE(qp_modify_is_ok(IBV_QPS_INIT, IBV_QPS_RTS, IBV_QPT_RC, IBV_QP_STATE | IBV_QP_SQ_PSN, &why));
  EXPECT_FALSE(qp_modify_is_ok(IBV_QPS_ERR, IBV_QPS_RTS, IBV_QPT_UD, IBV_QP_STATE, &why));
  EXPECT_FALSE(why.empty());
}

}  // namespace
}  // namespace simnic::core
