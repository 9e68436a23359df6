// IBTA 1.5 RDMA ATOMIC WRITE through the shim between two processes
// (tests/programs/atomic_write_check.cc): ibv_post_send(IBV_WR_ATOMIC_WRITE) and
// ibv_wr_atomic_write land their 8 bytes (compared by the server), and a misaligned target, an
// MR without REMOTE_WRITE and a 4-byte local buffer complete with the statuses rxe gives.
#include <gtest/gtest.h>

#include <unistd.h>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "check_run.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

TEST(AtomicWrite, BothApisLandEightBytesAndTheErrorsCompleteAsOnRxe) {
  Nics nics(2);
  Result r;
  ASSERT_NO_FATAL_FAILURE(run_check(nics, "simnic-atomic-write-check", {"-a", "simnic0", "-b", "simnic1"}, &r));
  EXPECT_NE(r.output.find("server: 16 bytes landed as written, compared"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("client: misaligned target: remote invalid request error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("client: MR without REMOTE_WRITE: remote access error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("client: 4-byte local buffer: local length error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << r.output;
  // The responder's NIC log says which rule each refused request broke.
  std::ifstream in(nics.dir() + "/simnic1.log");
  const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(log.find("ATOMIC WRITE target"), std::string::npos) << log;
  EXPECT_NE(log.find("(IBA A19.4.2) (IBA 9.9.3.1, responder class C)"), std::string::npos) << log;
  EXPECT_NE(log.find("ATOMIC WRITE: rkey"), std::string::npos) << log;
}

// tshark 4.0 (Debian 12) predates the IBTA 1.5 opcodes: it decodes the BTH of 0x1D (opcode,
// PSN) and calls it "Unknown OpCode"; the answer decodes fully as a READ RESPONSE ONLY with an
// AETH ACK, and the NAKs as ACKNOWLEDGEs with their syndromes.
TEST(AtomicWrite, TsharkDecodesTheBthOfEveryAtomicWriteAndItsAnswers) {
  if (!have_program("tshark")) GTEST_SKIP() << "tshark is not installed (scripts/setup.sh installs it)";
  const std::string caps = "/tmp/simnic-it-aw-pcap-" + std::to_string(::getpid());
  ASSERT_EQ(run({"mkdir", "-p", caps}).exit_code, 0);
  {
    Nics nics(2, {"--pcap-dir", caps});
    Result r;
    ASSERT_NO_FATAL_FAILURE(run_check(nics, "simnic-atomic-write-check", {"-a", "simnic0", "-b", "simnic1"}, &r));
  }  // `simnic down` closes the captures
  Result t = run({"tshark", "-r", caps + "/simnic0.pcap", "--disable-protocol", "rpcordma", "-Y", "infiniband.bth",
                  "-T", "fields", "-e", "infiniband.bth.opcode", "-e", "infiniband.aeth.syndrome"},
                 {{"HOME", caps}}, 60s);
  run({"rm", "-rf", caps});
  ASSERT_EQ(t.exit_code, 0) << t.output;
  std::multiset<std::string> seen;
  std::istringstream in(t.output);
  for (std::string l; std::getline(in, l);) seen.insert(l);
  EXPECT_GE(seen.count("29\t"), 4u) << t.output;    // RC RDMA ATOMIC WRITE: both of case 0, and cases 1, 2
  EXPECT_GE(seen.count("16\t31"), 2u) << t.output;  // READ RESPONSE ONLY, AETH ACK: case 0's answers
  EXPECT_EQ(seen.count("17\t97"), 1u) << t.output;  // NAK invalid request: the misaligned target
  EXPECT_EQ(seen.count("17\t98"), 1u) << t.output;  // NAK remote access error: no REMOTE_WRITE
}

}  // namespace
}  // namespace simnic::it
