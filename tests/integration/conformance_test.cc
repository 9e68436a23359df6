// Issue 28, through the shim, from a plain verbs program (tests/programs/conformance_check.cc):
// what rdma-core and rxe define and simnic must match. One test per step, each on a fresh NIC.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "check_run.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

// One step of simnic-conformance-check on a fresh NIC: it exits 0 and says each of `lines`.
void conformance_step(const std::string& step, const std::vector<std::string>& lines,
                      std::chrono::seconds limit = 60s) {
  Nics nics(1);
  Result r;
  ASSERT_NO_FATAL_FAILURE(run_check(nics, "simnic-conformance-check", {"-d", "simnic0", step}, &r, limit));
  expect_says(r, lines);
}

// ibv_dealloc_pd of a PD in use, ibv_destroy_cq/_comp_channel in use, ibv_resize_cq(0),
// ibv_modify_qp RTS->INIT, ibv_destroy_ah of a garbled AH: errno is the returned error, not a
// leftover (the program sets errno to EXDEV before each).
TEST(Conformance, AFailingVerbLeavesItsErrorInErrno) { conformance_step("errno", {"ok errno"}); }

// PD, MR, MW, CQ, CQ_EX, SRQ, AH and QP: ENOENT through an unknown handle, EINVAL through another
// kind's, as uverbs; ibv_req_notify_cq of a garbled CQ is EINVAL. simnic says why on stderr.
TEST(Conformance, DestroyingThroughAnUnknownHandleIsEnoent) {
  conformance_step("handles",
                   {"ok handles", "simnic: ibv_dealloc_pd: ENOENT: handle 2147483632 names no object of this program",
                    "simnic: ibv_destroy_qp: EINVAL: handle",
                    "simnic: ibv_req_notify_cq: EINVAL: cq->handle 2147483632 names no CQ"});
}

// A CQ armed for any completion and then for solicited ones only still raises an event for an
// unsolicited SEND (IBA 11.4.2.2, rxe); solicited-only alone does not; no arming, no event.
TEST(Conformance, ArmingForAnyCompletionIsNotNarrowedBySolicitedOnly) { conformance_step("notify", {"ok notify"}); }

// One completion vector per CPU, as rxe; a CQ on each works, one past them is EINVAL, explained.
TEST(Conformance, EveryCpuIsACompletionVector) {
  const long cpus = ::sysconf(_SC_NPROCESSORS_CONF);
  const std::string n = std::to_string(cpus);
  conformance_step("vectors",
                   {n + " completion vectors", "simnic: ibv_create_cq: EINVAL: comp_vector " + n + " does not exist"});
}

// An extended CQ with every wc_flag rxe's provider offers (the standard fields and both
// completion timestamps), on the last completion vector and a channel: a SEND with immediate
// completes on it at both ends with every field readable through ibv_wc_read_*.
TEST(Conformance, ExtendedCqWithRxesFlagsOnTheLastVectorCarriesCompletions) { conformance_step("cqex", {"ok cqex"}); }

// One program creates every PD, CQ and address handle ibv_query_device advertises (max_ah as
// rxe's, 32767), and the next is ENOMEM, explained.
TEST(Conformance, OneProgramReachesTheAdvertisedLimits) {
  conformance_step("limits",
                   {"PDs: 4095, as advertised", "CQs: 4094, as advertised", "address handles: 32767, as advertised",
                    "the NIC's 32767 address handles (max_ah of ibv_query_device) are all in use"},
                   240s);
}

}  // namespace
}  // namespace simnic::it
