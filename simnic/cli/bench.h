// `simnic bench`: simnic's perftest figures next to the kernel's TCP on the same machine, in one
// run. The pieces, one file each:
//   bench.cc           options, the plan of tests, the run
//   bench_proc.cc      child processes bounded in time and killed by pid, CPU spinners, Ctrl-C
//   bench_baseline.cc  the kernel baseline: qperf tcp_bw/tcp_lat, or our own socket test
//   bench_floor.cc     the floor of simnic's shape: four processes, simnic's copies, no protocol;
//                      and of the mapped shape (the NIC maps registered memory)
//   bench_perftest.cc  one perftest run on the private NICs, its report row parsed
//   bench_report.cc    the table, CSV, JSON, the gnuplot PNG, the comparison with the last run
//   bench_load.cc      --load: CPU hogs and a second NIC pair streaming, for the whole run
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace simnic::cli::bench {

// One figure: a baseline (tcp_bw, tcp_lat) or a simnic test. Bandwidth in MB/s (10^6 bytes
// per second), latency in microseconds, one-way (half a round trip, as qperf and perftest say).
struct Figure {
  std::string test;   // "tcp_bw", "ib_write_bw", "ib_send_lat", "many_qp_write", ...
  std::string kind;   // "bw", "lat" or "rate" (messages per second)
  uint64_t size = 0;  // message size, bytes
  int qps = 1;
  long iterations = 0;  // messages per QP (perftest -n); 0 for time-bounded baselines
  double value = NAN;   // bw: average MB/s; lat: typical (median) µs; rate: messages/s
  double avg_us = NAN;  // lat only: mean and 99th percentile
  double p99_us = NAN;
  double baseline = NAN;           // the kernel figure this one is compared with
  double ratio = NAN;              // value / baseline
  double baseline_p99_us = NAN;    // lat only: tcp_lat's 99th percentile at the same size
  double p99_ratio = NAN;          // p99_us / baseline_p99_us (issue 26: the tails)
  uint64_t error_completions = 0;  // CQEs in error on both NICs during the test
  uint64_t retransmits = 0;        // packets resent by both NICs during the test
  std::string status = "ok";       // "ok", or "failed: why"
  // Filled by the comparison with the last saved run.
  double previous = NAN;
  std::string verdict;  // "", "regressed", "improved" (moved by more than 10 %)

  bool ok() const { return status == "ok" && std::isfinite(value); }
  std::string key() const { return test + "/" + std::to_string(size) + "/" + std::to_string(qps); }
  std::string unit() const { return kind == "bw" ? "MB/s" : kind == "rate" ? "msg/s" : "us"; }
};

// What was run, where, and how: recorded with the figures.
struct RunInfo {
  std::string started_utc;  // 2026-11-23T21:50:00Z
  std::string mode;         // "full" or "quick"
  bool spin = true;         // CPUs kept busy by nice-19 spinners during the run
  int spinners = 0;
  std::string load;           // --load KIND, "" without
  std::string baseline_tool;  // "qperf" or "builtin"
  std::string commit, cpu_model, kernel;
  int nproc = 0;
  double load_start = NAN, load_end = NAN;  // 1-minute load average before and after
  double seconds = 0;                       // wall time of the whole run
  std::string nic_addr;                     // simnic0's address
};

// ---- bench_proc.cc: child processes ----

struct Outcome {
  int exit_code = -1;  // -1 timed out (killed), 128+N killed by signal N
  bool timed_out = false;
};

// True once SIGINT/SIGTERM/SIGHUP arrived (installed by install_interrupt_handlers).
bool interrupted();
void install_interrupt_handlers();

// Processes this run must kill (SIGKILL, by pid) if it ends early: children, spinners, NICs.
void track_pid(pid_t pid);
void untrack_pid(pid_t pid);
void kill_tracked();

// Starts argv with stdout and stderr into `log` (appended); the child dies with us.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log);
// Waits for `pid` up to `timeout`; kills it on expiry or interrupt.
Outcome wait_for(pid_t pid, std::chrono::milliseconds timeout);
// spawn + wait_for.
Outcome run_logged(const std::vector<std::string>& argv, const std::string& log, std::chrono::milliseconds timeout);
// Kills `pid` (SIGKILL) and reaps it.
void kill_and_reap(pid_t pid);

std::string read_file(const std::string& path);
int free_tcp_port();
bool wait_for_listener(int port, std::chrono::milliseconds timeout);

// One busy loop per CPU at nice 19, to keep idle vCPUs from sleeping (see docs/performance.md).
std::vector<pid_t> start_spinners(int count);

// ---- bench_load.cc: --load KIND, a busy machine for the whole run ----

struct Load {
  std::string kind;         // "cpu", "traffic" or "all"
  std::string dir;          // the load NICs' SIMNIC_DIR ("" without traffic)
  std::vector<pid_t> pids;  // CPU hogs and the perftest loops
};
bool valid_load_kind(const std::string& kind);
Load start_load(const std::string& kind, int nproc, const std::string& nic_addr, const std::string& log_dir);
void stop_load(Load* load, const std::string& log_dir);

// ---- bench_baseline.cc ----

struct BaselinePlan {
  std::string tool;  // "qperf" or "builtin"
  std::vector<uint64_t> bw_sizes, lat_sizes;
  int seconds = 2;   // per qperf test
  std::string addr;  // loopback address the server is reached on
  std::string log_dir;
};
// Progress is reported through `step` (called once per size).
using StepFn = void (*)(const std::string& what);
std::vector<Figure> measure_baseline(const BaselinePlan& plan, StepFn step);
// The built-in socket test (also what --baseline builtin runs).
double builtin_tcp_bw(const std::string& addr, uint64_t size, double seconds);
double builtin_tcp_lat(const std::string& addr, uint64_t size, double seconds);
// The built-in ping-pong's round trips, halved: mean and 99th percentile in µs (NaN when it
// failed). qperf reports only a mean, so TCP's p99 always comes from here.
struct LatencyStats {
  double mean_us = NAN, p99_us = NAN;
};
LatencyStats builtin_tcp_lat_stats(const std::string& addr, uint64_t size, double seconds);
// The kernel's message rate: `size`-byte writes per second on a TCP stream ("tcp_rate", kind
// "rate"): tcp_bw at `size` over `size` when the run measured it, else the built-in stream.
Figure tcp_message_rate(const std::vector<Figure>& baseline, const BaselinePlan& plan, uint64_t size);

// ---- bench_floor.cc: four processes in simnic's shape, with no protocol ----

// How the NIC processes reach the applications' memory: process_vm_readv/writev (simnic's
// shape since issue 14; the floor_* figures), or a shared mapping of it, as simnicd reaches an
// MR whose pages the shim moved onto a memfd (issue 26 point 4; the floor_map_* figures): the
// sending NIC sends straight from the mapping, the receiving NIC copies into it with memcpy.
// kDirect (latency only; floor_direct_lat): the mapped shape where the application sends its
// ping itself from its NIC's socket, as a post under a lent PSN does (docs/architecture.md,
// "Posts that send themselves"): application -> UDP -> NIC process -> application.
enum class FloorPath { kProcessVm, kMapped, kDirect };

// Typical one-way latency (µs) of a `size`-byte ping-pong, application -> NIC process -> UDP ->
// NIC process -> application, with simnic's copies, sessions and waits; NaN if it did not finish
// or the bytes that arrived were not the ones sent. Also the mean and 99th percentile.
double floor_lat(FloorPath path, uint64_t size, long iterations, double* avg_us = nullptr, double* p99_us = nullptr);
// MB/s of `messages` messages of `size` bytes along the same path (GSO sends and GRO when `gso`).
double floor_bw(FloorPath path, uint64_t size, long messages, bool gso);
// Messages per second of `messages` `size`-byte messages posted one at a time (a doorbell each)
// by application A with `window` in flight, along the same path, as ib_write_bw's message rate.
double floor_rate(FloorPath path, uint64_t size, long messages, int window);
// floor_lat at 2 B, floor_bw at 64 KiB and floor_rate at 64 B, each for both paths
// (floor_map_lat, floor_map_bw, floor_map_rate), and floor_direct_lat, as figures compared with
// tcp_lat, tcp_bw and tcp_rate.
std::vector<Figure> measure_floor(bool quick, bool gso, StepFn step);

// ---- bench_perftest.cc ----

struct PerftestRun {
  std::string binary;  // ib_write_bw, ...
  std::string test;    // name in the results
  std::string kind;    // "bw" or "lat"
  uint64_t size = 0;
  int qps = 1;
  long iterations = 0;
  int tx_depth = 0;  // 0: perftest's default
};
struct NicSet {
  std::string simnic;  // our own executable, for `simnic run`
  std::string dir;     // the private SIMNIC_DIR
  std::string server_addr;
  std::string log_dir;
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
};
Figure run_perftest(const NicSet& nics, const PerftestRun& run);
// The figures of perftest's report row (the line under "#bytes"): bw -> {MB/s}; lat ->
// {typical, avg, p99} in µs. Empty when there is no row.
std::vector<double> parse_perftest_row(const std::string& output, const std::string& kind);
// The sum of one counter over both NICs (from their Status replies).
uint64_t nic_counter_sum(const std::string& dir, const std::string& key);

// ---- bench_report.cc ----

void print_header(std::FILE* out, const RunInfo& info);
void print_table(std::FILE* out, const std::vector<Figure>& figures);
void write_csv(const std::string& path, const std::vector<Figure>& figures);
void write_json(const std::string& path, const RunInfo& info, const std::vector<Figure>& figures,
                const std::string& compared_with);
// Writes the gnuplot script and data next to `png` and runs gnuplot. Returns "" or why not.
std::string write_plot(const std::string& png, const RunInfo& info, const std::vector<Figure>& figures);
// The newest earlier run under `root` (other than `self`) with the same mode and spin setting;
// "" when none. Fills each figure's previous/verdict and prints what moved.
std::string compare_with_last(const std::string& root, const std::string& self, const RunInfo& info,
                              std::vector<Figure>* figures);
// Loads the figures of a bench.json; false when it cannot be read.
bool load_json(const std::string& path, RunInfo* info, std::vector<Figure>* figures);
std::string human_size(uint64_t bytes);

}  // namespace simnic::cli::bench
