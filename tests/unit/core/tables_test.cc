// The work-request opcode table (simnic/abi/wr_opcodes.h), the error map and the NAK table
// (simnic/core/errors.h): what rdma-core and the IBA expect of each row.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>

#include "simnic/abi/wc_status.h"
#include "simnic/abi/wr_opcodes.h"
#include "simnic/core/errors.h"
#include "simnic/proto/headers.h"
#include "simnic/proto/opcode_table.h"

namespace simnic::core {
namespace {

using namespace simnic::abi;

TEST(WrOpcodeTable, EveryOpcodeCompletesWithTheWcOpcodeRdmaCoreReports) {
  // What libibverbs's providers (rxe, mlx5) report in ibv_wc.opcode for each ibv_wr_opcode.
  const std::pair<ibv_wr_opcode, ibv_wc_opcode> expect[] = {
      {IBV_WR_RDMA_WRITE, IBV_WC_RDMA_WRITE},        {IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WC_RDMA_WRITE},
      {IBV_WR_SEND, IBV_WC_SEND},                    {IBV_WR_SEND_WITH_IMM, IBV_WC_SEND},
      {IBV_WR_RDMA_READ, IBV_WC_RDMA_READ},          {IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WC_COMP_SWAP},
      {IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WC_FETCH_ADD}, {IBV_WR_LOCAL_INV, IBV_WC_LOCAL_INV},
      {IBV_WR_BIND_MW, IBV_WC_BIND_MW},              {IBV_WR_SEND_WITH_INV, IBV_WC_SEND},
      {IBV_WR_ATOMIC_WRITE, IBV_WC_ATOMIC_WRITE},
  };
  EXPECT_EQ(std::size(kWrOpcodes), std::size(expect));
  for (auto [wr, wc] : expect) {
    const WrOpcodeInfo* w = wr_opcode_info(wr);
    ASSERT_NE(w, nullptr) << wr;
    EXPECT_EQ(w->wc_opcode, wc) << w->name;
  }
  EXPECT_EQ(wr_opcode_info(IBV_WR_TSO), nullptr);
  EXPECT_STREQ(wr_opcode_name(IBV_WR_RDMA_WRITE_WITH_IMM), "RDMA_WRITE_WITH_IMM");
  EXPECT_STREQ(wr_opcode_name(0x7777), "UNKNOWN");
}

TEST(WrOpcodeTable, QpTypesCarryWhatIbaTable39Allows) {
  for (const WrOpcodeInfo& w : kWrOpcodes) {
    const bool local = w.props & kWrLocal;
    EXPECT_TRUE(wr_opcode_allowed(IBV_QPT_RC, w.opcode)) << w.name;
    EXPECT_TRUE(wr_opcode_allowed(IBV_QPT_XRC_SEND, w.opcode)) << w.name;
    EXPECT_FALSE(wr_opcode_allowed(IBV_QPT_XRC_RECV, w.opcode)) << w.name;  // a TGT QP posts nothing
    EXPECT_EQ(wr_opcode_allowed(IBV_QPT_UD, w.opcode), w.opcode == IBV_WR_SEND || w.opcode == IBV_WR_SEND_WITH_IMM)
        << w.name;
    const bool uc = local || ((w.props & (kWrSend | kWrWrite)) && !(w.props & kWrInv));
    EXPECT_EQ(wr_opcode_allowed(IBV_QPT_UC, w.opcode), uc) << w.name;
  }
}

TEST(WrOpcodeTable, PacketOpcodesAreTheRequestsOfTheSameOperation) {
  using namespace simnic::proto;
  for (const WrOpcodeInfo& w : kWrOpcodes) {
    if (w.props & kWrLocal) {
      EXPECT_EQ(w.only, 0xff) << w.name;
      continue;
    }
    const uint32_t kind = (w.props & kWrSend) ? kIsSend : (w.props & kWrWrite) ? kIsWrite
                          : (w.props & kWrRead) ? kIsReadReq : (w.props & kWrAtomicWrite) ? kIsAtomicWrite : kIsAtomic;
    for (uint8_t op : {w.only, w.first, w.middle, w.last}) {
      const OpcodeInfo& info = opcode_info(op);
      EXPECT_TRUE(info.mask & kIsRc) << w.name;
      EXPECT_TRUE(info.mask & kIsRequest) << w.name;
      EXPECT_TRUE(info.mask & kind) << w.name << " " << info.name;
    }
    EXPECT_EQ((opcode_info(w.only).mask & (kIsFirst | kIsLast)), uint32_t(kIsFirst | kIsLast)) << w.name;
    EXPECT_EQ(bool(opcode_info(w.last).mask & kHasImm), bool(w.props & kWrImm)) << w.name;
    EXPECT_EQ(bool(opcode_info(w.last).mask & kHasIeth), bool(w.props & kWrInv)) << w.name;
    if (wr_opcode_allowed(IBV_QPT_UC, w.opcode)) {
      EXPECT_TRUE(opcode_info(0x20 | w.only).mask & kIsUc) << w.name;
    }
    if (wr_opcode_allowed(IBV_QPT_UD, w.opcode)) {
      EXPECT_TRUE(opcode_info(0x60 | w.only).mask & kIsUd) << w.name;
    }
    EXPECT_TRUE(opcode_info(xrc_of_rc(w.only)).mask & kIsXrc) << w.name;
  }
}

TEST(ErrorMap, EveryErrorCitesItsRuleAndRespondersNak) {
  std::set<std::string> names;
  for (int i = 0; i < int(Error::kCount); ++i) {
    const ErrorInfo& e = error_info(Error(i));
    EXPECT_TRUE(names.insert(e.name).second) << e.name;
    const std::string rule = e.rule;
    EXPECT_EQ(rule.rfind("IBA ", 0), 0u) << e.name << ": " << rule;
    EXPECT_EQ(rule.find('?'), std::string::npos) << e.name;
    EXPECT_EQ(rule.find("..."), std::string::npos) << e.name;
    EXPECT_NE(std::strlen(e.iba_class), 0u) << e.name;
    const bool responder = std::string(e.iba_class).rfind("responder", 0) == 0;
    // The responder's errors are NAKed; the requester's are the status its WQE completes with.
    EXPECT_EQ(e.nak != kNoNak, responder) << e.name;
    if (!responder) {
      EXPECT_NE(e.status, IBV_WC_SUCCESS) << e.name;
    }
    if (e.completes_recv) {
      EXPECT_NE(e.status, IBV_WC_SUCCESS) << e.name;
    }
  }
  EXPECT_EQ(error_info(Error::kRkeyViolation).nak, int8_t(proto::kNakRemoteAccessError));
  EXPECT_EQ(error_info(Error::kRecvWqeInvalid).nak, int8_t(proto::kNakRemoteOperationalError));
  EXPECT_EQ(error_info(Error::kMisalignedAtomic).nak, int8_t(proto::kNakInvalidRequest));
}

TEST(NakTable, CodesMapToTheStatusesRdmaCoreReports) {
  EXPECT_STREQ(nak_info(proto::kNakPsnSeqError).name, "PSN_SEQ_ERR");
  const std::pair<uint32_t, ibv_wc_status> expect[] = {
      {proto::kNakInvalidRequest, IBV_WC_REM_INV_REQ_ERR},
      {proto::kNakRemoteAccessError, IBV_WC_REM_ACCESS_ERR},
      {proto::kNakRemoteOperationalError, IBV_WC_REM_OP_ERR},
      {proto::kNakInvalidRdRequest, IBV_WC_REM_INV_RD_REQ_ERR},
      {7, IBV_WC_REM_OP_ERR},  // a reserved code
  };
  for (auto [code, status] : expect) EXPECT_EQ(error_info(nak_info(code).at_requester).status, status) << code;
  EXPECT_STREQ(aeth_class_name(proto::aeth_class(proto::aeth_rnr_nak(3))), "RNR_NAK");
  EXPECT_STREQ(aeth_class_name(proto::aeth_class(proto::aeth_nak(2))), "NAK");
}

TEST(WcStatusNames, AreRdmaCoresStrings) {
  EXPECT_STREQ(wc_status_str(IBV_WC_SUCCESS), "success");
  EXPECT_STREQ(wc_status_str(IBV_WC_WR_FLUSH_ERR), "Work Request Flushed Error");
  EXPECT_STREQ(wc_status_str(IBV_WC_REM_ACCESS_ERR), "remote access error");
  EXPECT_STREQ(wc_status_str(IBV_WC_TM_RNDV_INCOMPLETE), "TM rendezvous error");
  EXPECT_STREQ(wc_status_str(999), "unknown");
}

}  // namespace
}  // namespace simnic::core
