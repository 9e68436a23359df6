// One perftest measurement on simnic: Debian's unmodified binary, server on simnic0, client on
// simnic1 (RoCE GID index 0), both through `simnic run`, each bounded in time. The figure is the
// client's report row; the NICs' counters say how many completions failed and how many packets
// were resent meanwhile.
#include <cctype>
#include <sstream>

#include "simnic/abi/control.h"
#include "simnic/cli/bench.h"
#include "simnic/cli/cli.h"

namespace simnic::cli::bench {
namespace {

using namespace std::chrono_literals;

// perftest's "MB/sec" is MiB/s (2^20 bytes: its --report_gbits help says so); we report 10^6.
constexpr double kMiB = 1048576.0 / 1e6;

std::vector<std::string> perftest_argv(const NicSet& nics, const PerftestRun& run, int port, const char* device) {
  std::vector<std::string> argv = {nics.simnic, "run",
                                   "--",        run.binary,
                                   "-d",        device,
                                   "-x",        "0",
                                   "-p",        std::to_string(port),
                                   "-s",        std::to_string(run.size),
                                   "-n",        std::to_string(run.iterations),
                                   "-F"};
  if (run.qps > 1) argv.insert(argv.end(), {"-q", std::to_string(run.qps)});
  if (run.tx_depth > 0) argv.insert(argv.end(), {"-t", std::to_string(run.tx_depth)});
  return argv;
}

std::string why_failed(const Outcome& client, const Outcome& server, std::chrono::milliseconds timeout) {
  if (interrupted()) return "failed: interrupted";
  if (client.timed_out) return "failed: timed out after " + std::to_string(timeout.count() / 1000) + " s";
  if (client.exit_code == -1) return "failed: the perftest server did not listen within 30 s";
  if (client.exit_code != 0) return "failed: client exit status " + std::to_string(client.exit_code);
  if (server.exit_code != 0) return "failed: server exit status " + std::to_string(server.exit_code);
  return "failed: no report row";
}

void fill_figure(Figure* f, const std::vector<double>& row) {
  if (row.empty()) return;
  f->value = row[0];
  if (f->kind == "lat") {
    f->avg_us = row[1];
    f->p99_us = row[2];
  }
}

}  // namespace

std::vector<double> parse_perftest_row(const std::string& output, const std::string& kind) {
  std::istringstream in(output);
  bool header = false;
  for (std::string line; std::getline(in, line);) {
    if (line.find("#bytes") != std::string::npos) {
      header = true;
      continue;
    }
    if (!header) continue;
    // The shim's notes to the program ("simnic: QP ...: ... RNR NAK ...") go to stderr, which the
    // log shares: one may land between the header and its row when perftest's stdout flushes.
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || !std::isdigit(static_cast<unsigned char>(line[first]))) continue;
    header = false;
    std::istringstream ls(line);
    std::vector<double> v;
    for (std::string tok; ls >> tok;) {
      try {
        v.push_back(std::stod(tok));
      } catch (...) {
        break;
      }
    }
    // bw: bytes iterations peak average msgrate; lat: bytes iterations min max typical avg
    // stdev p99 p99.9. rate: a bw row's MsgRate, in millions of messages per second.
    if (kind == "bw" && v.size() >= 4) return {v[3] * kMiB};
    if (kind == "rate" && v.size() >= 5) return {v[4] * 1e6};
    if (kind == "lat" && v.size() >= 8) return {v[4], v[5], v[7]};
  }
  return {};
}

uint64_t nic_counter_sum(const std::string& dir, const std::string& key) {
  uint64_t sum = 0;
  for (const auto& name : list_nics(dir)) {
    std::string text;
    if (query_nic(dir, name, unsigned(abi::Op::Status), "", &text) != 0) continue;
    auto kv = parse_kv(text);
    if (kv.count(key)) sum += std::stoull(kv[key]);
  }
  return sum;
}

Figure run_perftest(const NicSet& nics, const PerftestRun& run) {
  Figure f;
  f.test = run.test;
  f.kind = run.kind;
  f.size = run.size;
  f.qps = run.qps;
  f.iterations = run.iterations;
  const uint64_t errors0 = nic_counter_sum(nics.dir, "completion_errors");
  const uint64_t retx0 = nic_counter_sum(nics.dir, "retransmits");
  const std::string base = nics.log_dir + "/" + run.test + "-" + std::to_string(run.size) + "-q" +
                           std::to_string(run.qps);
  const int port = free_tcp_port();
  pid_t server = spawn(perftest_argv(nics, run, port, "simnic0"), base + ".server.log");
  Outcome client, served;
  if (wait_for_listener(port, 30s)) {
    std::vector<std::string> argv = perftest_argv(nics, run, port, "simnic1");
    argv.push_back(nics.server_addr);
    client = run_logged(argv, base + ".client.log", nics.timeout);
  }
  // A server whose client failed may wait forever for it: bounded, then killed.
  served = wait_for(server, client.exit_code == 0 ? 30s : 2s);
  fill_figure(&f, parse_perftest_row(read_file(base + ".client.log"), run.kind));
  if (client.exit_code != 0 || served.exit_code != 0 || !std::isfinite(f.value))
    f.status = why_failed(client, served, nics.timeout);
  f.error_completions = nic_counter_sum(nics.dir, "completion_errors") - errors0;
  f.retransmits = nic_counter_sum(nics.dir, "retransmits") - retx0;
  return f;
}

}  // namespace simnic::cli::bench
