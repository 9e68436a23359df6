// Issue 28, through the shim, from a plain verbs program (tests/programs/conformance_check.cc):
// what rdma-core and rxe define and simnic must match. One test per step, each on a fresh NIC.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

Result conformance_step(Nics& nics, const std::string& step, std::chrono::seconds limit = 60s) {
  return nics.run({bin_dir() + "/simnic-conformance-check", "-d", "simnic0", step}, limit);
}

bool has(const Result& r, const std::string& text) { return r.output.find(text) != std::string::npos; }

// ibv_dealloc_pd of a PD in use, ibv_destroy_cq/_comp_channel in use, ibv_resize_cq(0),
// ibv_modify_qp RTS->INIT, ibv_destroy_ah of a garbled AH: errno is the returned error, not a
// leftover (the program sets errno to EXDEV before each).
TEST(Conformance, AFailingVerbLeavesItsErrorInErrno) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = conformance_step(nics, "errno");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "ok errno")) << r.output;
}

// PD, MR, MW, CQ, CQ_EX, SRQ, AH and QP: ENOENT through an unknown handle, EINVAL through another
// kind's, as uverbs; ibv_req_notify_cq of a garbled CQ is EINVAL. simnic says why on stderr.
TEST(Conformance, DestroyingThroughAnUnknownHandleIsEnoent) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = conformance_step(nics, "handles");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "ok handles")) << r.output;
  EXPECT_TRUE(has(r, "simnic: ibv_dealloc_pd: ENOENT: handle 2147483632 names no object of this program")) << r.output;
  EXPECT_TRUE(has(r, "simnic: ibv_destroy_qp: EINVAL: handle")) << r.output;
  EXPECT_TRUE(has(r, "simnic: ibv_req_notify_cq: EINVAL: cq->handle 2147483632 names no CQ")) << r.output;
}

// A CQ armed for any completion and then for solicited ones only still raises an event for an
// unsolicited SEND (IBA 11.4.2.2, rxe); solicited-only alone does not; no arming, no event.
TEST(Conformance, ArmingForAnyCompletionIsNotNarrowedBySolicitedOnly) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = conformance_step(nics, "notify");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "ok notify")) << r.output;
}

// One completion vector per CPU, as rxe; a CQ on each works, one past them is EINVAL, explained.
TEST(Conformance, EveryCpuIsACompletionVector) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = conformance_step(nics, "vectors");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const long cpus = ::sysconf(_SC_NPROCESSORS_CONF);
  EXPECT_TRUE(has(r, std::to_string(cpus) + " completion vectors")) << r.output;
  EXPECT_TRUE(has(r, "simnic: ibv_create_cq: EINVAL: comp_vector " + std::to_string(cpus) + " does not exist")) << r.output;
}

// An extended CQ with every wc_flag rxe's provider offers (the standard fields and both
// completion timestamps), on the last completion vector and a channel: a SEND with immediate
// completes on it at both ends with every field readable through ibv_wc_read_*.
TEST(Conformance, ExtendedCqWithRxesFlagsOnTheLastVectorCarriesCompletions) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = conformance_step(nics, "cqex");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "ok cqex")) << r.output;
}

// One program creates every PD, CQ and address handle ibv_query_device advertises (max_ah as
// rxe's, 32767), and the next is ENOMEM, explained.
TEST(Conformance, OneProgramReachesTheAdvertisedLimits) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = conformance_step(nics, "limits", 240s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "PDs: 4095, as advertised")) << r.output;
  EXPECT_TRUE(has(r, "CQs: 4094, as advertised")) << r.output;
  EXPECT_TRUE(has(r, "address handles: 32767, as advertised")) << r.output;
  EXPECT_TRUE(has(r, "the NIC's 32767 address handles (max_ah of ibv_query_device) are all in use")) << r.output;
}

}  // namespace
}  // namespace simnic::it
