// The NIC's Ethernet port: a UDP socket on <addr>:4791. Receives in batches (recvmmsg) and
// sends through the fault injector, with every packet sent and received written to pcap.
#pragma once
#include <sys/socket.h>
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
#include <vector>

#include "simnic/core/env.h"
#include "simnic/core/wire/fault_injector.h"
#include "simnic/io/pcap_writer.h"
#include "simnic/io/peer_process.h"
#include "simnic/io/peer_sockets.h"

namespace simnic::io {

class UdpPort final : public core::PacketSink {
 public:
  // `dst_ip` is the port's own address, or the multicast group a datagram was sent to; `tos`
  // the datagram's IPv4 TOS byte (IP_RECVTOS), which carries RoCEv2's GRH traffic class.
  using PacketHandler =
      std::function<void(uint32_t src_ip, uint16_t src_port, std::span<const uint8_t>, uint32_t dst_ip, uint8_t tos)>;

  UdpPort(boost::asio::io_context& io, uint32_t ip, uint16_t port);
  ~UdpPort() override;

  // Binds <ip>:<port>. On failure says why in *error.
  bool open(std::string* error);
  // Makes open() take `fd`, a UDP socket already bound to <ip>:<port> (simnicd restarting in
  // place keeps its address: `simnic restart`), instead of binding a new one.
  void adopt(int fd) { inherited_fd_ = fd; }
  int native_fd() { return socket_.is_open() ? socket_.native_handle() : -1; }
  // Starts receiving; `on_batch_done` runs after each batch (the NIC then does pending work).
  void start(PacketHandler on_packet, std::function<void()> on_batch_done);
  // Reads what the NIC's socket holds now (a readable wake-up's worth), before the transport
  // timer judges: ACKs that arrived while the NIC was not running are not lost.
  void read_queued() {
    if (socket_.is_open() && on_packet_) drain(socket_, ip_);
  }
  void close();

  core::SendOutcome send(uint32_t dst_ip, uint16_t dst_port, std::span<const uint8_t> udp_payload) override;
  // A TOS other than the socket's 0 goes as an IP_TOS control message of that datagram's send.
  core::SendOutcome send_with_tos(uint32_t dst_ip, uint16_t dst_port, std::span<const uint8_t> udp_payload,
                                  uint8_t tos) override;
  // IP multicast: one more socket per group, bound to <group>:<port>, member on our interface.
  int join_group(uint32_t group_ip) override;
  void leave_group(uint32_t group_ip) override;
  // A peer NIC's socket on this host (peer_sockets.h), its drops counted with this port's own
  // (datagrams the kernel would not send): either way a packet that did not reach the peer.
  PeerEnd peer_end(uint32_t dst_ip, uint16_t dst_port) override;
  bool holds_unread() override;
  // No fault to inject and no pcap file: a program's own packet would leave as the NIC's would.
  bool takes_direct_sends() const override { return socket_.is_open() && !faults_.active() && !pcap_; }
  void send_queued() override { flush(); }

  void set_pcap(PcapWriter* pcap) { pcap_ = pcap; }
  // UDP GSO: a run of same-sized datagrams to one peer leaves in one send (docs/performance.md).
  // A capture of loopback then shows the send, not the packets the kernel would cut from it on a
  // real interface. kAuto (the default): GSO on a loopback address while no packet capture runs
  // on lo (capture_watch.h, looked at again before a run is sent if 20 ms have passed), never
  // on a real interface; kOn: always (`--gso`); kOff: never (`--no-gso`).
  enum class GsoMode { kOff, kOn, kAuto };
  void set_gso_mode(GsoMode mode) { gso_mode_ = mode; }  // before open()
  GsoMode gso_mode() const { return gso_mode_; }
  bool gso() const { return gso_; }  // in use now
  // Times kAuto found a capture on lo and went back to one datagram per packet.
  uint64_t gso_capture_seen() const { return gso_capture_seen_; }
  // Sends what this turn of the event loop queued (also done by itself at the end of the turn).
  void flush();
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
  // The receive buffer the kernel gave the socket (getsockopt SO_RCVBUF: twice what was asked,
  // the kernel's allowance for its bookkeeping), and whether SO_RCVBUFFORCE (root) got past
  // net.core.rmem_max.
  uint64_t receive_buffer_bytes() const { return rcvbuf_bytes_; }
  bool receive_buffer_forced() const { return rcvbuf_forced_; }
  // System calls that sent (sendmmsg), GSO sends among the messages, received GRO buffers that
  // held more than one datagram: what batching bought (docs/performance.md).
  uint64_t tx_send_calls() const { return tx_send_calls_; }
  uint64_t tx_gso_sends() const { return tx_gso_sends_; }
  uint64_t rx_gro_buffers() const { return rx_gro_buffers_; }

 private:
  int inherited_fd_ = -1;
  struct Delayed {
    uint64_t due_ns;
    uint32_t dst_ip;
    uint16_t dst_port;
    std::vector<uint8_t> bytes;
    uint8_t tos;
  };
  // `keep` holds a group socket alive while a wait on it is pending (leave_group drops it).
  void wait_readable(boost::asio::ip::udp::socket& socket, uint32_t dst_ip,
                     std::shared_ptr<boost::asio::ip::udp::socket> keep = nullptr);
  void drain(boost::asio::ip::udp::socket& socket, uint32_t dst_ip);
  // What a received buffer's control messages say: its datagrams' size and their IPv4 TOS.
  struct Received {
    size_t segment;
    uint8_t tos;
  };
  Received read_control(const msghdr& msg);
  // Queues a datagram; the queue leaves in batches (sendmmsg, GSO) at the end of the turn.
  void transmit(uint32_t dst_ip, uint16_t dst_port, std::span<const uint8_t> bytes, uint8_t tos);
  struct Queued {
    uint32_t dst_ip;
    uint16_t dst_port;
    uint32_t offset, len;  // in tx_bytes_
    uint8_t tos;           // IPv4 TOS; a GSO run never mixes two
  };
  // How many queued datagrams from `first` leave as one GSO send.
  size_t gso_run(size_t first) const;
  void use_gso(bool on);
  void follow_captures();
  // Sets the ICRC of the k-th datagram of a GSO run for the Identification the kernel gives it.
  void renumber_segment(const Queued& q, uint16_t k);
  void write_pcap(const Queued& q, uint16_t ip_id);
  void count_send_error(int err, size_t datagrams);
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
  PeerSockets peer_sockets_;
  PeerProcesses peer_processes_;
  uint64_t peer_table_read_ns_ = 0, tx_datagrams_ = 0, datagrams_at_peer_table_ = 0;
  std::deque<Delayed> delayed_;   // ordered by due time
  std::vector<Queued> tx_queue_;  // this turn's datagrams, in order
  std::vector<uint8_t> tx_bytes_;
  bool flush_posted_ = false;
  uint64_t tx_send_calls_ = 0, tx_gso_sends_ = 0, rx_gro_buffers_ = 0;
  bool gso_ = false;
  GsoMode gso_mode_ = GsoMode::kAuto;
  int watched_ifindex_ = 0;  // kAuto on a loopback address: lo's index; 0 otherwise
  uint64_t capture_checked_ns_ = 0, gso_capture_seen_ = 0;
  uint64_t tx_dropped_ = 0, tx_too_big_ = 0, fault_drops_ = 0, fault_dups_ = 0, fault_delayed_ = 0;
  uint64_t rx_overflow_ = 0;
  uint64_t rcvbuf_bytes_ = 0;
  bool rcvbuf_forced_ = false;
};

uint64_t monotonic_ns();
uint64_t realtime_ns();

}  // namespace simnic::io
