// The receiving ends of the peer NICs on this host, as the kernel lists them in /proc/net/udp
// (issue 26): a datagram sent over loopback to a bound socket is either in that socket's queue
// or counted in its drops, so an ACK timer can tell a packet that waits from one that was lost
// (simnic/core/engines/completer_timers.cc). Any user may read the table; it lists this network
// namespace's sockets, so a peer in another namespace or on another host is "not local".
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "simnic/core/env.h"

namespace simnic::io {

// One socket of a /proc/net/udp listing (addresses in host byte order).
struct UdpSocketLine {
  uint32_t ip = 0;
  uint16_t port = 0;
  uint64_t queued = 0;  // rx_queue: bytes waiting in its receive queue
  uint64_t inode = 0;
  uint64_t drops = 0;
};

// The socket one line describes; false for the header line or a malformed one.
bool parse_proc_net_udp_line(const std::string& line, UdpSocketLine* out);

class PeerSockets {
 public:
  explicit PeerSockets(std::string path = "/proc/net/udp") : path_(std::move(path)) {}
  // The socket bound to ip:port (or to the wildcard address on that port), from the table as
  // read at the first call since forget(): thousands of QPs timing out together read it once.
  core::PacketSink::PeerEnd find(uint32_t ip, uint16_t port);
  // The next find() reads the table again (simnicd: at each timer event).
  void forget() { fresh_ = false; }
  uint64_t reads() const { return reads_; }

 private:
  void read_table();
  std::string path_;
  std::vector<UdpSocketLine> table_;
  std::set<uint64_t> seen_;  // ip:port of every peer socket ever found: one that goes is gone
  bool fresh_ = false;
  bool readable_ = true;
  uint64_t reads_ = 0;
};

}  // namespace simnic::io
