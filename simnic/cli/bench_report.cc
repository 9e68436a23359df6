// What simnic bench prints and saves: the table (every figure with its ratio to the kernel
// baseline), bench.csv and bench.json (the same figures), and the comparison with the last
// saved run of the same mode. Time figures only inform: nothing here ever fails the run.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "simnic/cli/bench.h"

namespace simnic::cli::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kMoved = 0.10;  // a figure that moved by more than this is called out

std::string fmt(double v, const char* format = "%.1f") {
  if (!std::isfinite(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string figure_text(const Figure& f) {
  if (!std::isfinite(f.value)) return "-";
  if (f.kind == "rate") return fmt(f.value / 1e3, "%.0f") + "k " + f.unit();  // fits the column up to 10^9
  return fmt(f.value, f.value >= 1000 ? "%.0f" : "%.1f") + " " + f.unit();
}

std::string csv_quote(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string csv_number(double v) { return std::isfinite(v) ? fmt(v, "%.6g") : ""; }

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

double number_of(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN;
}

double change_of(const Figure& f) { return std::isfinite(f.previous) ? (f.value - f.previous) / f.previous : NAN; }

// "ib_write_bw 64 KiB" or "many_qp_write 64 KiB x1000 QPs".
std::string label(const Figure& f) {
  std::string s = f.test + " " + human_size(f.size);
  if (f.qps > 1 || f.test.rfind("many_qp", 0) == 0) s += " x" + std::to_string(f.qps) + " QPs";
  return s;
}

// tcp_bw and tcp_lat at each size, with tcp_lat's 99th percentile (the built-in ping-pong's),
// then the kernel's message rate when the run measured it.
void print_baselines(std::FILE* out, const std::vector<Figure>& figures) {
  std::fprintf(out, "%-10s %14s %12s %12s\n", "SIZE", "tcp_bw", "tcp_lat", "tcp_lat p99");
  struct Row {
    std::string bw, lat, p99;
  };
  std::map<uint64_t, Row> rows;
  for (const auto& f : figures) {
    if (f.test == "tcp_bw") rows[f.size].bw = f.ok() ? figure_text(f) : "FAILED";
    if (f.test != "tcp_lat") continue;
    rows[f.size].lat = f.ok() ? figure_text(f) : "FAILED";
    if (std::isfinite(f.p99_us)) rows[f.size].p99 = fmt(f.p99_us) + " us";
  }
  for (const auto& [size, r] : rows)
    std::fprintf(out, "%-10s %14s %12s %12s\n", human_size(size).c_str(), r.bw.c_str(), r.lat.c_str(), r.p99.c_str());
  for (const auto& f : figures)
    if (f.test == "tcp_rate")
      std::fprintf(out, "tcp_rate %s: %s (%s-byte writes per second on one TCP stream)\n", human_size(f.size).c_str(),
                   f.ok() ? figure_text(f).c_str() : "FAILED", std::to_string(f.size).c_str());
}

// The figure called `test` at `size` measured in the same run, if it succeeded.
const Figure* figure_named(const std::vector<Figure>& figures, const std::string& test, uint64_t size) {
  for (const auto& g : figures)
    if (g.test == test && g.size == size && g.ok()) return &g;
  return nullptr;
}

// The floor of simnic's shape for `f`'s kind and size: the mapped shape's (floor_map_*: the NIC
// maps registered memory, shared pages, issue 26 point 4), else the process_vm_* one's.
const Figure* floor_of(const Figure& f, const std::vector<Figure>& figures) {
  if (const Figure* g = figure_named(figures, "floor_map_" + f.kind, f.size)) return g;
  return figure_named(figures, "floor_" + f.kind, f.size);
}

// A mapped-floor figure over the process_vm_* floor of the same run ("1.42x floor_bw"): what
// the NIC mapping registered memory buys (issue 26 point 4); the direct floor over the mapped
// one ("0.61x floor_map_lat"): what a post that sends itself buys; "" for any other figure.
std::string mapped_gain(const Figure& f, const std::vector<Figure>& figures) {
  const bool mapped = f.test.rfind("floor_map_", 0) == 0, direct = f.test.rfind("floor_direct_", 0) == 0;
  if (!mapped && !direct) return "";
  const std::string base = (direct ? "floor_map_" : "floor_") + f.kind;
  const Figure* floor = figure_named(figures, base, f.size);
  return floor && floor->value > 0 ? fmt(f.value / floor->value, "%.2f") + "x " + base : "";
}

// Latency: mean, p99 and the p99's ratio to TCP's p99 (the goal: at most 3x). Message
// rate: the share of the floor measured in the same run. A mapped floor: first its ratio to
// the process_vm_* floor.
std::string note_of(const Figure& f, const std::vector<Figure>& figures) {
  if (!f.ok()) return f.status;
  const std::string gain = mapped_gain(f, figures);
  if (f.kind == "lat")
    return (gain.empty() ? "" : gain + ", ") + "avg " + fmt(f.avg_us) + " p99 " + fmt(f.p99_us) + " (" +
           (std::isfinite(f.p99_ratio) ? fmt(f.p99_ratio, "%.2f") + "x" : std::string("-")) + " tcp p99)";
  if (!gain.empty()) return gain;
  const Figure* floor = f.kind == "rate" && f.test.rfind("floor_", 0) != 0 ? floor_of(f, figures) : nullptr;
  if (floor && floor->value > 0) return fmt(f.value / floor->value, "%.2f") + "x " + floor->test;
  return "";
}

}  // namespace

std::string human_size(uint64_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " B";
}

void print_header(std::FILE* out, const RunInfo& i) {
  std::fprintf(out, "simnic bench, %s: %s mode, baseline %s, CPUs %s\n", i.started_utc.c_str(), i.mode.c_str(),
               i.baseline_tool.c_str(),
               i.spin ? ("kept busy (--spin: " + std::to_string(i.spinners) + " nice-19 spinners)").c_str()
                      : "left idle (--no-spin)");
  std::fprintf(out, "machine: %d x %s, Linux %s, load average %s at start, %s at end; commit %s; %.0f s\n", i.nproc,
               i.cpu_model.c_str(), i.kernel.c_str(), fmt(i.load_start, "%.2f").c_str(),
               fmt(i.load_end, "%.2f").c_str(), i.commit.c_str(), i.seconds);
  if (!i.load.empty()) std::fprintf(out, "load: --load %s for the whole run (docs/performance.md)\n", i.load.c_str());
}

void print_table(std::FILE* out, const std::vector<Figure>& figures) {
  std::fprintf(out, "\nKernel baseline (TCP over loopback)\n");
  print_baselines(out, figures);
  std::fprintf(out, "\nsimnic (perftest through simnic run; ratio = simnic / kernel at the same size)\n");
  std::fprintf(out, "%-16s %7s %5s %12s %12s %8s %7s %7s  %s\n", "TEST", "SIZE", "QPS", "SIMNIC", "KERNEL", "RATIO",
               "ERRORS", "RETX", "NOTE");
  for (const auto& f : figures) {
    if (f.test.rfind("tcp_", 0) == 0) continue;
    Figure base = f;
    base.value = f.baseline;
    std::fprintf(out, "%-16s %7s %5d %12s %12s %8s %7llu %7llu  %s\n", f.test.c_str(), human_size(f.size).c_str(),
                 f.qps, f.ok() ? figure_text(f).c_str() : "FAILED", figure_text(base).c_str(),
                 std::isfinite(f.ratio) ? (fmt(f.ratio, "%.2f") + "x").c_str() : "-",
                 static_cast<unsigned long long>(f.error_completions), static_cast<unsigned long long>(f.retransmits),
                 note_of(f, figures).c_str());
  }
}

void write_csv(const std::string& path, const std::vector<Figure>& figures) {
  std::ofstream out(path);
  out << "test,kind,size_bytes,qps,iterations,value,unit,baseline,ratio,avg_us,p99_us,error_completions,"
         "retransmits,status,previous,change_pct,verdict,baseline_p99_us,p99_ratio\n";
  for (const auto& f : figures) {
    out << f.test << "," << f.kind << "," << f.size << "," << f.qps << "," << f.iterations << "," << csv_number(f.value)
        << "," << f.unit() << "," << csv_number(f.baseline) << "," << csv_number(f.ratio) << "," << csv_number(f.avg_us)
        << "," << csv_number(f.p99_us) << "," << f.error_completions << "," << f.retransmits << ","
        << csv_quote(f.status) << "," << csv_number(f.previous) << "," << csv_number(change_of(f) * 100) << ","
        << f.verdict << "," << csv_number(f.baseline_p99_us) << "," << csv_number(f.p99_ratio) << "\n";
  }
}

void write_json(const std::string& path, const RunInfo& i, const std::vector<Figure>& figures,
                const std::string& compared_with) {
  json run = {{"started_utc", i.started_utc},
              {"mode", i.mode},
              {"spin", i.spin},
              {"spinners", i.spinners},
              {"baseline_tool", i.baseline_tool},
              {"commit", i.commit},
              {"cpu_model", i.cpu_model},
              {"nproc", i.nproc},
              {"kernel", i.kernel},
              {"load_start", number_or_null(i.load_start)},
              {"load_end", number_or_null(i.load_end)},
              {"seconds", i.seconds},
              {"nic_addr", i.nic_addr},
              {"load", i.load}};
  json list = json::array();
  for (const auto& f : figures)
    list.push_back({{"test", f.test},
                    {"kind", f.kind},
                    {"size_bytes", f.size},
                    {"qps", f.qps},
                    {"iterations", f.iterations},
                    {"value", number_or_null(f.value)},
                    {"unit", f.unit()},
                    {"baseline", number_or_null(f.baseline)},
                    {"ratio", number_or_null(f.ratio)},
                    {"avg_us", number_or_null(f.avg_us)},
                    {"p99_us", number_or_null(f.p99_us)},
                    {"error_completions", f.error_completions},
                    {"retransmits", f.retransmits},
                    {"status", f.status},
                    {"previous", number_or_null(f.previous)},
                    {"change_pct", number_or_null(change_of(f) * 100)},
                    {"verdict", f.verdict},
                    {"baseline_p99_us", number_or_null(f.baseline_p99_us)},
                    {"p99_ratio", number_or_null(f.p99_ratio)}});
  json doc = {{"tool", "simnic bench"},
              {"format", 1},
              {"run", run},
              {"compared_with", compared_with.empty() ? json(nullptr) : json(compared_with)},
              {"figures", list}};
  std::ofstream(path) << doc.dump(2) << "\n";
}

Figure figure_from_json(const json& j) {
  Figure f;
  f.test = j.value("test", "");
  f.kind = j.value("kind", "");
  f.size = j.value("size_bytes", uint64_t(0));
  f.qps = j.value("qps", 1);
  f.iterations = j.value("iterations", 0L);
  f.value = number_of(j, "value");
  f.avg_us = number_of(j, "avg_us");
  f.p99_us = number_of(j, "p99_us");
  f.baseline = number_of(j, "baseline");
  f.ratio = number_of(j, "ratio");
  f.baseline_p99_us = number_of(j, "baseline_p99_us");
  f.p99_ratio = number_of(j, "p99_ratio");
  f.error_completions = j.value("error_completions", uint64_t(0));
  f.retransmits = j.value("retransmits", uint64_t(0));
  f.status = j.value("status", "");
  return f;
}

bool load_json(const std::string& path, RunInfo* info, std::vector<Figure>* figures) {
  std::ifstream in(path);
  json doc = json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.contains("run") || !doc.contains("figures")) return false;
  const json& run = doc["run"];
  info->mode = run.value("mode", "");
  info->spin = run.value("spin", true);
  info->spinners = run.value("spinners", 0);
  info->load = run.value("load", "");
  info->started_utc = run.value("started_utc", "");
  info->commit = run.value("commit", "");
  info->baseline_tool = run.value("baseline_tool", "");
  info->cpu_model = run.value("cpu_model", "");
  info->kernel = run.value("kernel", "");
  info->nproc = run.value("nproc", 0);
  info->load_start = number_of(run, "load_start");
  info->load_end = number_of(run, "load_end");
  info->seconds = run.value("seconds", 0.0);
  info->nic_addr = run.value("nic_addr", "");
  for (const json& j : doc["figures"]) figures->push_back(figure_from_json(j));
  return true;
}

// The newest run directory under root (names are timestamps) other than `self` whose
// bench.json has the same mode and spin setting.
std::string find_last_run(const std::string& root, const std::string& self, const RunInfo& info, RunInfo* last,
                          std::vector<Figure>* figures) {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory() && fs::exists(e.path() / "bench.json")) dirs.push_back(e.path().string());
  std::sort(dirs.rbegin(), dirs.rend());
  for (const auto& d : dirs) {
    if (fs::equivalent(d, self, ec)) continue;
    RunInfo prev;
    std::vector<Figure> figs;
    if (load_json(d + "/bench.json", &prev, &figs) && prev.mode == info.mode && prev.spin == info.spin) {
      *figures = figs;
      *last = prev;
      return d;
    }
  }
  return "";
}

std::string compare_with_last(const std::string& root, const std::string& self, const RunInfo& info,
                              std::vector<Figure>* figures) {
  std::vector<Figure> old;
  RunInfo last_info;
  const std::string last = find_last_run(root, self, info, &last_info, &old);
  if (last.empty()) {
    std::printf("\nNo earlier %s run%s in %s to compare with.\n", info.mode.c_str(), info.spin ? "" : " without --spin",
                root.c_str());
    return "";
  }
  std::map<std::string, double> before;
  for (const auto& f : old)
    if (f.ok()) before[f.key()] = f.value;
  int moved = 0, same = 0;
  std::string lines;
  for (auto& f : *figures) {
    auto it = before.find(f.key());
    if (!f.ok() || it == before.end() || it->second <= 0) continue;
    f.previous = it->second;
    const double change = change_of(f);
    if (std::abs(change) <= kMoved) {
      ++same;
      continue;
    }
    const bool better = f.kind == "lat" ? change < 0 : change > 0;  // a rate, like a bandwidth, should grow
    f.verdict = better ? "improved" : "regressed";
    ++moved;
    lines += "  " + f.verdict + (better ? "  " : " ") + label(f) + ": " + fmt(f.previous) + " -> " + fmt(f.value) +
             " " + f.unit() + " (" + (change > 0 ? "+" : "") + fmt(change * 100, "%.0f") + "%)\n";
  }
  std::printf("\nCompared with %s (%s, commit %s): %d figure%s moved by more than 10%%, %d within 10%%%s\n%s",
              last.c_str(), last_info.started_utc.c_str(), last_info.commit.c_str(), moved, moved == 1 ? "" : "s", same,
              moved ? ":" : ".", lines.c_str());
  if (moved) std::printf("  (time figures on a shared machine are noisy: this is information, never a failure)\n");
  return last;
}

}  // namespace simnic::cli::bench
