// A classic pcap file of RoCEv2 frames (Ethernet + IPv4 + UDP + the packet), so a run can be
// opened in Wireshark or tshark. Plain stdio: one writer per NIC, on the event loop thread.
#pragma once
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

#include "simnic/proto/ipv4_udp.h"

namespace simnic::io {

class PcapWriter {
 public:
  ~PcapWriter() { close(); }
  bool open(const std::string& path, std::string* error);
  void write(uint64_t unix_time_ns, const proto::IpUdpInfo& ip, std::span<const uint8_t> udp_payload);
  void flush();
  void close();
  bool is_open() const { return file_ != nullptr; }

 private:
  std::FILE* file_ = nullptr;
};

}  // namespace simnic::io
