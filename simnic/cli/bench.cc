// `simnic bench`: in one run, the kernel's TCP over loopback (the baseline) and perftest on two
// private simnic NICs, every figure with its ratio to the baseline, saved as CSV, JSON and a PNG
// and compared with the last saved run. See docs/performance.md for what the columns mean.
#include <signal.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "simnic/abi/paths.h"
#include "simnic/cli/bench.h"
#include "simnic/cli/cli.h"

#ifndef SIMNIC_SOURCE_DIR
#define SIMNIC_SOURCE_DIR ""
#endif

namespace simnic::cli {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using namespace bench;

const char kBenchUsage[] =
    "usage: simnic bench [--quick] [--out DIR] [--spin | --no-spin] [--baseline auto|qperf|builtin]\n"
    "                    [--baseline-only | --floor-only] [--gso | --no-gso] [--addr A.B.C.D]\n"
    "                    [--timeout S] [--load cpu|traffic|all] [--one-process]\n"
    "       simnic bench --show RUN_DIR   print a saved run's table again and redraw its plot\n"
    "Measures simnic against the kernel's TCP on this machine, in one run: qperf tcp_bw and tcp_lat\n"
    "over loopback, then perftest through `simnic run` on two private NICs (ib_write_bw, ib_read_bw,\n"
    "ib_send_bw 64 B..1 MiB; ib_write_lat, ib_send_lat, ib_read_lat 2 B..64 KiB; ib_write_bw over\n"
    "1, 16, 256 and 1000 QPs). Prints every figure with its ratio to the kernel's at the same size,\n"
    "writes bench.csv, bench.json and bench.png to DIR/<UTC timestamp>/ and says which figures\n"
    "moved by more than 10% since the last run of the same mode in DIR. Exit status 0 when the\n"
    "run completed, whatever the figures (a failed test is reported in the table).\n"
    "  --quick           a few sizes, few iterations, 1 and 16 QPs (well under a minute)\n"
    "  --out DIR         where runs are saved (default bench-results)\n"
    "  --spin            keep every CPU busy with a nice-19 loop during the whole run (default):\n"
    "                    idle vCPUs sleep, and waking them dominates small-message latency\n"
    "  --no-spin         leave idle CPUs idle\n"
    "  --baseline TOOL   qperf, or builtin (our own TCP stream and ping-pong); auto (default)\n"
    "                    takes qperf when it is installed\n"
    "  --baseline-only   measure the kernel baseline only (no NICs, no perftest)\n"
    "  --floor-only      the kernel baseline and the floors of both shapes (floor_*, and\n"
    "                    floor_map_* where the NIC maps the memory), no NICs, no perftest\n"
    "  --gso, --no-gso   start the NICs with `simnic up --gso` (always UDP GSO sends) or\n"
    "                    --no-gso (one datagram per packet) instead of the default (GSO on\n"
    "                    loopback while nobody captures lo); the floor follows. Compared only\n"
    "                    with earlier runs of the same choice\n"
    "  --one-process     start the two NICs as one simnicd (`simnic up --one-process`): a message\n"
    "                    between them wakes no other process. Compared only with earlier runs\n"
    "                    started the same way\n"
    "  --addr A.B.C.D    simnic0's address (default 127.254.N.1, N from the pid); simnic1 is next\n"
    "  --timeout S       limit for each perftest run (default 120, 60 with --quick)\n"
    "  --load KIND       a busy machine for the whole run, kernel baseline and simnic alike: cpu\n"
    "                    (one nice-0 busy loop per CPU), traffic (a second NIC pair streaming\n"
    "                    ib_write_bw over 16 QPs and ib_send_bw, busy-polling), or all (both).\n"
    "                    ERRORS and RETX per row say whether simnic held up; compared only with\n"
    "                    earlier runs under the same load\n";

struct Options {
  bool quick = false, spin = true, baseline_only = false, floor_only = false;
  std::string gso;           // "", "--gso" or "--no-gso": passed to simnic up
  bool one_process = false;  // simnic up --one-process
  std::string out = "bench-results", baseline = "auto", addr, show, load;
  int timeout_s = 0;
};

// The tests of one run.
struct Plan {
  BaselinePlan baseline;
  std::vector<PerftestRun> runs;
};

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= p.size();) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    if (::access((p.substr(start, end - start) + "/" + program).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

int parse_options(const std::vector<std::string>& args, Options* o) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* v) { return i + 1 < args.size() ? (*v = args[++i], true) : false; };
    std::string v;
    if (a == "--help" || a == "-h") return std::fputs(kBenchUsage, stdout), 0;
    if (a == "--quick") o->quick = true;
    else if (a == "--gso" || a == "--no-gso") o->gso = a;
    else if (a == "--one-process") o->one_process = true;
    else if (a == "--spin") o->spin = true;
    else if (a == "--no-spin") o->spin = false;
    else if (a == "--baseline-only") o->baseline_only = true;
    else if (a == "--floor-only") o->floor_only = true;
    else if (a == "--out" && value(&o->out)) continue;
    else if (a == "--addr" && value(&o->addr)) continue;
    else if (a == "--show" && value(&o->show)) continue;
    else if (a == "--baseline" && value(&o->baseline) &&
             (o->baseline == "auto" || o->baseline == "qperf" || o->baseline == "builtin"))
      continue;
    else if (a == "--timeout" && value(&v) && (o->timeout_s = std::atoi(v.c_str())) > 0) continue;
    else if (a == "--load" && value(&o->load) && valid_load_kind(o->load)) continue;
    else return std::fprintf(stderr, "simnic bench: bad argument '%s'\n%s", a.c_str(), kBenchUsage), 2;
  }
  return -1;  // go on
}

// perftest's message counts: enough bytes to last about a second here, bounded both ways. A
// full run sends at least 100,000 small messages (0.2-1 s at simnic's small-message rates):
// perftest's own figure runs from the first post to the last completion, so a run of a few
// thousand 64-byte messages (10-20 ms) measured the start of a stream (the first doorbells and
// wake-ups of idle NICs), at a third to a quarter of the rate the same stream holds, while
// tcp_bw beside it streams for seconds.
long bw_iterations(uint64_t size, bool quick) {
  const uint64_t budget = quick ? (16u << 20) : (256u << 20);
  return long(std::clamp<uint64_t>(budget / size, 100, quick ? 1000 : 100000));
}

void add_perftest_runs(Plan* plan, bool quick) {
  for (const char* bin : {"ib_write_bw", "ib_read_bw", "ib_send_bw"})
    for (uint64_t size : plan->baseline.bw_sizes)
      plan->runs.push_back({bin, bin, "bw", size, 1, bw_iterations(size, quick), 0});
  for (const char* bin : {"ib_write_lat", "ib_send_lat", "ib_read_lat"})
    for (uint64_t size : plan->baseline.lat_sizes)
      plan->runs.push_back({bin, bin, "lat", size, 1, quick ? 200 : 1000, 0});
  // Many QPs: 64 KiB WRITEs at queue depth 4 on each of N QP pairs (issue 14's scaling case);
  // the same number of messages in all, spread over the QPs (perftest's -n counts per QP).
  const long total = quick ? 512 : 4000;
  const std::vector<int> qps = quick ? std::vector<int>{1, 16} : std::vector<int>{1, 16, 256, 1000};
  for (int n : qps)
    plan->runs.push_back({"ib_write_bw", "many_qp_write", "bw", 65536, n, std::max<long>(5, total / n), 4});
  // The message rate (issue 26 point 2): ib_write_bw 64 B's MsgRate, enough messages to last
  // about a second at simnic's small-message rate, beside floor_rate.
  plan->runs.push_back({"ib_write_bw", "ib_write_rate", "rate", 64, 1, quick ? 20000 : 100000, 0});
}

Plan make_plan(const Options& o, const std::string& addr, const std::string& log_dir) {
  Plan plan;
  BaselinePlan& b = plan.baseline;
  b.tool = o.baseline == "auto" ? (on_path("qperf") ? "qperf" : "builtin") : o.baseline;
  b.addr = addr;
  b.log_dir = log_dir;
  b.seconds = o.quick ? 1 : 2;
  if (o.quick) {
    b.bw_sizes = {4096, 65536};
    b.lat_sizes = {2, 4096};
  } else {
    b.bw_sizes = {64, 256, 1024, 4096, 16384, 65536, 262144, 1048576};
    b.lat_sizes = {2, 8, 64, 512, 4096, 16384, 65536};
  }
  if (!o.baseline_only && !o.floor_only) add_perftest_runs(&plan, o.quick);
  return plan;
}

// ---- what the run records about itself ----

std::string command_output(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double l = NAN;
  in >> l;
  return l;
}

std::string utc_now(const char* format) {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, format, std::gmtime(&t));
  return buf;
}

RunInfo describe_run(const Options& o, const Plan& plan, const std::string& addr) {
  RunInfo i;
  i.started_utc = utc_now("%Y-%m-%dT%H:%M:%SZ");
  i.mode = o.quick ? "quick" : "full";
  if (o.baseline_only) i.mode += "-baseline";
  else if (o.floor_only) i.mode += "-floor";
  if (!o.gso.empty() && !o.baseline_only) i.mode += o.gso == "--gso" ? "-gso" : "-no-gso";
  if (o.one_process && !o.baseline_only) i.mode += "-one-process";
  if (!o.load.empty()) i.mode += "-load-" + o.load;  // compared only with runs under the same load
  i.load = o.load;
  i.spin = o.spin;
  i.baseline_tool = plan.baseline.tool;
  std::string src = SIMNIC_SOURCE_DIR;
  i.commit = src.empty() ? ""
                         : command_output("git -C '" + src + "' describe --always --dirty --abbrev=12 2>/dev/null");
  if (i.commit.empty()) i.commit = "unknown";
  i.cpu_model = cpu_model();
  i.nproc = int(::sysconf(_SC_NPROCESSORS_ONLN));
  utsname u{};
  i.kernel = ::uname(&u) == 0 ? u.release : "unknown";
  i.load_start = load_average();
  i.nic_addr = addr;
  return i;
}

// ---- progress ----

int g_step = 0, g_steps = 0;
std::chrono::steady_clock::time_point g_t0;

void progress(const std::string& what) {
  ++g_step;
  if (!::isatty(2)) return;
  const long s = long(std::chrono::duration<double>(std::chrono::steady_clock::now() - g_t0).count());
  std::fprintf(stderr, "\r\033[K[%d/%d %ld:%02ld] %s", g_step, g_steps, s / 60, s % 60, what.c_str());
  std::fflush(stderr);
}

void progress_done() {
  if (::isatty(2)) std::fputs("\r\033[K", stderr);
}

// ---- the private NICs ----

// Two NICs in a fresh private SIMNIC_DIR; stopped (and killed by pid if need be) on destruction.
class PrivateNics {
 public:
  PrivateNics(const std::string& addr, const std::string& log_dir, const std::vector<std::string>& up_extra)
      : log_dir_(log_dir) {
    char tmpl[] = "/tmp/simnic-bench-XXXXXX";
    if (!::mkdtemp(tmpl)) return;
    dir_ = tmpl;
    ::setenv("SIMNIC_DIR", dir_.c_str(), 1);
    std::vector<std::string> up_argv = {self_dir() + "/simnic", "up", "2", "--addr", addr, "--no-history"};
    up_argv.insert(up_argv.end(), up_extra.begin(), up_extra.end());
    Outcome up = run_logged(up_argv, log_dir + "/simnic-up.log", 60s);
    for (const char* name : {"simnic0", "simnic1"}) {
      std::ifstream in(abi::pid_file_path(dir_, name));
      long pid = 0;
      if (in >> pid && pid > 0) pids_.push_back(pid_t(pid)), track_pid(pid_t(pid));
    }
    ok_ = up.exit_code == 0 && pids_.size() == 2;
  }
  ~PrivateNics() {
    if (dir_.empty()) return;
    if (!interrupted()) run_logged({self_dir() + "/simnic", "down"}, log_dir_ + "/simnic-down.log", 30s);
    for (pid_t pid : pids_) ::kill(pid, SIGKILL), untrack_pid(pid);  // in case down could not stop one
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  bool ok() const { return ok_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_, log_dir_;
  std::vector<pid_t> pids_;
  bool ok_ = false;
};

std::string default_addr() { return "127.254." + std::to_string(1 + ::getpid() % 250) + ".1"; }

// The kernel figure a simnic figure is compared with: tcp_bw, tcp_lat or tcp_rate at the same
// size; for latency also TCP's 99th percentile, beside simnic's.
void attach_baseline(Figure* f, const std::vector<Figure>& base) {
  const std::string want = f->kind == "bw" ? "tcp_bw" : f->kind == "rate" ? "tcp_rate" : "tcp_lat";
  for (const auto& b : base) {
    if (b.test != want || b.size != f->size || !b.ok()) continue;
    f->baseline = b.value;
    if (f->ok() && b.value > 0) f->ratio = f->value / b.value;
    if (f->kind != "lat" || !(b.p99_us > 0)) continue;
    f->baseline_p99_us = b.p99_us;
    if (f->ok() && std::isfinite(f->p99_us)) f->p99_ratio = f->p99_us / b.p99_us;
  }
}

// What `simnic up` is told beyond the defaults.
std::vector<std::string> up_extra(const Options& o) {
  std::vector<std::string> args;
  if (!o.gso.empty()) args.push_back(o.gso);
  if (o.one_process) args.push_back("--one-process");
  return args;
}

// Runs every perftest of the plan on the private NICs. False when the NICs would not start.
bool measure_simnic(const Plan& plan, const std::string& addr, const std::string& log_dir, int timeout_s,
                    const std::vector<std::string>& up_extra, std::vector<Figure>* figures) {
  PrivateNics nics(addr, log_dir, up_extra);
  if (!nics.ok()) {
    std::fprintf(stderr, "\nsimnic bench: the NICs did not start:\n%s", read_file(log_dir + "/simnic-up.log").c_str());
    return false;
  }
  NicSet set{self_dir() + "/simnic", nics.dir(), addr, log_dir, std::chrono::seconds(timeout_s)};
  const std::vector<Figure> base = *figures;
  for (const auto& run : plan.runs) {
    if (interrupted()) break;
    progress(run.test + " " + human_size(run.size) + (run.qps > 1 ? " x" + std::to_string(run.qps) + " QPs" : ""));
    Figure f = run_perftest(set, run);
    attach_baseline(&f, base);
    figures->push_back(f);
  }
  return true;
}

// The results directory: ROOT/<UTC timestamp>, made unique.
std::string make_run_dir(const std::string& root) {
  std::string dir = root + "/" + utc_now("%Y%m%d-%H%M%S");
  std::error_code ec;
  for (int n = 2; fs::exists(dir, ec); ++n) dir = root + "/" + utc_now("%Y%m%d-%H%M%S") + "-" + std::to_string(n);
  fs::create_directories(dir + "/logs", ec);
  return ec ? "" : dir;
}

bool check_tools(const Options& o) {
  if (o.baseline == "qperf" && !on_path("qperf"))
    return std::fputs("simnic bench: qperf is not installed (scripts/setup.sh; or --baseline builtin)\n", stderr),
           false;
  if (o.baseline_only || o.floor_only) return true;
  if (find_simnicd().empty() || find_shim_dir().empty())
    return std::fprintf(stderr, "simnic bench: simnicd or the shim is missing next to %s; build them\n",
                        self_dir().c_str()),
           false;
  if (!on_path("ib_write_bw"))
    return std::fputs("simnic bench: perftest is not installed (scripts/setup.sh installs it)\n", stderr), false;
  return true;
}

void save_results(const std::string& run_dir, const std::string& root, RunInfo* info, std::vector<Figure>* figures) {
  const std::string compared = compare_with_last(root, run_dir, *info, figures);
  write_csv(run_dir + "/bench.csv", *figures);
  write_json(run_dir + "/bench.json", *info, *figures, compared);
  if (FILE* txt = std::fopen((run_dir + "/bench.txt").c_str(), "w")) {
    print_header(txt, *info);
    print_table(txt, *figures);
    std::fclose(txt);
  }
  const std::string plot = write_plot(run_dir + "/bench.png", *info, *figures);
  std::printf("\nSaved: %s/bench.csv, bench.json, bench.txt%s\n", run_dir.c_str(), plot.empty() ? ", bench.png" : "");
  if (!plot.empty()) std::printf("No plot: %s\n", plot.c_str());
}

// --show RUN_DIR: a saved run, printed and plotted again from its bench.json.
int show_saved(const std::string& run_dir) {
  RunInfo info;
  std::vector<Figure> figures;
  if (!load_json(run_dir + "/bench.json", &info, &figures))
    return std::fprintf(stderr, "simnic bench: no readable %s/bench.json\n", run_dir.c_str()), 1;
  print_header(stdout, info);
  print_table(stdout, figures);
  std::error_code ec;
  fs::create_directories(run_dir + "/logs", ec);
  const std::string plot = write_plot(run_dir + "/bench.png", info, figures);
  std::printf("\n%s\n", plot.empty() ? ("Plot: " + run_dir + "/bench.png").c_str() : ("No plot: " + plot).c_str());
  return 0;
}

}  // namespace

int cmd_bench(const std::vector<std::string>& args) {
  Options o;
  if (int rc = parse_options(args, &o); rc >= 0) return rc;
  if (!o.show.empty()) return show_saved(o.show);
  if (!check_tools(o)) return 1;
  const std::string addr = o.addr.empty() ? default_addr() : o.addr;
  const std::string run_dir = make_run_dir(o.out);
  if (run_dir.empty()) return std::fprintf(stderr, "simnic bench: cannot create %s\n", o.out.c_str()), 1;
  Plan plan = make_plan(o, addr, run_dir + "/logs");
  RunInfo info = describe_run(o, plan, addr);
  install_interrupt_handlers();
  g_t0 = std::chrono::steady_clock::now();
  g_steps = int(plan.runs.size() + plan.baseline.bw_sizes.size() + plan.baseline.lat_sizes.size()) +
            (o.baseline_only ? 0 : 6);  // the three floor measurements, in both shapes
  const std::vector<pid_t> spinners = o.spin ? start_spinners(info.nproc) : std::vector<pid_t>{};
  info.spinners = int(spinners.size());
  Load load = o.load.empty() ? Load{} : start_load(o.load, info.nproc, addr, run_dir + "/logs");
  std::vector<Figure> figures = measure_baseline(plan.baseline, progress);
  g_step = int(plan.baseline.bw_sizes.size() + plan.baseline.lat_sizes.size());  // qperf does both in one step
  if (!o.baseline_only) {
    figures.push_back(tcp_message_rate(figures, plan.baseline, 64));  // beside ib_write_rate and floor_rate
    const std::vector<Figure> base = figures;
    // The floor sends as the NICs will: GSO unless --no-gso (the bench captures nothing).
    for (Figure f : measure_floor(o.quick, o.gso != "--no-gso", progress))
      attach_baseline(&f, base), figures.push_back(f);
  }
  const int timeout_s = o.timeout_s ? o.timeout_s : (o.quick ? 60 : 120);
  bool nics_ok = plan.runs.empty() || measure_simnic(plan, addr, run_dir + "/logs", timeout_s, up_extra(o), &figures);
  for (pid_t pid : spinners) kill_and_reap(pid);
  stop_load(&load, run_dir + "/logs");
  progress_done();
  kill_tracked();
  info.load_end = load_average();
  info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - g_t0).count();
  print_header(stdout, info);
  print_table(stdout, figures);
  // An interrupted run is not saved: the next run would compare itself with its gaps.
  if (interrupted()) return std::fputs("simnic bench: interrupted; nothing saved\n", stderr), 130;
  save_results(run_dir, o.out, &info, &figures);
  return nics_ok ? 0 : 1;
}

}  // namespace simnic::cli
