// `simnic bench --quick` works as a tool: it exits 0, prints every expected row with a figure and
// a ratio, writes CSV and JSON that agree, draws a PNG, compares with the last saved run (one
// planted here, so the verdicts are known) and leaves no NIC running. No figure is ever checked
// against a time: the machine running the tests is shared and its speed says nothing.
#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "harness.h"

namespace simnic::it {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

struct Row {
  std::string test;
  uint64_t size;
  int qps;
};

// What --quick measures (simnic/cli/bench.cc's plan).
const std::vector<Row> kQuickRows = {
    {"ib_write_bw", 4096, 1},    {"ib_write_bw", 65536, 1},    {"ib_read_bw", 4096, 1}, {"ib_read_bw", 65536, 1},
    {"ib_send_bw", 4096, 1},     {"ib_send_bw", 65536, 1},     {"ib_write_lat", 2, 1},  {"ib_write_lat", 4096, 1},
    {"ib_send_lat", 2, 1},       {"ib_send_lat", 4096, 1},     {"ib_read_lat", 2, 1},   {"ib_read_lat", 4096, 1},
    {"many_qp_write", 65536, 1}, {"many_qp_write", 65536, 16}, {"floor_lat", 2, 1},     {"floor_bw", 65536, 1}};

// The message-rate rows (issue 26 point 2): ib_write_bw 64 B's MsgRate and the floor's rate.
const std::vector<Row> kRateRows = {{"ib_write_rate", 64, 1}, {"floor_rate", 64, 1}};

// The floor of the mapped shape (issue 26 point 4), beside the process_vm_* floor's rows.
const std::vector<Row> kMappedFloorRows = {{"floor_map_lat", 2, 1},
                                           {"floor_map_bw", 65536, 1},
                                           {"floor_map_rate", 64, 1}};

std::string size_text(uint64_t b) {
  if (b >= 1024) return std::to_string(b / 1024) + " KiB";
  return std::to_string(b) + " B";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Pids of simnicd processes started with `--addr addr` (read from /proc).
std::vector<pid_t> simnicds_on(const std::string& addr) {
  std::vector<pid_t> pids;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = slurp(e.path().string() + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find("simnicd ") != std::string::npos && cmd.find("--addr " + addr + " ") != std::string::npos)
      pids.push_back(pid_t(std::stol(name)));
  }
  return pids;
}

// Processes still in process group `pgid` (the harness starts each command in its own group,
// so this is whatever the bench started and left behind: spinners, qperf, perftest).
std::vector<pid_t> processes_in_group(pid_t pgid) {
  std::vector<pid_t> pids;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = slurp(e.path().string() + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string state;
    long ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != "Z") pids.push_back(pid_t(std::stol(pid)));
  }
  return pids;
}

// A previous quick run whose figures are absurd on purpose: 10^9 MB/s for ib_write_bw 64 KiB
// (any real figure is a regression) and 10^9 us for ib_send_lat 2 B (any real one improves).
void plant_previous_run(const std::string& root) {
  fs::create_directories(root + "/20000101-000000");
  json figs = json::array(
      {{{"test", "ib_write_bw"}, {"kind", "bw"}, {"size_bytes", 65536}, {"qps", 1}, {"value", 1e9}, {"status", "ok"}},
       {{"test", "ib_send_lat"}, {"kind", "lat"}, {"size_bytes", 2}, {"qps", 1}, {"value", 1e9}, {"status", "ok"}}});
  json doc = {{"run",
               {{"mode", "quick"}, {"spin", false}, {"started_utc", "2000-01-01T00:00:00Z"}, {"commit", "planted"}}},
              {"figures", figs}};
  std::ofstream(root + "/20000101-000000/bench.json") << doc.dump();
}

// The run directory the bench made (the one that is not planted).
std::string new_run_dir(const std::string& root) {
  for (const auto& e : fs::directory_iterator(root))
    if (e.path().filename() != "20000101-000000") return e.path().string();
  return "";
}

std::vector<std::map<std::string, std::string>> parse_csv(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  for (std::stringstream hs(line); std::getline(hs, line, ',');) header.push_back(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    std::map<std::string, std::string> row;
    std::stringstream ls(line);
    std::string cell;
    for (const auto& h : header) row[h] = std::getline(ls, cell, ',') ? cell : "";
    rows.push_back(row);
  }
  return rows;
}

const json* find_figure(const json& doc, const std::string& test, uint64_t size, int qps) {
  for (const json& f : doc["figures"])
    if (f["test"] == test && f["size_bytes"] == size && f["qps"] == qps) return &f;
  return nullptr;
}

bool is_png(const std::string& path) {
  const std::string bytes = slurp(path);
  return bytes.size() > 24 && bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0 && bytes.compare(12, 4, "IHDR") == 0;
}

class BenchTool : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/simnic-bench-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    for (pid_t pid : simnicds_on(addr_)) ::kill(pid, SIGKILL);  // only if the bench left one
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string root_;
  std::string addr_ = "127.254." + std::to_string(1 + ::getpid() % 250) + ".1";
};

void expect_table_rows(const std::string& out) {
  for (const Row& r : kQuickRows) {
    const std::string unit = r.test.find("_lat") != std::string::npos ? "us" : "MB/s";
    const std::regex row("\n" + r.test + R"(\s+)" + size_text(r.size) + R"(\s+)" + std::to_string(r.qps) +
                         R"(\s+[0-9.]+ )" + unit + R"(\s+[0-9.]+ )" + unit + R"(\s+[0-9.]+x\s+\d+\s+\d+)");
    EXPECT_TRUE(std::regex_search(out, row))
        << "no row with figures for " << r.test << " " << r.size << " x" << r.qps << " in:\n"
        << out;
  }
}

// Every CSV row has its twin in the JSON, with the same figures.
void expect_csv_matches_json(const std::string& dir, const json& doc) {
  const auto rows = parse_csv(dir + "/bench.csv");
  EXPECT_EQ(rows.size(), doc["figures"].size());
  for (const auto& row : rows) {
    const json* f = find_figure(doc, row.at("test"), std::stoull(row.at("size_bytes")), std::stoi(row.at("qps")));
    ASSERT_NE(f, nullptr) << row.at("test") << " " << row.at("size_bytes");
    EXPECT_EQ((*f)["status"], row.at("status"));
    EXPECT_EQ((*f)["error_completions"].get<uint64_t>(), std::stoull(row.at("error_completions")));
    for (const char* key : {"value", "baseline", "ratio", "p99_us", "baseline_p99_us", "p99_ratio"}) {
      if ((*f)[key].is_null()) {
        EXPECT_EQ(row.at(key), "") << key;
        continue;
      }
      const double j = (*f)[key].get<double>(), c = std::stod(row.at(key));
      EXPECT_NEAR(c, j, std::abs(j) * 1e-5) << row.at("test") << " " << key;
    }
  }
}

void expect_figures_complete(const json& doc) {
  for (const Row& r : kQuickRows) {
    const json* f = find_figure(doc, r.test, r.size, r.qps);
    ASSERT_NE(f, nullptr) << r.test << " " << r.size << " x" << r.qps;
    EXPECT_EQ((*f)["status"], "ok") << r.test << " " << r.size;
    EXPECT_TRUE((*f)["value"].is_number() && (*f)["value"].get<double>() > 0) << r.test << " " << r.size;
    EXPECT_TRUE((*f)["ratio"].is_number() && (*f)["ratio"].get<double>() > 0) << r.test << " " << r.size;
    EXPECT_EQ((*f)["error_completions"], 0) << r.test << " " << r.size;
  }
  for (const char* base : {"tcp_bw", "tcp_lat"}) {
    int n = 0;
    for (const json& f : doc["figures"]) n += f["test"] == base && f["value"].is_number();
    EXPECT_EQ(n, 2) << base;
  }
}

// Issue 26 point 3, the tails: the kernel table has tcp_lat's p99 beside tcp_lat, and every
// latency row says its p99's ratio to TCP's p99 at the same size.
void expect_tail_columns(const std::string& out) {
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(SIZE\s+tcp_bw\s+tcp_lat\s+tcp_lat p99\n)"))) << out;
  for (const char* size : {"2 B", "4 KiB"}) {
    const std::regex row("\n" + std::string(size) + R"(\s+(\S+ MB/s\s+)?[0-9.]+ us\s+[0-9.]+ us\n)");
    EXPECT_TRUE(std::regex_search(out, row)) << "no tcp_lat p99 at " << size << " in:\n" << out;
  }
  for (const Row& r : kQuickRows) {
    if (r.test.find("_lat") == std::string::npos) continue;
    const std::regex row("\n" + r.test + R"(\s+)" + size_text(r.size) +
                         R"(\s.*avg [0-9.]+ p99 [0-9.]+ \([0-9.]+x tcp p99\)\n)");
    EXPECT_TRUE(std::regex_search(out, row)) << "no p99 ratio for " << r.test << " " << r.size << " in:\n" << out;
  }
}

// Issue 26 point 2: the message-rate row and its floor, in thousands of messages per second
// with a ratio to the kernel's rate; the simnic row also as a share of the floor.
void expect_rate_rows(const std::string& out) {
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(\ntcp_rate 64 B: [0-9]+k msg/s)"))) << out;
  for (const Row& r : kRateRows) {
    const std::regex row("\n" + r.test + R"(\s+64 B\s+1\s+[0-9]+k msg/s\s+[0-9]+k msg/s\s+[0-9.]+x\s+\d+\s+\d+)");
    EXPECT_TRUE(std::regex_search(out, row)) << "no row with figures for " << r.test << " in:\n" << out;
  }
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(\nib_write_rate .* [0-9.]+x floor(_map)?_rate\n)"))) << out;
}

// Issue 26 point 4: each mapped floor row with its figure, its ratio to the kernel's and, in
// its note, its ratio to the process_vm_* floor of the same run; the same figures in bench.json.
void expect_mapped_floor_rows(const std::string& out, const json& doc) {
  for (const Row& r : kMappedFloorRows) {
    const std::string kind = r.test.substr(std::string("floor_map_").size());
    const std::string unit = kind == "lat" ? "[0-9.]+ us" : kind == "bw" ? "[0-9.]+ MB/s" : "[0-9]+k msg/s";
    const std::regex row("\n" + r.test + R"(\s+)" + size_text(r.size) + R"(\s+1\s+)" + unit + R"(\s+)" + unit +
                         R"(\s+[0-9.]+x\s+0\s+0\s+[0-9.]+x floor_)" + kind + "[,\n]");
    EXPECT_TRUE(std::regex_search(out, row)) << "no row with figures for " << r.test << " in:\n" << out;
    const json* f = find_figure(doc, r.test, r.size, r.qps);
    ASSERT_NE(f, nullptr) << r.test;
    EXPECT_EQ((*f)["kind"], kind);
    EXPECT_EQ((*f)["status"], "ok") << f->dump();
    EXPECT_TRUE((*f)["value"].is_number() && (*f)["value"].get<double>() > 0) << f->dump();
    EXPECT_TRUE((*f)["ratio"].is_number() && (*f)["ratio"].get<double>() > 0) << f->dump();
    const json* old_floor = find_figure(doc, "floor_" + kind, r.size, r.qps);
    ASSERT_NE(old_floor, nullptr) << "floor_" << kind;
    EXPECT_EQ((*old_floor)["status"], "ok") << old_floor->dump();
  }
  // The direct shape's latency floor (a post that sends itself), its note the ratio to the mapped
  // floor of the same run.
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(
floor_direct_lat\s+2 B\s+1\s+[0-9.]+ us\s+[0-9.]+ us\s+[0-9.]+x\s+0\s+0\s+[0-9.]+x floor_map_lat, avg )")))
      << out;
  const json* direct = find_figure(doc, "floor_direct_lat", 2, 1);
  ASSERT_NE(direct, nullptr);
  EXPECT_EQ((*direct)["status"], "ok") << direct->dump();
  EXPECT_TRUE((*direct)["value"].is_number() && (*direct)["value"].get<double>() > 0) << direct->dump();
}

// The same in bench.json: TCP's p99 on every tcp_lat, carried to the latency rows with its
// ratio; the rate figures with their kernel figure and unit.
void expect_tail_and_rate_figures(const json& doc) {
  std::map<uint64_t, double> tcp_p99;
  for (const json& f : doc["figures"])
    if (f["test"] == "tcp_lat") {
      ASSERT_TRUE(f["p99_us"].is_number() && f["p99_us"].get<double>() > 0) << f.dump();
      tcp_p99[f["size_bytes"].get<uint64_t>()] = f["p99_us"].get<double>();
    }
  EXPECT_EQ(tcp_p99.size(), 2u);
  for (const Row& r : kQuickRows) {
    if (r.test.find("_lat") == std::string::npos) continue;
    const json& f = *find_figure(doc, r.test, r.size, r.qps);
    ASSERT_TRUE(f["p99_us"].is_number() && f["p99_ratio"].is_number()) << f.dump();
    EXPECT_EQ(f["baseline_p99_us"].get<double>(), tcp_p99.at(r.size)) << f.dump();
    EXPECT_NEAR(f["p99_ratio"].get<double>(), f["p99_us"].get<double>() / tcp_p99.at(r.size),
                f["p99_ratio"].get<double>() * 1e-9)
        << f.dump();
  }
  const json* kernel = find_figure(doc, "tcp_rate", 64, 1);
  ASSERT_NE(kernel, nullptr);
  EXPECT_TRUE((*kernel)["value"].is_number() && (*kernel)["value"].get<double>() > 0) << kernel->dump();
  for (const Row& r : kRateRows) {
    const json* f = find_figure(doc, r.test, r.size, r.qps);
    ASSERT_NE(f, nullptr) << r.test;
    EXPECT_EQ((*f)["kind"], "rate");
    EXPECT_EQ((*f)["unit"], "msg/s");
    EXPECT_EQ((*f)["status"], "ok") << f->dump();
    EXPECT_TRUE((*f)["value"].is_number() && (*f)["value"].get<double>() > 0) << f->dump();
    EXPECT_EQ((*f)["baseline"], (*kernel)["value"]) << f->dump();
    EXPECT_EQ((*f)["error_completions"], 0) << f->dump();
  }
}

TEST_F(BenchTool, QuickRunPrintsSavesPlotsAndCompares) {
  if (!have_program("ib_write_bw")) GTEST_SKIP() << "perftest is not installed (scripts/setup.sh installs it)";
  if (!have_program("gnuplot")) GTEST_SKIP() << "gnuplot is not installed (scripts/setup.sh installs gnuplot-nox)";
  plant_previous_run(root_);
  // --no-spin: the spinners would slow the tests running next to this one (they are checked below).
  Result r = run({bin_dir() + "/simnic", "bench", "--quick", "--no-spin", "--out", root_, "--addr", addr_}, {}, 280s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(simnicds_on(addr_).empty()) << "the bench left its NICs running";
  expect_table_rows(r.output);
  expect_tail_columns(r.output);
  expect_rate_rows(r.output);
  const std::string dir = new_run_dir(root_);
  ASSERT_FALSE(dir.empty());
  json doc = json::parse(slurp(dir + "/bench.json"), nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << slurp(dir + "/bench.json");
  EXPECT_EQ(doc["run"]["mode"], "quick");
  EXPECT_EQ(doc["run"]["spin"], false);
  EXPECT_GT(doc["run"]["nproc"].get<int>(), 0);
  for (const char* key : {"commit", "cpu_model", "kernel", "baseline_tool"}) EXPECT_NE(doc["run"][key], "") << key;
  expect_figures_complete(doc);
  expect_tail_and_rate_figures(doc);
  expect_mapped_floor_rows(r.output, doc);
  expect_csv_matches_json(dir, doc);
  EXPECT_TRUE(is_png(dir + "/bench.png"));
  EXPECT_EQ(r.output.find("No plot:"), std::string::npos) << r.output;  // gnuplot drew every panel
  // The comparison with the planted run: never a failure, but said.
  EXPECT_EQ(doc["compared_with"], root_ + "/20000101-000000");
  EXPECT_EQ((*find_figure(doc, "ib_write_bw", 65536, 1))["verdict"], "regressed");
  EXPECT_EQ((*find_figure(doc, "ib_send_lat", 2, 1))["verdict"], "improved");
  EXPECT_NE(r.output.find("regressed ib_write_bw 64 KiB"), std::string::npos) << r.output;
  // --show prints the saved run again, from its JSON, and redraws the plot.
  fs::remove(dir + "/bench.png");
  Result shown = run({bin_dir() + "/simnic", "bench", "--show", dir}, {}, 60s);
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  expect_table_rows(shown.output);
  expect_tail_columns(shown.output);
  expect_rate_rows(shown.output);
  EXPECT_TRUE(is_png(dir + "/bench.png"));
  EXPECT_EQ(r.output.find("No plot:"), std::string::npos) << r.output;  // gnuplot drew every panel
}

// Without qperf the baseline is our own socket test; --baseline builtin forces it. With the
// default --spin: one nice-19 spinner per CPU, recorded, and none left afterwards.
TEST_F(BenchTool, BuiltinBaselineMeasuresTcpOnBusyCpus) {
  Process bench(
      {bin_dir() + "/simnic", "bench", "--quick", "--baseline", "builtin", "--baseline-only", "--out", root_});
  Result r = bench.wait(120s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string dir = new_run_dir(root_);
  json doc = json::parse(slurp(dir + "/bench.json"), nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["run"]["baseline_tool"], "builtin");
  EXPECT_EQ(doc["run"]["spin"], true);
  EXPECT_EQ(doc["run"]["spinners"], doc["run"]["nproc"]);
  EXPECT_TRUE(processes_in_group(bench.pid()).empty()) << "the bench left a spinner or a server running";
  ASSERT_EQ(doc["figures"].size(), 4u) << doc.dump(1);
  for (const json& f : doc["figures"]) {
    EXPECT_EQ(f["status"], "ok") << f.dump();
    EXPECT_TRUE(f["value"].is_number() && f["value"].get<double>() > 0) << f.dump();
    if (f["test"] == "tcp_lat") {  // the built-in ping-pong's tail, from the same round trips
      EXPECT_TRUE(f["p99_us"].is_number() && f["p99_us"].get<double>() > 0) << f.dump();
    }
  }
  expect_csv_matches_json(dir, doc);
}

// --floor-only: the kernel baseline and the floors of both shapes, no NICs and no perftest
// (so this runs where perftest is not installed). Every floor row has a figure: the mapped
// shape's memfd and the process_vm_* shape's reads both worked and moved the right bytes.
TEST_F(BenchTool, FloorOnlyMeasuresBothShapes) {
  Result r = run({bin_dir() + "/simnic", "bench", "--quick", "--floor-only", "--no-spin", "--baseline", "builtin",
                  "--out", root_},
                 {}, 120s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string dir = new_run_dir(root_);
  json doc = json::parse(slurp(dir + "/bench.json"), nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["run"]["mode"], "quick-floor");
  for (const char* test : {"floor_lat", "floor_bw", "floor_rate"}) {
    const json* f = nullptr;
    for (const json& g : doc["figures"])
      if (g["test"] == test) f = &g;
    ASSERT_NE(f, nullptr) << test;
    EXPECT_EQ((*f)["status"], "ok") << f->dump();
    EXPECT_TRUE((*f)["value"].is_number() && (*f)["value"].get<double>() > 0) << f->dump();
  }
  expect_mapped_floor_rows(r.output, doc);
  for (const json& f : doc["figures"])  // nothing but the kernel and the floors
    EXPECT_TRUE(f["test"].get<std::string>().rfind("tcp_", 0) == 0 ||
                f["test"].get<std::string>().rfind("floor_", 0) == 0)
        << f.dump();
  expect_csv_matches_json(dir, doc);
  EXPECT_TRUE(is_png(dir + "/bench.png"));
}

TEST_F(BenchTool, RefusesBadArguments) {
  Result r = run({bin_dir() + "/simnic", "bench", "--baseline", "iperf"}, {}, 10s);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("usage: simnic bench"), std::string::npos) << r.output;
  r = run({bin_dir() + "/simnic", "bench", "--load", "disk"}, {}, 10s);  // cpu, traffic or all
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run({bin_dir() + "/simnic", "bench", "--help"}, {}, 10s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--load KIND"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace simnic::it
