#include "simnic/io/pcap_writer.h"

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

template <class T>
std::span<const uint8_t> bytes_of(const T& t) {
  return {reinterpret_cast<const uint8_t*>(&t), sizeof t};
}

}  // namespace

bool PcapWriter::open(const std::string& path, uint64_t max_bytes, core::Logger* log, std::string* error) {
  if (!file_.open(path, "pcap", max_bytes, log, error)) return false;
  struct {
    uint32_t magic;
    uint16_t major, minor;
    int32_t zone;
    uint32_t sigfigs, snaplen, linktype;
  } hdr{kPcapMagic, 2, 4, 0, 0, kSnapLen, kLinkTypeEthernet};
  file_.append({bytes_of(hdr)});
  file_.flush();  // a valid (empty) capture from the start
  return true;
}

void PcapWriter::write(uint64_t unix_time_ns, const proto::IpUdpInfo& ip, std::span<const uint8_t> udp_payload) {
  if (!file_.is_open()) return;
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
  // One record: written whole or, past the size limit or on a full disk, not at all.
  file_.append({bytes_of(rec), std::span<const uint8_t>(eth), std::span<const uint8_t>(ipudp), udp_payload});
}

void PcapWriter::flush() { file_.flush(); }

void PcapWriter::close() { file_.close(); }

}  // namespace simnic::io
