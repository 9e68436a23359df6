// Is someone capturing packets on an interface? (UdpPort's automatic GSO, docs/performance.md)
#pragma once

#include <string>

namespace simnic::io {

// True when /proc/net/packet (or `text`, its contents) lists a running packet socket bound to
// interface `ifindex` or to every interface (index 0): tcpdump, tshark, dumpcap and Wireshark
// open one for each capture. The file is per network namespace, as the capture is.
bool interface_captured(int ifindex);
bool packet_sockets_watch(const std::string& text, int ifindex);

}  // namespace simnic::io
