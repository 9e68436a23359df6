// A student's mistake is explained on the program's own stderr under `simnic run` ("simnic:
// ...", once per cause), and the program's stdout carries only what the program printed.
// Each case runs tests/programs/mistakes.cc, which prints one "done ..." line on stdout.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

struct Outcome {
  std::string out, err;
  int exit_code;
};

Outcome run_mistake(const Nics& nics, const std::string& mode, const std::string& run_flags = "") {
  const std::string err_file = nics.dir() + "/stderr-" + mode;
  Result r = run({"sh", "-c", bin_dir() + "/simnic run " + run_flags + " -- " + bin_dir() + "/simnic-mistakes " + mode +
                                  " 2>" + err_file},
                 nics.env(), 60s);
  std::ifstream in(err_file);
  std::stringstream err;
  err << in.rdbuf();
  return {r.output, err.str(), r.exit_code};
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

class Explain : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(nics.ok()) << nics.up_result().output; }
  Nics nics{1};
};

TEST_F(Explain, AGidIndexBeyondTheTableNamesTheIndex) {
  Outcome o = run_mistake(nics, "gid-index");
  EXPECT_EQ(o.out, "done EINVAL\n");
  EXPECT_NE(o.err.find("simnic: ibv_modify_qp: EINVAL: QP 0x"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("INIT->RTR: sgid_index 1 is beyond the GID table (index 0 only)"), std::string::npos) << o.err;
}

TEST_F(Explain, ARemoteWriteMrWithoutLocalWriteSaysWhichFlagIsMissing) {
  Outcome o = run_mistake(nics, "reg-mr-access");
  EXPECT_EQ(o.out, "done EINVAL\n");
  EXPECT_NE(o.err.find("simnic: ibv_reg_mr: EINVAL: IBV_ACCESS_REMOTE_WRITE and IBV_ACCESS_REMOTE_ATOMIC need "
                       "IBV_ACCESS_LOCAL_WRITE too"),
            std::string::npos)
      << o.err;
}

TEST_F(Explain, QueuesDeeperThanTheDeviceNameTheLimit) {
  Outcome o = run_mistake(nics, "create-qp-caps");
  EXPECT_EQ(o.out, "done EINVAL\n");
  EXPECT_NE(o.err.find("simnic: ibv_create_qp: EINVAL: cap asks for more than the device has"), std::string::npos)
      << o.err;
}

TEST_F(Explain, PostingBeforeRtsSaysSendingNeedsRts) {
  Outcome o = run_mistake(nics, "post-before-rts");
  EXPECT_EQ(o.out, "done EINVAL\n");
  EXPECT_NE(o.err.find("simnic: ibv_post_send: EINVAL: QP 0x"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("the QP is in INIT, and sending needs RTS"), std::string::npos) << o.err;
}

// Both sides are told: the requester that the peer refused, the responder which rule.
TEST_F(Explain, AWriteWithoutRemoteWriteAccessIsExplainedOnBothSides) {
  Outcome o = run_mistake(nics, "bad-rkey");
  EXPECT_EQ(o.out, "done remote access error / Work Request Flushed Error\n");
  EXPECT_NE(o.err.find("completed with IBV_WC_REM_ACCESS_ERR (remote access error): "), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("refused it with a NAK: remote access error"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("completed with IBV_WC_WR_FLUSH_ERR"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("not valid for REMOTE_WRITE (MR registered without IBV_ACCESS_REMOTE_WRITE)"), std::string::npos)
      << o.err;
}

TEST_F(Explain, NoReceivePostedIsExplainedAsRnr) {
  Outcome o = run_mistake(nics, "no-recv");
  EXPECT_EQ(o.out, "done RNR retry counter exceeded\n");
  EXPECT_NE(o.err.find("IBV_WC_RNR_RETRY_EXC_ERR"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("the responder had no receive WQE (RNR NAK) more than rnr_retry=1 times"), std::string::npos)
      << o.err;
  EXPECT_EQ(count(o.err, "simnic: "), 1u) << "once per cause:\n" << o.err;
}

// Nothing ever completes (rnr_retry = 7 retries forever): a program that keeps polling is told
// what the NIC sees, once, instead of hanging in silence.
TEST_F(Explain, AnEndlessRnrStormReachesAPollingProgram) {
  Outcome o = run_mistake(nics, "no-recv-forever");
  EXPECT_EQ(o.out, "done timeout\n");
  EXPECT_NE(o.err.find("no receive WQE was posted; sent an RNR NAK"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("(RNR NAK); retrying in"), std::string::npos) << o.err;
  EXPECT_EQ(count(o.err, "RNR NAK); retrying in"), 1u) << o.err;
}

TEST_F(Explain, AWrongDestinationQpnEndsInRetryExceededWithTheReason) {
  Outcome o = run_mistake(nics, "wrong-qpn");
  EXPECT_EQ(o.out, "done transport retry counter exceeded\n");
  EXPECT_NE(o.err.find("IBV_WC_RETRY_EXC_ERR"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("no ACK within the local ACK timeout"), std::string::npos) << o.err;
  // The NIC's log names the cause on the other side: a packet for a QPN it does not have.
  std::ifstream log(nics.dir() + "/simnic0.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_NE(text.str().find(": no such QP on this NIC"), std::string::npos) << text.str();
}

TEST_F(Explain, QuietSaysNothing) {
  Outcome o = run_mistake(nics, "gid-index", "--quiet");
  EXPECT_EQ(o.out, "done EINVAL\n");
  EXPECT_EQ(o.err, "");
}

}  // namespace
}  // namespace simnic::it
