#include "simnic/io/peer_sockets.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>

namespace simnic::io {

// "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout
//  inode ref pointer drops", e.g.
// " 8728: 0163FE7F:12B7 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0
//  2838871 2 000000006af2b6c7 0". The address is the kernel's __be32 printed as a native word.
bool parse_proc_net_udp_line(const std::string& line, UdpSocketLine* out) {
  unsigned sl, addr, port, rem_addr, rem_port, state, timer, retr;
  unsigned long tx, rx, when, uid, timeout;
  unsigned long long inode, drops;
  int ref;
  char pointer[32];
  const int n = std::sscanf(line.c_str(), " %u: %8X:%4X %8X:%4X %2X %8lX:%8lX %2X:%8lX %8X %lu %lu %llu %d %31s %llu",
                            &sl, &addr, &port, &rem_addr, &rem_port, &state, &tx, &rx, &timer, &when, &retr, &uid,
                            &timeout, &inode, &ref, pointer, &drops);
  if (n != 17) return false;
  *out = UdpSocketLine{ntohl(addr), uint16_t(port), rx, inode, drops};
  return true;
}

void PeerSockets::read_table() {
  fresh_ = true;
  table_.clear();
  if (!readable_) return;
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    readable_ = false;  // no /proc: every peer is "not local", as on another host
    return;
  }
  ++reads_;
  std::string text;
  char buf[16384];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
  ::close(fd);
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    UdpSocketLine s;
    if (parse_proc_net_udp_line(text.substr(start, end - start), &s)) table_.push_back(s);
  }
}

core::PacketSink::PeerEnd PeerSockets::find(uint32_t ip, uint16_t port) {
  if (!fresh_) read_table();
  const UdpSocketLine* match = nullptr;
  for (const UdpSocketLine& s : table_) {
    if (s.port != port || (s.ip != ip && s.ip != 0)) continue;
    match = &s;
    if (s.ip == ip) break;  // an exact address beats the wildcard
  }
  const uint64_t key = uint64_t(ip) << 16 | port;
  core::PacketSink::PeerEnd end;
  if (!match) {
    end.local = seen_.count(key) != 0 || (readable_ && (ip >> 24) == 127);  // loopback is here
    return end;
  }
  seen_.insert(key);
  end.local = end.open = true;
  end.socket = match->inode;
  end.drops = match->drops;
  end.queued = match->queued;
  return end;
}

}  // namespace simnic::io
