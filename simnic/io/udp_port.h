// The NIC's Ethernet port: a UDP socket on <addr>:4791. Receives in batches (recvmmsg) and
// sends through the fault injector, with every packet sent and received written to pcap.
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <sys/socket.h>
#include <vector>

#include "simnic/core/env.h"
#include "simnic/core/fault_injector.h"
#include "simnic/io/pcap_writer.h"

namespace simnic::io {

class UdpPort final : public core::PacketSink {
 public:
  // `dst_ip` is the port's own address, or the multicast group a datagram was sent to.
  using PacketHandler =
      std::function<void(uint32_t src_ip, uint16_t src_port, std::span<const uint8_t>, uint32_t dst_ip)>;

  UdpPort(boost::asio::io_context& io, uint32_t ip, uint16_t port);
  ~UdpPort() override;

  // Binds <ip>:<port>. On failure says why in *error.
  bool open(std::string* error);
  // Starts receiving; `on_batch_done` runs after each batch (the NIC then does pending work).
  void start(PacketHandler on_packet, std::function<void()> on_batch_done);
  void close();

  core::SendOutcome send(uint32_t dst_ip, uint16_t dst_port, std::span<const uint8_t> udp_payload) override;
  // IP multicast: one more socket per group, bound to <group>:<port>, member on our interface.
  int join_group(uint32_t group_ip) override;
  void leave_group(uint32_t group_ip) override;

  void set_pcap(PcapWriter* pcap) { pcap_ = pcap; }
  core::FaultInjector& faults() { return faults_; }
  uint64_t tx_dropped() const { return tx_dropped_; }
  // Of those, datagrams larger than the interface MTU (EMSGSIZE: DF is set, so the kernel never
  // fragments; the port's MTU is chosen to fit, so only a link MTU lowered since start does it).
  uint64_t tx_too_big() const { return tx_too_big_; }
  uint64_t fault_drops() const { return fault_drops_; }
  uint64_t fault_dups() const { return fault_dups_; }
  uint64_t fault_delayed() const { return fault_delayed_; }
  // Datagrams the kernel dropped for want of receive-buffer space (SO_RXQ_OVFL).
  uint64_t rx_overflow_drops() const { return rx_overflow_; }

 private:
  struct Delayed {
    uint64_t due_ns;
    uint32_t dst_ip;
    uint16_t dst_port;
    std::vector<uint8_t> bytes;
  };
  // `keep` holds a group socket alive while a wait on it is pending (leave_group drops it).
  void wait_readable(boost::asio::ip::udp::socket& socket, uint32_t dst_ip,
                     std::shared_ptr<boost::asio::ip::udp::socket> keep = nullptr);
  void drain(boost::asio::ip::udp::socket& socket, uint32_t dst_ip);
  void note_overflow(const msghdr& msg);
  void transmit(uint32_t dst_ip, uint16_t dst_port, std::span<const uint8_t> bytes);
  void schedule_delayed();

  boost::asio::ip::udp::socket socket_;
  std::map<uint32_t, std::shared_ptr<boost::asio::ip::udp::socket>> groups_;  // joined, by group
  boost::asio::steady_timer delay_timer_;
  uint32_t ip_;
  uint16_t port_;
  PacketHandler on_packet_;
  std::function<void()> on_batch_done_;
  PcapWriter* pcap_ = nullptr;
  core::FaultInjector faults_;
  std::deque<Delayed> delayed_;  // ordered by due time
  uint64_t tx_dropped_ = 0, tx_too_big_ = 0, fault_drops_ = 0, fault_dups_ = 0, fault_delayed_ = 0;
  uint64_t rx_overflow_ = 0;
};

uint64_t monotonic_ns();
uint64_t realtime_ns();

}  // namespace simnic::io
