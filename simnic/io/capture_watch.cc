#include "simnic/io/capture_watch.h"

#include <fstream>
#include <sstream>

namespace simnic::io {

// One line per packet socket after a header (net/packet/af_packet.c, packet_seq_show):
//   sk RefCnt Type Proto Iface R Rmem User Inode
// Iface is the interface the socket is bound to (0: all of them), R whether it is running.
bool packet_sockets_watch(const std::string& text, int ifindex) {
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string sk, refcnt, type, proto;
    int iface = -1, running = 0;
    if (!(fields >> sk >> refcnt >> type >> proto >> iface >> running)) continue;
    if (running && (iface == 0 || iface == ifindex)) return true;
  }
  return false;
}

bool interface_captured(int ifindex) {
  std::ifstream in("/proc/net/packet");
  if (!in) return true;  // cannot tell: behave as if watched (one datagram per packet)
  std::stringstream text;
  text << in.rdbuf();
  return packet_sockets_watch(text.str(), ifindex);
}

}  // namespace simnic::io
