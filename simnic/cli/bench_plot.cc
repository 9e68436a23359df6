// The PNG of a simnic bench run, drawn by gnuplot (Debian's gnuplot-nox): bandwidth and
// latency against message size, kernel TCP next to each perftest, and bandwidth against the
// number of QPs. The data and the script stay next to the PNG, so it can be redrawn or edited.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "simnic/cli/bench.h"

namespace simnic::cli::bench {
namespace {

struct Series {
  std::string test;
  std::string title;
};
struct Panel {
  const char* title;
  const char* xlabel;
  const char* ylabel;
  std::vector<Series> series;
  bool p99;  // draws the figures' 99th percentiles instead of their values
};

const Panel kPanels[] = {
    {"Bandwidth",
     "message size (bytes)",
     "MB/s",
     {{"tcp_bw", "kernel TCP (tcp_bw)"},
      {"ib_write_bw", "ib_write_bw"},
      {"ib_read_bw", "ib_read_bw"},
      {"ib_send_bw", "ib_send_bw"},
      {"floor_bw", "floor (simnic shape, no protocol)"},
      {"floor_map_bw", "floor, NIC maps the memory"}}},
    {"Latency (one way, typical)",
     "message size (bytes)",
     "microseconds",
     {{"tcp_lat", "kernel TCP (tcp_lat)"},
      {"ib_write_lat", "ib_write_lat"},
      {"ib_send_lat", "ib_send_lat"},
      {"ib_read_lat", "ib_read_lat"},
      {"floor_lat", "floor (simnic shape, no protocol)"},
      {"floor_map_lat", "floor, NIC maps the memory"},
      {"floor_direct_lat", "floor, the program sends (no doorbell)"}},
     false},
    // Issue 26 point 3: the tails, TCP's (the built-in ping-pong's) beside perftest's.
    {"Latency p99 (one way)",
     "message size (bytes)",
     "microseconds",
     {{"tcp_lat", "kernel TCP (ping-pong p99)"},
      {"ib_write_lat", "ib_write_lat"},
      {"ib_send_lat", "ib_send_lat"},
      {"ib_read_lat", "ib_read_lat"},
      {"floor_lat", "floor (simnic shape, no protocol)"},
      {"floor_map_lat", "floor, NIC maps the memory"},
      {"floor_direct_lat", "floor, the program sends (no doorbell)"}},
     true},
    {"Many QPs: ib_write_bw 64 KiB, depth 4",
     "QP pairs",
     "MB/s",
     {{"many_qp_baseline", "kernel TCP (tcp_bw 64 KiB)"}, {"many_qp_write", "ib_write_bw -q N"}},
     false},
};

// Text for a single-quoted gnuplot string, where a quote is written twice.
std::string gnuplot_quoted(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out;
}

// The x of a figure in its panel: the QP count for the many-QP test, else the size.
double x_of(const Figure& f) { return f.test.rfind("many_qp", 0) == 0 ? f.qps : double(f.size); }

// Writes one data block per series that has a figure; returns the plot clauses for `panel`.
std::string write_panel_data(std::ofstream& dat, const std::string& dat_name, const Panel& panel,
                             const std::vector<Figure>& figures, int* block) {
  std::string clauses;
  for (const auto& s : panel.series) {
    std::string rows;
    for (const auto& f : figures) {
      const double y = panel.p99 ? f.p99_us : f.value;
      if (f.test == s.test && f.ok() && std::isfinite(y))
        rows += std::to_string(x_of(f)) + " " + std::to_string(y) + "\n";
      // The kernel's 64 KiB figure drawn across the many-QP panel, for scale.
      if (s.test == "many_qp_baseline" && f.test == "many_qp_write" && std::isfinite(f.baseline))
        rows += std::to_string(x_of(f)) + " " + std::to_string(f.baseline) + "\n";
    }
    if (rows.empty()) continue;
    dat << "# " << s.test << "\n" << rows << "\n\n";
    clauses += std::string(clauses.empty() ? "plot " : ", ") + "'" + dat_name + "' index " + std::to_string(*block) +
               (s.test.rfind("floor_map", 0) == 0 ? " with points pt 9 ps 2.5"
                : s.test.rfind("floor", 0) == 0   ? " with points pt 5 ps 2.5"
                                                  : " with linespoints lw 2 pt 7") +
               " title '" + gnuplot_quoted(s.title) + "'";
    ++*block;
  }
  // An empty panel (no NICs in a --floor-only run) with a y range of its own: gnuplot refuses
  // to draw a log-scale axis with no point on it.
  return clauses.empty() ? "plot [1:2][1:10] NaN notitle" : clauses;
}

bool in_panel(const Panel& panel, const Figure& f) {
  for (const auto& s : panel.series)
    if (s.test == f.test) return true;
  return false;
}

// The panel's x tics at the sizes (or QP counts) measured, labelled "64", "4K", "1M"; and a
// "failed" mark at each x where a test gave no figure, so a gap in a line is explained.
std::string panel_tics_and_marks(const Panel& panel, const std::vector<Figure>& figures) {
  std::map<double, std::string> tics;
  std::string marks = "unset label\n";
  for (const auto& f : figures) {
    if (!in_panel(panel, f)) continue;
    const double x = x_of(f);
    const uint64_t v = uint64_t(x);
    tics[x] = f.test.rfind("many_qp", 0) == 0 ? std::to_string(v)
              : v >= (1u << 20)               ? std::to_string(v >> 20) + "M"
              : v >= 1024                     ? std::to_string(v >> 10) + "K"
                                              : std::to_string(v);
    if (!f.ok())
      marks += "set label 'failed (" + std::to_string(f.error_completions) + " error CQEs)' at " + std::to_string(x) +
               ", graph 0.04 left rotate by 90 offset -1,0 tc rgb 'red'\n";
  }
  std::string out = "set xtics (";
  for (const auto& [x, text] : tics) out += (out.back() == '(' ? "'" : ", '") + text + "' " + std::to_string(x);
  return (tics.empty() ? std::string("set xtics autofreq") : out + ")") + "\n" + marks;
}

// Text inside a single-quoted gnuplot string.
std::string quoted(std::string s) {
  for (char& c : s)
    if (c == '\'' || c == '\\' || c == '\n') c = ' ';
  return s;
}

std::string script_head(const std::string& png, const RunInfo& info) {
  const std::string name = quoted(png.substr(png.rfind('/') + 1));
  return "set terminal pngcairo size 2000,540 noenhanced font ',10'\n"
         "set output '" +
         name +
         "'\n"
         "set multiplot layout 1,4 title 'simnic bench " +
         info.started_utc + ", " + info.mode + " mode, CPUs " + (info.spin ? "kept busy" : "idle") + ", " +
         std::to_string(info.nproc) + " x " + quoted(info.cpu_model) + ", commit " + quoted(info.commit) +
         "'\n"
         "set grid\nset key below height 1\nset offsets graph 0.04, graph 0.04, 0, 0\nset logscale x 2\nset logscale y "
         "10\nset format y '%g'\n";
}

}  // namespace

std::string write_plot(const std::string& png, const RunInfo& info, const std::vector<Figure>& figures) {
  const std::string dir = png.substr(0, png.rfind('/'));
  const std::string dat_name = "bench-plot.dat", gp = dir + "/bench-plot.gp";
  std::ofstream dat(dir + "/" + dat_name);
  std::string script = script_head(png, info);
  int block = 0;
  for (const Panel& p : kPanels) {
    script += std::string("set title '") + p.title + "'\nset xlabel '" + p.xlabel + "'\nset ylabel '" + p.ylabel +
              "'\n" + panel_tics_and_marks(p, figures) + write_panel_data(dat, dat_name, p, figures, &block) + "\n";
  }
  script += "unset multiplot\n";
  dat.close();
  std::ofstream(gp) << script;
  // gnuplot runs in the results directory so the script's file names are relative.
  const std::string log = dir + "/logs/gnuplot.log";
  Outcome o = run_logged({"sh", "-c", "cd \"$0\" && exec gnuplot bench-plot.gp", dir}, log, std::chrono::seconds(60));
  if (o.exit_code == 127)
    return "gnuplot is not installed (scripts/setup.sh installs gnuplot-nox); the plot's script is " + gp;
  if (o.exit_code != 0 || ::access(png.c_str(), R_OK) != 0) return "gnuplot failed (see " + log + ")";
  return "";
}

}  // namespace simnic::cli::bench
