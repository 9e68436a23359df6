#include "simnic/io/pcap_writer.h"

#include <cerrno>
#include <cstring>

#include "simnic/io/output_file.h"

namespace simnic::io {

namespace {

constexpr uint32_t kPcapMagic = 0xa1b2c3d4;  // microsecond timestamps
constexpr uint32_t kLinkTypeEthernet = 1;
constexpr uint32_t kSnapLen = 65535;

// A locally administered MAC per IPv4 address: 02:00:a:b:c:d.
void mac_for(uint32_t ip, uint8_t* mac) {
  mac[0] = 0x02;
  mac[1] = 0x00;
  mac[2] = uint8_t(ip >> 24);
  mac[3] = uint8_t(ip >> 16);
  mac[4] = uint8_t(ip >> 8);
  mac[5] = uint8_t(ip);
}

}  // namespace

bool PcapWriter::open(const std::string& path, std::string* error) {
  file_ = open_output_file(path, "pcap", error);
  if (!file_) return false;
  struct {
    uint32_t magic;
    uint16_t major, minor;
    int32_t zone;
    uint32_t sigfigs, snaplen, linktype;
  } hdr{kPcapMagic, 2, 4, 0, 0, kSnapLen, kLinkTypeEthernet};
  std::fwrite(&hdr, sizeof hdr, 1, file_);
  std::fflush(file_);
  return true;
}

void PcapWriter::write(uint64_t unix_time_ns, const proto::IpUdpInfo& ip, std::span<const uint8_t> udp_payload) {
  if (!file_) return;
  uint8_t eth[14];
  mac_for(ip.dst_ip, eth);
  mac_for(ip.src_ip, eth + 6);
  eth[12] = 0x08;  // IPv4
  eth[13] = 0x00;
  uint8_t ipudp[proto::kIpv4UdpBytes];
  proto::build_ipv4_udp(ip, udp_payload.size(), ipudp);
  uint32_t len = uint32_t(sizeof eth + sizeof ipudp + udp_payload.size());
  struct {
    uint32_t sec, usec, caplen, len;
  } rec{uint32_t(unix_time_ns / 1000000000), uint32_t(unix_time_ns % 1000000000 / 1000), len, len};
  std::fwrite(&rec, sizeof rec, 1, file_);
  std::fwrite(eth, sizeof eth, 1, file_);
  std::fwrite(ipudp, sizeof ipudp, 1, file_);
  std::fwrite(udp_payload.data(), 1, udp_payload.size(), file_);
}

void PcapWriter::flush() {
  if (file_) std::fflush(file_);
}

void PcapWriter::close() {
  if (file_) {
    std::fclose(file_);
    file_ = nullptr;
  }
}

}  // namespace simnic::io
