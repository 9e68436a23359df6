// simnicd: one simulated RoCEv2 NIC. Flags, then the event loop.
#include <arpa/inet.h>
#include <net/if.h>
#include <sys/resource.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "simnic/abi/lid_map.h"
#include "simnic/abi/paths.h"
#include "simnic/io/exec_in_place.h"
#include "simnic/io/netif.h"
#include "simnic/io/nic_server.h"
#include "simnic/proto/ipv4_udp.h"

namespace {

const char kUsage[] =
    "usage: simnicd [options]\n"
    "A software RoCEv2 NIC: serves verbs to applications started with `simnic run` and talks\n"
    "to other simulated NICs over UDP port 4791.\n"
    "\n"
    "  --name NAME      device name (default simnic0)\n"
    "  --addr A.B.C.D   this NIC's IPv4 address (default 127.0.0.1): a loopback address such as\n"
    "                   127.0.0.2, or an address of one of this host's interfaces to talk to other\n"
    "                   hosts (docs/wire.md); its GID 0 is ::ffff:A.B.C.D\n"
    "  --port N         UDP port (default 4791, the RoCEv2 port)\n"
    "  --mtu BYTES      port MTU: 256, 512, 1024, 2048 or 4096 (default: the largest that fits the\n"
    "                   interface's MTU unfragmented, 4096 on loopback, 1024 on 1500-byte Ethernet)\n"
    "  --pcap FILE      write every packet sent and received to FILE (Ethernet/IPv4/UDP/RoCEv2)\n"
    "  --trace FILE     record trace events as JSON lines (docs/trace-format.md); events also\n"
    "                   stream live on <dir>/<name>.trace\n"
    "  --pcap-max-bytes N, --trace-max-bytes N\n"
    "                   stop writing that file, at its last whole record, before it grows past N\n"
    "                   bytes (a number, or with K, M or G: KiB, MiB, GiB; default 1G); what is\n"
    "                   not written is counted in simnic status (pcap_records_lost, trace_records_lost)\n"
    "  --trace-steps    trace the steps the completer and responder walk for each packet\n"
    "                   (engine_steps events, docs/trace-format.md; one more event per packet)\n"
    "  --paused         start in step mode: nothing moves until `simnic step NAME next`\n"
    "  --no-history     keep no recent events for viewers that attach later (tracing then costs\n"
    "                   nothing until a viewer attaches or --trace is given)\n"
    "  --gso            always send runs of same-sized packets to one peer as one UDP GSO send\n"
    "                   (a capture of lo then shows the sends, not the packets). Also SIMNIC_GSO=1\n"
    "  --no-gso         never: one datagram per packet. Also SIMNIC_GSO=0. The default: GSO on a\n"
    "                   loopback address while nobody captures lo, never on a real interface\n"
    "                   (docs/performance.md)\n"
    "  --busy-poll-us N after handling an event, keep looking for the next one for N microseconds\n"
    "                   before sleeping, and N more after each one found (0: sleep at once;\n"
    "                   default 0; docs/performance.md). Also SIMNIC_BUSY_POLL_US=N\n"
    "  --dir DIR        where the control socket lives (default $SIMNIC_DIR, else\n"
    "                   $XDG_RUNTIME_DIR/simnic, else /tmp/simnic-$UID)\n"
    "  --loss P         drop outgoing packets with probability P (0..1)\n"
    "  --dup P          duplicate outgoing packets with probability P\n"
    "  --reorder P      hold back outgoing packets with probability P, so later ones pass\n"
    "  --delay US       delay every outgoing packet by US microseconds\n"
    "  --seed N         seed for the fault injector (default 1)\n"
    "  --verbose        log every dropped packet and protocol detail\n"
    "  --link-layer L   eth (RoCE, the default) or ib: the port reports InfiniBand, a LID and\n"
    "                   an SM LID, and address vectors may name peers by DLID (docs/link-layer.md)\n"
    "  --lid N          ib: this port's LID (1..0xbfff; `simnic up` assigns them)\n"
    "  --sm-lid N       ib: the subnet manager's LID (default: the port's own)\n"
    "  --lid-map FILE   ib: the LID registry, \"LID ADDRESS [NAME]\" lines (default <dir>/lids)\n"
    "  --gid-table T    eth: simple (one IPv4-mapped RoCE v2 GID, the default), rxe or mlx5:\n"
    "                   the GID table those devices list for an IPv4 address\n"
    "  --next ...       the options of one more NIC, served by this process on the same event loop\n"
    "                   (`simnic up N --one-process`): a message between two NICs of one process\n"
    "                   wakes no other process (docs/performance.md). They stop and restart\n"
    "                   together\n"
    "  --help           this text\n";

bool parse_prob(const char* s, double* out) {
  char* end;
  double v = std::strtod(s, &end);
  if (*end || v < 0 || v > 1) return false;
  *out = v;
  return true;
}

// The port's MTU follows the link it sends on: the largest IB MTU whose packets fit the
// interface's MTU whole. Nothing is ever fragmented (the socket sets DF), so a larger one would
// lose every full-sized packet. Returns 0, or the exit code after saying why.
int fit_port_to_interface(simnic::io::NicOptions& opt, bool mtu_given) {
  std::string why;
  auto itf = simnic::io::interface_with_address(opt.device.ipv4, &why);
  if (!itf) {
    std::fprintf(stderr, "simnicd: --addr %s: %s\n", simnic::io::ipv4_string(opt.device.ipv4).c_str(), why.c_str());
    return 2;
  }
  const uint32_t fits = simnic::proto::roce_mtu_for_link_mtu(itf->mtu);
  if (fits == 0) {
    std::fprintf(stderr,
                 "simnicd: %s's MTU of %u bytes cannot carry RoCE packets (the smallest, 256 bytes of "
                 "payload, needs %u)\n",
                 itf->name.c_str(), itf->mtu, 256 + simnic::proto::kRoceV2MaxOverhead);
    return 2;
  }
  if (opt.device.mtu_bytes > fits) {
    if (mtu_given)
      std::fprintf(stderr, "simnicd: --mtu %u does not fit %s's MTU of %u bytes unfragmented: the port's MTU is %u\n",
                   opt.device.mtu_bytes, itf->name.c_str(), itf->mtu, fits);
    opt.device.mtu_bytes = fits;
  }
  opt.iface = itf->name;
  opt.device.netdev_ifindex = ::if_nametoindex(itf->name.c_str());
  opt.link_mtu = itf->mtu;
  return 0;
}

// The flags as typed: CLI11 collects them, to_nic_options checks each as simnicd always has
// (strtol-style numbers, the same "bad --flag" message and exit code 2).
struct Flags {
  std::optional<std::string> name, addr, port, mtu, loss, dup, reorder, delay, seed, link_layer, lid, sm_lid, gid_table;
  std::optional<std::string> pcap, trace, dir, lid_map, busy_poll_us, udp_fd;
  std::optional<std::string> pcap_max_bytes, trace_max_bytes;
  bool paused = false, no_history = false, trace_steps = false, verbose = false, help = false, gso = false,
       no_gso = false;
  std::vector<std::string> extras;
};

int bad(const char* what, const std::string& v) {
  std::fprintf(stderr, "simnicd: bad %s '%s' (see simnicd --help)\n", what, v.c_str());
  return 2;
}

// Fills *flags from the command line. Returns -1 to go on, or the exit code (--help: 0).
int parse_command_line(int argc, char** argv, Flags* f) {
  CLI::App app("simnicd");
  app.set_help_flag();  // ours prints kUsage
  app.allow_extras();
  using Valued = std::pair<const char*, std::optional<std::string>*>;
  for (auto [flag, value] : std::initializer_list<Valued>{{"--name", &f->name},
                                                          {"--addr", &f->addr},
                                                          {"--port", &f->port},
                                                          {"--mtu", &f->mtu},
                                                          {"--pcap", &f->pcap},
                                                          {"--trace", &f->trace},
                                                          {"--dir", &f->dir},
                                                          {"--loss", &f->loss},
                                                          {"--dup", &f->dup},
                                                          {"--reorder", &f->reorder},
                                                          {"--delay", &f->delay},
                                                          {"--seed", &f->seed},
                                                          {"--link-layer", &f->link_layer},
                                                          {"--lid", &f->lid},
                                                          {"--sm-lid", &f->sm_lid},
                                                          {"--lid-map", &f->lid_map},
                                                          {"--gid-table", &f->gid_table},
                                                          {"--busy-poll-us", &f->busy_poll_us},
                                                          {"--pcap-max-bytes", &f->pcap_max_bytes},
                                                          {"--trace-max-bytes", &f->trace_max_bytes},
                                                          {"--udp-fd", &f->udp_fd}})
    app.add_option(flag, *value);
  app.add_flag("--paused", f->paused);
  app.add_flag("--no-history", f->no_history);
  app.add_flag("--trace-steps", f->trace_steps);
  app.add_flag("--gso", f->gso);
  app.add_flag("--no-gso", f->no_gso);
  app.add_flag("--verbose", f->verbose);
  app.add_flag("--help", f->help);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "simnicd: %s\n%s", e.what(), kUsage);
    return 2;
  }
  f->extras = app.remaining();
  if (f->help) return std::fputs(kUsage, stdout), 0;
  if (!f->extras.empty()) return bad("argument", f->extras.front());
  return -1;
}

bool parse_port(const std::string& s, uint16_t* port) {
  long v = std::strtol(s.c_str(), nullptr, 10);
  if (v < 1 || v > 65535) return false;
  *port = uint16_t(v);
  return true;
}

bool parse_mtu(const std::string& s, uint32_t* mtu) {
  long v = std::strtol(s.c_str(), nullptr, 10);
  if (v != 256 && v != 512 && v != 1024 && v != 2048 && v != 4096) return false;
  *mtu = uint32_t(v);
  return true;
}

bool parse_lid(const std::string& s, uint16_t* lid) {
  char* end;
  unsigned long v = std::strtoul(s.c_str(), &end, 0);
  if (*end || !simnic::abi::is_unicast_lid(uint32_t(v))) return false;
  *lid = uint16_t(v);
  return true;
}

// The NIC's identity and port: name, address, UDP port, MTU, link layer. 0, or the exit code.
int to_port_options(const Flags& f, simnic::io::NicOptions& opt) {
  auto& d = opt.device;
  if (f.name) {
    if (f.name->empty() || f.name->size() > 60 || f.name->find('/') != std::string::npos) return bad("--name", *f.name);
    d.name = *f.name;
  }
  in_addr a;
  if (f.addr && inet_pton(AF_INET, f.addr->c_str(), &a) != 1) return bad("--addr", *f.addr);
  if (f.addr) d.ipv4 = ntohl(a.s_addr);
  if (f.port && !parse_port(*f.port, &d.udp_port)) return bad("--port", *f.port);
  // --udp-fd N: internal, from a restart in place (`simnic restart`): the NIC's bound socket.
  if (f.udp_fd) {
    char* end = nullptr;
    long fd = std::strtol(f.udp_fd->c_str(), &end, 10);
    if (end == f.udp_fd->c_str() || *end || fd < 3 || fd > 65535) return bad("--udp-fd", *f.udp_fd);
    opt.udp_fd = int(fd);
  }
  if (f.mtu && !parse_mtu(*f.mtu, &d.mtu_bytes)) return bad("--mtu", *f.mtu);
  if (f.link_layer && *f.link_layer != "ib" && *f.link_layer != "eth") return bad("--link-layer", *f.link_layer);
  if (f.link_layer) d.infiniband = *f.link_layer == "ib";
  if (f.lid && !parse_lid(*f.lid, &d.lid)) return bad("--lid", *f.lid);
  if (f.sm_lid && !parse_lid(*f.sm_lid, &d.sm_lid)) return bad("--sm-lid", *f.sm_lid);
  if (f.gid_table && !simnic::core::parse_gid_table_kind(f.gid_table->c_str(), &d.gid_table))
    return bad("--gid-table", *f.gid_table);
  return 0;
}

// At most a second: a longer window is a NIC that never sleeps.
bool parse_busy_poll(const std::string& s, uint32_t* us) {
  char* end;
  unsigned long v = std::strtoul(s.c_str(), &end, 10);
  if (s.empty() || *end || s[0] == '-' || v > 1'000'000) return false;
  *us = uint32_t(v);
  return true;
}

// A size: digits, then optionally K, M or G (KiB, MiB, GiB). At least 1 byte, at most 1 TiB.
bool parse_size(const std::string& s, uint64_t* bytes) {
  char* end;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0])) || end == s.c_str()) return false;
  const std::string unit = end;
  const int shift = unit.empty() ? 0 : unit == "K" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : -1;
  if (shift < 0 || v == 0 || v > (1ull << 40) >> shift) return false;
  *bytes = uint64_t(v) << shift;
  return true;
}

// Where the pcap and trace files go and how large each may grow. 0, or the exit code.
int to_output_options(const Flags& f, simnic::io::NicOptions& opt) {
  if (f.pcap) opt.pcap_path = *f.pcap;
  if (f.trace) opt.trace_path = *f.trace;
  if (f.pcap_max_bytes && !parse_size(*f.pcap_max_bytes, &opt.pcap_max_bytes))
    return bad("--pcap-max-bytes", *f.pcap_max_bytes);
  if (f.trace_max_bytes && !parse_size(*f.trace_max_bytes, &opt.trace_max_bytes))
    return bad("--trace-max-bytes", *f.trace_max_bytes);
  return 0;
}

// Faults, outputs and modes. 0, or the exit code.
int to_run_options(const Flags& f, simnic::io::NicOptions& opt) {
  if (f.loss && !parse_prob(f.loss->c_str(), &opt.faults.loss)) return bad("--loss", *f.loss);
  if (f.dup && !parse_prob(f.dup->c_str(), &opt.faults.dup)) return bad("--dup", *f.dup);
  if (f.reorder && !parse_prob(f.reorder->c_str(), &opt.faults.reorder)) return bad("--reorder", *f.reorder);
  if (f.delay) opt.faults.delay_us = uint32_t(std::strtoul(f.delay->c_str(), nullptr, 10));
  if (f.seed) opt.faults.seed = std::strtoull(f.seed->c_str(), nullptr, 10);
  if (int rc = to_output_options(f, opt)) return rc;
  if (f.dir) opt.dir = *f.dir;
  if (f.lid_map) opt.lid_map = *f.lid_map;
  opt.start_paused = f.paused;
  opt.history = !f.no_history;
  opt.trace_steps = f.trace_steps;
  if (f.gso || f.no_gso) opt.gso = f.gso ? 1 : 0;  // else SIMNIC_GSO, else automatic (UdpPort)
  // The flag, else SIMNIC_BUSY_POLL_US from the environment (as SIMNIC_GSO: for runs started by
  // tools that do not pass flags through), else the default.
  const char* env_busy = std::getenv("SIMNIC_BUSY_POLL_US");
  const std::optional<std::string> busy = f.busy_poll_us ? f.busy_poll_us
                                          : env_busy     ? std::optional<std::string>(env_busy)
                                                         : std::nullopt;
  if (busy && !parse_busy_poll(*busy, &opt.busy_poll_us)) return bad("--busy-poll-us", *busy);
  opt.verbose = f.verbose;
  // Window tuning for benchmarks (docs/congestion.md): bytes per QP, and per peer NIC.
  if (const char* w = std::getenv("SIMNIC_QP_WINDOW_BYTES"))
    opt.device.window_bytes = uint32_t(std::strtoul(w, nullptr, 10));
  if (const char* w = std::getenv("SIMNIC_PEER_WINDOW_BYTES"))
    opt.device.peer_window_bytes = std::strtoull(w, nullptr, 10);
  return 0;
}

// What one flag cannot say alone about InfiniBand mode. 0, or the exit code.
int check_link_layer(simnic::io::NicOptions& opt) {
  if (opt.device.infiniband && !opt.device.lid) {
    std::fprintf(stderr, "simnicd: --link-layer ib needs --lid N (simnic up assigns LIDs)\n");
    return 2;
  }
  if (opt.device.infiniband && opt.device.gid_table != simnic::core::GidTableKind::kSimple) {
    std::fprintf(stderr,
                 "simnicd: --gid-table is for RoCE ports; an InfiniBand port has one GID (fe80:: and its GUID)\n");
    return 2;
  }
  if (opt.device.infiniband && !opt.device.sm_lid) opt.device.sm_lid = opt.device.lid;
  return 0;
}

void say_ready(const simnic::io::NicOptions& opt) {
  const std::string link = opt.device.infiniband ? "InfiniBand LID " + std::to_string(opt.device.lid)
                                                 : std::string("RoCE, GID table ") +
                                                       simnic::core::gid_table_kind_name(opt.device.gid_table);
  std::fprintf(stderr, "simnicd: %s ready on %s:%u (mtu %u; interface %s, MTU %u; %s; control %s)\n",
               opt.device.name.c_str(), simnic::io::ipv4_string(opt.device.ipv4).c_str(), opt.device.udp_port,
               opt.device.mtu_bytes, opt.iface.c_str(), opt.link_mtu, link.c_str(),
               simnic::abi::control_socket_path(opt.dir, opt.device.name).c_str());
}

// Every context holds a few of simnicd's descriptors, and at the usual soft limit of 1,024,
// 1,007 connections once left none for anyone else (issue 29). The soft limit is raised to
// the hard one, as servers do (the kernel caps RLIM_INFINITY at fs.nr_open); each user's
// share of it is SessionShares (control_listener.h).
void raise_descriptor_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= r.rlim_max) return;
  rlim_t want = r.rlim_max;
  if (want == RLIM_INFINITY) {
    want = 1 << 20;  // the kernel's default fs.nr_open
    if (std::FILE* f = std::fopen("/proc/sys/fs/nr_open", "r")) {
      unsigned long long nr_open = 0;
      if (std::fscanf(f, "%llu", &nr_open) == 1 && nr_open > 0) want = rlim_t(nr_open);
      std::fclose(f);
    }
  }
  const rlim_t had = r.rlim_cur;
  r.rlim_cur = want;
  if (::setrlimit(RLIMIT_NOFILE, &r) != 0)
    std::fprintf(stderr, "simnicd: cannot raise the descriptor limit to %llu: %s (keeping %llu)\n",
                 static_cast<unsigned long long>(want), std::strerror(errno), static_cast<unsigned long long>(had));
}

int run_nic(const simnic::io::NicOptions& opt) {
  raise_descriptor_limit();
  boost::asio::io_context io;
  simnic::io::NicServer server(opt, io);
  std::string error;
  if (int rc = server.start(&error)) {
    std::fprintf(stderr, "simnicd: %s\n", error.c_str());
    return rc;
  }
  say_ready(opt);
  server.run();
  std::fprintf(stderr, "simnicd: %s stopped\n", opt.device.name.c_str());
  return 0;
}

// Several NICs on one loop, one thread (--next): a packet one sends to another is read on the
// same loop's next turn instead of waking a second process. The loop ends with the last NIC;
// `simnic restart` of any restarts them all, each keeping its UDP socket.
int run_nics(const std::vector<simnic::io::NicOptions>& opts) {
  raise_descriptor_limit();
  boost::asio::io_context io;
  size_t running = opts.size();
  std::vector<std::unique_ptr<simnic::io::NicServer>> servers;
  auto restart_all = [&servers] {
    std::vector<int> fds;
    for (auto& s : servers) fds.push_back(s->prepare_restart());
    const int error = simnic::io::exec_in_place(fds);
    for (auto& s : servers) s->restart_failed(error);
  };
  for (const auto& opt : opts) {
    auto stopped = [&io, &running, name = opt.device.name] {
      std::fprintf(stderr, "simnicd: %s stopped\n", name.c_str());
      if (--running == 0) io.stop();
    };
    servers.push_back(
        std::make_unique<simnic::io::NicServer>(opt, io, simnic::io::NicServer::ProcessHooks{stopped, restart_all}));
    std::string error;
    if (int rc = servers.back()->start(&error)) {
      std::fprintf(stderr, "simnicd: %s: %s\n", opt.device.name.c_str(), error.c_str());
      return rc;
    }
    say_ready(opt);
  }
  servers.front()->run();  // the shared loop, with the first NIC's busy poll if it has one
  return 0;
}

// One NIC's options from its part of the command line. Returns 0, or the exit code.
int nic_options(std::vector<char*> argv, simnic::io::NicOptions* opt) {
  Flags flags;
  if (int rc = parse_command_line(int(argv.size()), argv.data(), &flags); rc >= 0) return rc ? rc : -1;
  opt->dir = simnic::abi::simnic_dir();
  if (int rc = to_port_options(flags, *opt)) return rc;
  if (int rc = to_run_options(flags, *opt)) return rc;
  if (int rc = check_link_layer(*opt)) return rc;
  return fit_port_to_interface(*opt, flags.mtu.has_value());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<simnic::io::NicOptions> opts(1);
  std::vector<char*> part{argv[0]};
  for (int i = 1; i <= argc; ++i) {
    if (i < argc && std::strcmp(argv[i], "--next") != 0) {
      part.push_back(argv[i]);
      continue;
    }
    if (int rc = nic_options(part, &opts.back())) return rc < 0 ? 0 : rc;  // -1: --help
    if (i < argc) opts.emplace_back(), part = {argv[0]};
  }
  if (opts.size() == 1) return run_nic(opts.front());
  return run_nics(opts);
}
