// Open MPI 4.1 and MPICH 4.0 as Debian ships them, on simnic NICs (issue 25 points 2 and 3):
//  - Open MPI over pml ucx, restricted to simnic (UCX_TLS=rc_v,self, the shared-memory and TCP
//    BTLs and the libfabric components off): NetPIPE between two ranks, each on its own NIC, in
//    integrity mode (NetPIPE checks every byte it receives); a 4-rank Allreduce program
//    (data/allreduce.c, compiled here with mpicc) whose ranks check every element, one NIC per
//    rank ("four hosts"); and, run as root, the 2-rank Allreduce as uid 65534 on its own NICs.
//  - Open MPI over ob1 + btl openib on InfiniBand-mode NICs (the sysfs root the shim reports).
//  - MPICH (ch4:ucx) with shared memory off, the same 4-rank Allreduce.
// Every test also checks that each NIC counted traffic, so a silent fallback fails.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <regex>

#include "harness.h"
#include "middleware_util.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

const std::string kAllreduceSource = std::string(SIMNIC_TEST_SOURCE_DIR) + "/tests/middleware/data/allreduce.c";

// Every NIC sent or received packets since `before` (packets_of_nics before the run).
void expect_every_nic_grew(const Runner& who, const std::vector<Packets>& before) {
  for (int i = 0; i < int(before.size()); ++i)
    EXPECT_GT(packets(who, nic_name(i)).total(), before[i].total())
        << "simnic" << i << " carried none of the job's traffic";
}

// data/allreduce.c compiled with an MPI's compiler wrapper into a fresh directory everyone can
// read (uid 65534 runs it too); removed with the object.
class AllreduceProgram {
 public:
  explicit AllreduceProgram(const std::string& mpicc) {
    char tmpl[] = "/tmp/simnic-mw-mpi-XXXXXX";
    if (!::mkdtemp(tmpl)) return;
    dir_ = tmpl;
    ::chmod(tmpl, 0755);
    path = dir_ + "/allreduce";
    build = run({mpicc, "-O1", "-o", path, kAllreduceSource}, {}, 60s);
  }
  ~AllreduceProgram() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  bool ok() const { return build.exit_code == 0; }
  std::string path;
  Result build;

 private:
  std::string dir_;
};

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Every rank's verdict line says OK, one per rank, none FAIL.
void expect_ranks_ok(const Result& r, int ranks) {
  EXPECT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count_of(r.output, "-> OK\n"), ranks) << r.output;
  EXPECT_EQ(count_of(r.output, "-> FAIL"), 0) << r.output;
  for (int i = 0; i < ranks; ++i)
    EXPECT_NE(r.output.find("rank " + std::to_string(i) + "/" + std::to_string(ranks) + " dev simnic" +
                            std::to_string(i) + ":1:"),
              std::string::npos)
        << "rank " << i << " on simnic" << i << "\n"
        << r.output;
}

// --- Open MPI ---

bool have_openmpi() { return have_program("mpirun.openmpi") && have_program("mpicc.openmpi"); }
constexpr const char* kNoOpenmpi =
    "needs mpirun.openmpi and mpicc.openmpi (Debian packages openmpi-bin, libopenmpi-dev)";

// mpirun over pml ucx restricted to simnic. Debian's /etc/openmpi/openmpi-mca-params.conf says
// `pml = ^ucx` (and btl ^uct,openib,ofi, mtl ^ofi): `--mca pml ucx` overrides it. The BTLs
// that could carry on-node traffic (vader, tcp) and the libfabric components (which would
// probe the NICs too) are off; UCX may use only RC verbs (and self for a rank to itself).
// Then one MPMD context per rank, each with its own NIC: `-np 1 -x UCX_NET_DEVICES=simnicN:1 argv`.
std::vector<std::string> openmpi_ucx(int ranks, const std::vector<std::string>& argv) {
  std::vector<std::string> cmd = {"mpirun.openmpi",
                                  "--oversubscribe",
                                  "--mca",
                                  "pml",
                                  "ucx",
                                  "--mca",
                                  "btl",
                                  "^vader,tcp,openib,uct,ofi",
                                  "--mca",
                                  "mtl",
                                  "^ofi",
                                  "-x",
                                  "UCX_TLS=rc_v,self"};
  if (::geteuid() == 0) cmd.insert(cmd.begin() + 1, "--allow-run-as-root");
  for (int i = 0; i < ranks; ++i) {
    if (i) cmd.push_back(":");
    for (const std::string& a :
         {std::string("-np"), std::string("1"), std::string("-x"), "UCX_NET_DEVICES=simnic" + std::to_string(i) + ":1"})
      cmd.push_back(a);
    cmd.insert(cmd.end(), argv.begin(), argv.end());
  }
  return cmd;
}

// NetPIPE in integrity mode (-i: it fills, sends and checks every message) with a fixed count
// of repeats per size (-n) so the run stays short; sizes up to `upper`. Its results file
// (np.out in the working directory by default) is not wanted: the lines on stdout are checked.
std::vector<std::string> netpipe(const std::string& upper) {
  return {"NPopenmpi", "-u", upper, "-n", "5", "-i", "-o", "/dev/null"};
}

// NetPIPE's last size line ("35:  786433 bytes  5 times -->  Integrity check passed"): the
// run reached the largest size below `upper` (sizes double, plus one) with every check passed.
void expect_netpipe_reached(const Result& r, uint64_t upper) {
  EXPECT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  static const std::regex line(R"((\d+): +(\d+) bytes +\d+ times --> +(.*)\n)");
  std::smatch last;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), line); it != std::sregex_iterator(); ++it)
    last = *it;
  ASSERT_FALSE(last.empty()) << r.output;
  EXPECT_GT(std::stoull(last[2]), upper / 2) << "last size line: " << last[0] << r.output;
  EXPECT_EQ(last[3], "Integrity check passed") << r.output;
  EXPECT_EQ(r.output.find("Integrity check failed"), std::string::npos) << r.output;
}

class OpenMpi : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_openmpi()) GTEST_SKIP() << kNoOpenmpi;
  }
};

TEST_F(OpenMpi, NetpipeOverPmlUcxBetweenTwoNics) {
  if (!have_program("NPopenmpi")) GTEST_SKIP() << "needs NPopenmpi (Debian package netpipe-openmpi)";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Runner me = runner_for(nics);
  auto before = packets_of_nics(me, 2);
  Result r = run(me.simnic_run(openmpi_ucx(2, netpipe("1048576"))), me.env(), 60s);
  expect_netpipe_reached(r, 1048576);
  expect_every_nic_grew(me, before);
}

TEST_F(OpenMpi, AllreduceOverPmlUcxOnFourNicsIsChecked) {
  AllreduceProgram prog("mpicc.openmpi");
  ASSERT_TRUE(prog.ok()) << prog.build.output;
  Nics nics(4);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Runner me = runner_for(nics);
  auto before = packets_of_nics(me, 4);
  Result r = run(me.simnic_run(openmpi_ucx(4, {prog.path})), me.env(), 60s);
  expect_ranks_ok(r, 4);
  expect_every_nic_grew(me, before);
}

// btl openib (ob1): it needs <ibv_get_sysfs_path()>/class/infiniband (the shim's sysfs root),
// and on RoCE ports it has no connection method in Debian's build (udcm is InfiniBand-only, the
// rdmacm CPC is not built), so the NICs run in InfiniBand mode; Open MPI 4 then still skips IB
// ports unless btl_openib_allow_ib is set (it prefers UCX there). The NIC per rank is
// chosen per context with OMPI_MCA_btl_openib_if_include (--mca is job-wide).
TEST_F(OpenMpi, NetpipeOverBtlOpenibOnInfinibandNics) {
  if (!have_program("NPopenmpi")) GTEST_SKIP() << "needs NPopenmpi (Debian package netpipe-openmpi)";
  Nics nics(2, {"--link-layer", "ib"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Runner me = runner_for(nics);
  auto before = packets_of_nics(me, 2);
  std::vector<std::string> cmd = {"mpirun.openmpi",
                                  "--oversubscribe",
                                  "--mca",
                                  "pml",
                                  "ob1",
                                  "--mca",
                                  "btl",
                                  "openib,self",
                                  "--mca",
                                  "btl_openib_allow_ib",
                                  "true",
                                  "--mca",
                                  "btl_openib_warn_no_device_params_found",
                                  "0"};
  if (::geteuid() == 0) cmd.insert(cmd.begin() + 1, "--allow-run-as-root");
  for (int i = 0; i < 2; ++i) {
    if (i) cmd.push_back(":");
    for (const std::string& a : {std::string("-np"), std::string("1"), std::string("-x"),
                                 "OMPI_MCA_btl_openib_if_include=simnic" + std::to_string(i)})
      cmd.push_back(a);
    for (const std::string& a : netpipe("65536")) cmd.push_back(a);
  }
  Result r = run(me.simnic_run(cmd), me.env(), 60s);
  expect_netpipe_reached(r, 65536);
  expect_every_nic_grew(me, before);
}

// --- Open MPI as uid 65534, with NICs of its own ---

TEST_F(OpenMpi, AllreduceOverPmlUcxRunsAsNobody) {
  if (std::string why = nobody_cannot_run(); !why.empty()) GTEST_SKIP() << why;
  AllreduceProgram prog("mpicc.openmpi");
  ASSERT_TRUE(prog.ok()) << prog.build.output;
  NobodyNics nics(2, "mpi");
  ASSERT_TRUE(nics.ok()) << nics.up.output;
  Result id = run(nics.who.simnic_run({"id", "-u"}), nics.who.env(), 10s);
  ASSERT_EQ(id.output, "65534\n") << "the programs run as uid 65534";
  auto before = packets_of_nics(nics.who, 2);
  Result r = run(nics.who.simnic_run(openmpi_ucx(2, {prog.path})), nics.who.env(), 60s);
  expect_ranks_ok(r, 2);
  expect_every_nic_grew(nics.who, before);
}

// --- MPICH ---

// mpiexec (hydra) with ch4's shared memory off for on-node peers (MPIR_CVAR_NOLOCAL=1), UCX on
// RC verbs only, and one NIC per rank (`-n 1 -env UCX_NET_DEVICES simnicN:1 argv`, MPMD).
TEST(Mpich, AllreduceOverUcxOnFourNicsIsChecked) {
  if (!have_program("mpiexec.mpich") || !have_program("mpicc.mpich"))
    GTEST_SKIP() << "needs mpiexec.mpich and mpicc.mpich (Debian packages mpich, libmpich-dev)";
  AllreduceProgram prog("mpicc.mpich");
  ASSERT_TRUE(prog.ok()) << prog.build.output;
  Nics nics(4);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Runner me = runner_for(nics);
  auto before = packets_of_nics(me, 4);
  std::vector<std::string> cmd = {"mpiexec.mpich", "-genv", "MPIR_CVAR_NOLOCAL", "1", "-genv", "UCX_TLS", "rc_v,self"};
  for (int i = 0; i < 4; ++i) {
    if (i) cmd.push_back(":");
    for (const std::string& a : {std::string("-n"), std::string("1"), std::string("-env"),
                                 std::string("UCX_NET_DEVICES"), "simnic" + std::to_string(i) + ":1", prog.path})
      cmd.push_back(a);
  }
  Result r = run(me.simnic_run(cmd), me.env(), 60s);
  expect_ranks_ok(r, 4);
  expect_every_nic_grew(me, before);
}

}  // namespace
}  // namespace simnic::it
