// simnicd: one simulated RoCEv2 NIC. Flags, then the event loop.
#include <arpa/inet.h>
#include <getopt.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "simnic/abi/lid_map.h"
#include "simnic/abi/paths.h"
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
    "  --paused         start in step mode: nothing moves until `simnic step NAME next`\n"
    "  --no-history     keep no recent events for viewers that attach later (tracing then costs\n"
    "                   nothing until a viewer attaches or --trace is given)\n"
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
    std::fprintf(stderr, "simnicd: %s's MTU of %u bytes cannot carry RoCE packets (the smallest, 256 bytes of "
                         "payload, needs %u)\n", itf->name.c_str(), itf->mtu, 256 + simnic::proto::kRoceV2MaxOverhead);
    return 2;
  }
  if (opt.device.mtu_bytes > fits) {
    if (mtu_given)
      std::fprintf(stderr, "simnicd: --mtu %u does not fit %s's MTU of %u bytes unfragmented: the port's MTU is %u\n",
                   opt.device.mtu_bytes, itf->name.c_str(), itf->mtu, fits);
    opt.device.mtu_bytes = fits;
  }
  opt.iface = itf->name;
  opt.link_mtu = itf->mtu;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  simnic::io::NicOptions opt;
  opt.dir = simnic::abi::simnic_dir();
  enum { kName = 256, kAddr, kPort, kMtu, kPcap, kDir, kLoss, kDup, kReorder, kDelay, kSeed, kVerbose, kHelp,
         kTrace, kPaused, kNoHistory, kLinkLayer, kLid, kSmLid, kLidMap, kGidTable };
  static const option kOptions[] = {
      {"name", required_argument, nullptr, kName},   {"addr", required_argument, nullptr, kAddr},
      {"port", required_argument, nullptr, kPort},   {"mtu", required_argument, nullptr, kMtu},
      {"pcap", required_argument, nullptr, kPcap},   {"dir", required_argument, nullptr, kDir},
      {"loss", required_argument, nullptr, kLoss},   {"dup", required_argument, nullptr, kDup},
      {"reorder", required_argument, nullptr, kReorder}, {"delay", required_argument, nullptr, kDelay},
      {"seed", required_argument, nullptr, kSeed},   {"verbose", no_argument, nullptr, kVerbose},
      {"help", no_argument, nullptr, kHelp},         {"trace", required_argument, nullptr, kTrace},
      {"paused", no_argument, nullptr, kPaused},         {"no-history", no_argument, nullptr, kNoHistory},
      {"link-layer", required_argument, nullptr, kLinkLayer}, {"lid", required_argument, nullptr, kLid},
      {"sm-lid", required_argument, nullptr, kSmLid},    {"lid-map", required_argument, nullptr, kLidMap},
      {"gid-table", required_argument, nullptr, kGidTable},
      {nullptr, 0, nullptr, 0}};
  int c;
  bool mtu_given = false;
  auto bad = [](const char* what, const char* v) {
    std::fprintf(stderr, "simnicd: bad %s '%s' (see simnicd --help)\n", what, v);
    return 2;
  };
  while ((c = getopt_long(argc, argv, "", kOptions, nullptr)) != -1) {
    switch (c) {
      case kName:
        if (!*optarg || std::strlen(optarg) > 60 || std::strchr(optarg, '/')) return bad("--name", optarg);
        opt.device.name = optarg;
        break;
      case kAddr: {
        in_addr a;
        if (inet_pton(AF_INET, optarg, &a) != 1) return bad("--addr", optarg);
        opt.device.ipv4 = ntohl(a.s_addr);
        break;
      }
      case kPort: {
        long v = std::strtol(optarg, nullptr, 10);
        if (v < 1 || v > 65535) return bad("--port", optarg);
        opt.device.udp_port = uint16_t(v);
        break;
      }
      case kMtu: {
        long v = std::strtol(optarg, nullptr, 10);
        if (v != 256 && v != 512 && v != 1024 && v != 2048 && v != 4096) return bad("--mtu", optarg);
        opt.device.mtu_bytes = uint32_t(v);
        mtu_given = true;
        break;
      }
      case kPcap: opt.pcap_path = optarg; break;
      case kTrace: opt.trace_path = optarg; break;
      case kPaused: opt.start_paused = true; break;
      case kNoHistory: opt.history = false; break;
      case kDir: opt.dir = optarg; break;
      case kLoss: if (!parse_prob(optarg, &opt.faults.loss)) return bad("--loss", optarg); break;
      case kDup: if (!parse_prob(optarg, &opt.faults.dup)) return bad("--dup", optarg); break;
      case kReorder: if (!parse_prob(optarg, &opt.faults.reorder)) return bad("--reorder", optarg); break;
      case kDelay: opt.faults.delay_us = uint32_t(std::strtoul(optarg, nullptr, 10)); break;
      case kSeed: opt.faults.seed = std::strtoull(optarg, nullptr, 10); break;
      case kVerbose: opt.verbose = true; break;
      case kLinkLayer:
        if (std::strcmp(optarg, "ib") && std::strcmp(optarg, "eth")) return bad("--link-layer", optarg);
        opt.device.infiniband = std::strcmp(optarg, "ib") == 0;
        break;
      case kLid:
      case kSmLid: {
        char* end;
        unsigned long v = std::strtoul(optarg, &end, 0);
        if (*end || !simnic::abi::is_unicast_lid(uint32_t(v))) return bad(c == kLid ? "--lid" : "--sm-lid", optarg);
        (c == kLid ? opt.device.lid : opt.device.sm_lid) = uint16_t(v);
        break;
      }
      case kLidMap: opt.lid_map = optarg; break;
      case kGidTable:
        if (!simnic::core::parse_gid_table_kind(optarg, &opt.device.gid_table)) return bad("--gid-table", optarg);
        break;
      case kHelp: std::fputs(kUsage, stdout); return 0;
      default: std::fputs(kUsage, stderr); return 2;
    }
  }
  if (optind < argc) return bad("argument", argv[optind]);
  if (opt.device.infiniband && !opt.device.lid) {
    std::fprintf(stderr, "simnicd: --link-layer ib needs --lid N (simnic up assigns LIDs)\n");
    return 2;
  }
  if (opt.device.infiniband && opt.device.gid_table != simnic::core::GidTableKind::kSimple) {
    std::fprintf(stderr, "simnicd: --gid-table is for RoCE ports; an InfiniBand port has one GID (fe80:: and its GUID)\n");
    return 2;
  }
  if (opt.device.infiniband && !opt.device.sm_lid) opt.device.sm_lid = opt.device.lid;
  if (int rc = fit_port_to_interface(opt, mtu_given)) return rc;

  simnic::io::NicServer server(opt);
  std::string error;
  if (int rc = server.start(&error)) {
    std::fprintf(stderr, "simnicd: %s\n", error.c_str());
    return rc;
  }
  char addr[INET_ADDRSTRLEN];
  in_addr a{htonl(opt.device.ipv4)};
  inet_ntop(AF_INET, &a, addr, sizeof addr);
  const std::string link = opt.device.infiniband ? "InfiniBand LID " + std::to_string(opt.device.lid)
                                                 : std::string("RoCE, GID table ") +
                                                       simnic::core::gid_table_kind_name(opt.device.gid_table);
  std::fprintf(stderr, "simnicd: %s ready on %s:%u (mtu %u; interface %s, MTU %u; %s; control %s)\n",
               opt.device.name.c_str(), addr, opt.device.udp_port, opt.device.mtu_bytes, opt.iface.c_str(), opt.link_mtu,
               link.c_str(),
               simnic::abi::control_socket_path(opt.dir, opt.device.name).c_str());
  server.run();
  std::fprintf(stderr, "simnicd: %s stopped\n", opt.device.name.c_str());
  return 0;
}
