// A classic pcap file of RoCEv2 frames (Ethernet + IPv4 + UDP + the packet), so a run can be
// opened in Wireshark or tshark. One writer per NIC, on the event loop thread; the file is an
// OutputFile (output_file.h): created exclusively, bounded, and cut only between records.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "simnic/io/output_file.h"
#include "simnic/proto/ipv4_udp.h"

namespace simnic::io {

class PcapWriter {
 public:
  ~PcapWriter() { close(); }
  bool open(const std::string& path, std::string* error) { return open(path, kDefaultOutputMaxBytes, nullptr, error); }
  bool open(const std::string& path, uint64_t max_bytes, core::Logger* log, std::string* error);
  void write(uint64_t unix_time_ns, const proto::IpUdpInfo& ip, std::span<const uint8_t> udp_payload);
  void flush();
  void close();
  bool is_open() const { return file_.is_open(); }
  const OutputFile& file() const { return file_; }

 private:
  OutputFile file_;
};

}  // namespace simnic::io
