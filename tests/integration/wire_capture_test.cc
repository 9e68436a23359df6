// --pcap: what simnic puts on the wire decodes in tshark as RoCEv2 (InfiniBand BTH over UDP
// 4791), every frame, with no malformed-packet or expert warnings.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

TEST(WireCapture, TsharkDecodesEveryFrameAsRoceWithoutWarnings) {
  if (!have_program("tshark")) GTEST_SKIP() << "tshark is not installed (scripts/setup.sh installs it)";
  std::string caps = "/tmp/simnic-it-pcap-" + std::to_string(::getpid());
  ASSERT_EQ(run({"mkdir", "-p", caps}).exit_code, 0);
  {
    Nics nics(2, {"--pcap-dir", caps});
    ASSERT_TRUE(nics.ok()) << nics.up_result().output;
    Result r = nics.run({bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic1", "-n", "1"}, 60s);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // UC and UD too: ibverbs-utils' pingpongs, a few messages each.
    for (const char* program : {"ibv_uc_pingpong", "ibv_ud_pingpong"}) {
      const std::string port = std::to_string(free_tcp_port());
      auto srv = nics.start({program, "-d", "simnic0", "-g", "0", "-p", port, "-n", "5", "-s", "2000"});
      ASSERT_TRUE(wait_for_listener(std::stoi(port), 10s)) << srv->output();
      Result cl =
          nics.run({program, "-d", "simnic1", "-g", "0", "-p", port, "-n", "5", "-s", "2000", "127.0.0.1"}, 30s);
      Result sv = srv->wait(30s);
      ASSERT_EQ(cl.exit_code, 0) << program << ":\n" << cl.output;
      ASSERT_EQ(sv.exit_code, 0) << program << ":\n" << sv.output;
    }
  }  // `simnic down` closes the captures
  const std::string pcap = caps + "/simnic0.pcap";
  const std::map<std::string, std::string> env = {{"HOME", caps}};  // tshark wants a writable profile dir

  Result total = run({"tshark", "-r", pcap, "-T", "fields", "-e", "frame.number"}, env, 60s);
  ASSERT_EQ(total.exit_code, 0) << total.output;
  Result roce = run({"tshark", "-r", pcap, "--disable-protocol", "rpcordma", "-Y", "infiniband.bth", "-T", "fields",
                     "-e", "infiniband.bth.opcode"},
                    env, 60s);
  ASSERT_EQ(roce.exit_code, 0) << roce.output;
  // The numeric lines only: tshark also prints notes such as "Running as user root".
  auto numbers = [](const std::string& s) {
    std::vector<int> v;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);)
      if (!l.empty() && l.find_first_not_of("0123456789") == std::string::npos) v.push_back(std::stoi(l));
    return v;
  };
  auto lines = [&](const std::string& s) { return numbers(s).size(); };
  EXPECT_GT(lines(total.output), 50u);
  EXPECT_EQ(lines(roce.output), lines(total.output)) << "every frame is RoCE";
  // Requests, responses and ACKs all appear: SEND FIRST (0), RDMA WRITE FIRST (6),
  // READ REQUEST (12), READ RESPONSE MIDDLE (14), ACKNOWLEDGE (17), COMPARE_SWAP (19),
  // UC SEND FIRST (32), UD SEND ONLY (100).
  auto all = numbers(roce.output);
  std::set<int> ops(all.begin(), all.end());
  for (int op : {0, 6, 12, 14, 17, 19, 32, 100}) EXPECT_TRUE(ops.count(op)) << "opcode " << op;

  Result expert = run({"tshark", "-r", pcap, "--disable-protocol", "rpcordma", "-q", "-z", "expert,warn"}, env, 60s);
  ASSERT_EQ(expert.exit_code, 0) << expert.output;
  EXPECT_EQ(expert.output.find("Malformed"), std::string::npos) << expert.output;
  EXPECT_EQ(expert.output.find("Warns"), std::string::npos) << expert.output;
  EXPECT_EQ(expert.output.find("Errors"), std::string::npos) << expert.output;
  run({"rm", "-rf", caps});
}

}  // namespace
}  // namespace simnic::it
