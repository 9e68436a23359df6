#include "simnic/io/udp_port.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

namespace simnic::io {

namespace {

constexpr int kBatch = 32;           // datagrams per recvmmsg
constexpr int kMaxPerTurn = 512;     // datagrams per wake-up before yielding to other work
constexpr int kSocketBuffer = 8 << 20;
constexpr size_t kMaxDatagram = 9000;

}  // namespace

uint64_t monotonic_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

uint64_t realtime_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

UdpPort::UdpPort(boost::asio::io_context& io, uint32_t ip, uint16_t port)
    : socket_(io), delay_timer_(io), ip_(ip), port_(port) {}

UdpPort::~UdpPort() { close(); }

bool UdpPort::open(std::string* error) {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  // Big buffers ride out bursts; as root FORCE passes rmem_max, otherwise the kernel caps it.
  int sz = kSocketBuffer;
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
  // The ICRC covers the IPv4 Identification and flags. With PMTU discovery left at the default
  // (WANT), an unconnected socket's datagrams take their Identification from a counter the
  // kernel shares between sockets, so no sender can compute the ICRC of what really leaves.
  // PROBE sets DF and makes Linux send Identification 0 on an unconnected socket (as
  // ip_select_ident_segs does for DF datagrams without a connected peer): exactly the header
  // proto::build_ipv4_udp assumes, so the ICRC on the wire verifies.
  int pmtu = IP_PMTUDISC_PROBE;
  if (::setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) != 0) {
    *error = std::string("setsockopt(IP_MTU_DISCOVER): ") + std::strerror(errno);
    ::close(fd);
    return false;
  }
  // RoCEv2 NICs (ConnectX, rxe) send a zero UDP checksum: the ICRC protects the packet and
  // masks the field. Without this the kernel would fill in a checksum (or leave a partial one
  // for offload), unlike proto::build_ipv4_udp and the --pcap-dir files.
  int no_check = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_NO_CHECK, &no_check, sizeof no_check);
  // Datagrams the kernel drops because our receive buffer is full (its RcvbufErrors) are
  // invisible otherwise; with SO_RXQ_OVFL each datagram carries the socket's drop count.
  int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &on, sizeof on);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port_);
  a.sin_addr.s_addr = htonl(ip_);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    int e = errno;
    char buf[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
    *error = std::string("cannot bind UDP ") + buf + ":" + std::to_string(port_) + ": " + std::strerror(e) +
             (e == EADDRINUSE ? " (another simnicd, or a real RoCE stack, already uses this address and port)" : "");
    ::close(fd);
    return false;
  }
  // Datagrams to a multicast group leave through our interface, from our address, and come
  // back to every member on this host, ourselves included (IP_MULTICAST_LOOP, on by default).
  ip_mreqn mif{};
  mif.imr_address.s_addr = htonl(ip_);
  ::setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &mif, sizeof mif);
  socket_.assign(boost::asio::ip::udp::v4(), fd);
  return true;
}

void UdpPort::close() {
  boost::system::error_code ec;
  delay_timer_.cancel();
  if (socket_.is_open()) socket_.close(ec);
  for (auto& [group, socket] : groups_) socket->close(ec);
  groups_.clear();
}

// A socket bound to the group's address receives only what is sent to that group, and every
// NIC of the host binds the same <group>:4791 (SO_REUSEADDR), so each member gets its copy.
// Joining on our own address's interface (lo for 127.x) needs no privilege, and works whether
// or not the interface has the MULTICAST flag (loopback has not).
int UdpPort::join_group(uint32_t group_ip) {
  if (groups_.count(group_ip)) return 0;
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int on = 1, sz = kSocketBuffer;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port_);
  a.sin_addr.s_addr = htonl(group_ip);
  ip_mreqn m{};
  m.imr_multiaddr.s_addr = htonl(group_ip);
  m.imr_address.s_addr = htonl(ip_);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof m) != 0) {
    int e = errno;
    ::close(fd);
    return e;
  }
  auto socket = std::make_shared<boost::asio::ip::udp::socket>(socket_.get_executor());
  socket->assign(boost::asio::ip::udp::v4(), fd);
  if (on_packet_) wait_readable(*socket, group_ip, socket);
  groups_[group_ip] = socket;
  return 0;
}

void UdpPort::leave_group(uint32_t group_ip) {
  auto it = groups_.find(group_ip);
  if (it == groups_.end()) return;
  boost::system::error_code ec;
  it->second->close(ec);  // the membership goes with the socket; a pending wait is cancelled
  groups_.erase(it);
}

void UdpPort::start(PacketHandler on_packet, std::function<void()> on_batch_done) {
  on_packet_ = std::move(on_packet);
  on_batch_done_ = std::move(on_batch_done);
  wait_readable(socket_, ip_);
}

void UdpPort::wait_readable(boost::asio::ip::udp::socket& socket, uint32_t dst_ip,
                            std::shared_ptr<boost::asio::ip::udp::socket> keep) {
  socket.async_wait(boost::asio::socket_base::wait_read,
                    [this, &socket, dst_ip, keep](const boost::system::error_code& ec) {
                      if (ec || !socket.is_open()) return;  // closed, or the group was left
                      drain(socket, dst_ip);
                      wait_readable(socket, dst_ip, keep);
                    });
}

void UdpPort::drain(boost::asio::ip::udp::socket& socket, uint32_t dst_ip) {
  static thread_local std::vector<uint8_t> storage(kBatch * kMaxDatagram);
  mmsghdr msgs[kBatch];
  iovec iov[kBatch];
  sockaddr_in from[kBatch];
  alignas(cmsghdr) char control[kBatch][CMSG_SPACE(sizeof(uint32_t))];
  int total = 0;
  while (total < kMaxPerTurn) {
    for (int i = 0; i < kBatch; ++i) {
      iov[i] = {storage.data() + size_t(i) * kMaxDatagram, kMaxDatagram};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_name = &from[i];
      msgs[i].msg_hdr.msg_namelen = sizeof from[i];
      msgs[i].msg_hdr.msg_control = control[i];
      msgs[i].msg_hdr.msg_controllen = sizeof control[i];
    }
    int n = ::recvmmsg(socket.native_handle(), msgs, kBatch, MSG_DONTWAIT, nullptr);
    if (n <= 0) break;
    uint64_t now_wall = pcap_ ? realtime_ns() : 0;
    for (int i = 0; i < n; ++i) {
      note_overflow(msgs[i].msg_hdr);
      uint32_t src = ntohl(from[i].sin_addr.s_addr);
      uint16_t sport = ntohs(from[i].sin_port);
      std::span<const uint8_t> bytes(static_cast<const uint8_t*>(iov[i].iov_base), msgs[i].msg_len);
      if (pcap_) pcap_->write(now_wall, proto::IpUdpInfo{src, dst_ip, sport, port_}, bytes);
      on_packet_(src, sport, bytes, dst_ip);
    }
    total += n;
    if (n < kBatch) break;
  }
  if (on_batch_done_) on_batch_done_();
}

// The SO_RXQ_OVFL count is the socket's total since it was opened, as of when this datagram was
// queued: keep the largest seen.
void UdpPort::note_overflow(const msghdr& msg) {
  for (const cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&msg), const_cast<cmsghdr*>(c))) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SO_RXQ_OVFL) continue;
    uint32_t drops;
    std::memcpy(&drops, CMSG_DATA(c), sizeof drops);
    if (drops > rx_overflow_) rx_overflow_ = drops;
  }
}

core::SendOutcome UdpPort::send(uint32_t dst_ip, uint16_t dst_port, std::span<const uint8_t> bytes) {
  core::FaultDecision d = faults_.decide();
  if (d.drop) {
    ++fault_drops_;
    return core::SendOutcome::kDropped;
  }
  if (d.copies > 1) ++fault_dups_;
  for (uint32_t c = 0; c < d.copies; ++c) {
    if (d.delay_ns == 0) {
      transmit(dst_ip, dst_port, bytes);
      continue;
    }
    ++fault_delayed_;
    Delayed x{monotonic_ns() + d.delay_ns, dst_ip, dst_port, {bytes.begin(), bytes.end()}};
    auto pos = std::upper_bound(delayed_.begin(), delayed_.end(), x.due_ns,
                                [](uint64_t t, const Delayed& e) { return t < e.due_ns; });
    delayed_.insert(pos, std::move(x));
    schedule_delayed();
  }
  return d.copies > 1 ? core::SendOutcome::kDuplicated
         : d.delay_ns ? core::SendOutcome::kDelayed
                      : core::SendOutcome::kSent;
}

void UdpPort::transmit(uint32_t dst_ip, uint16_t dst_port, std::span<const uint8_t> bytes) {
  if (pcap_) pcap_->write(realtime_ns(), proto::IpUdpInfo{ip_, dst_ip, port_, dst_port}, bytes);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(dst_port);
  a.sin_addr.s_addr = htonl(dst_ip);
  for (;;) {
    ssize_t n = ::sendto(socket_.native_handle(), bytes.data(), bytes.size(), MSG_DONTWAIT,
                         reinterpret_cast<sockaddr*>(&a), sizeof a);
    if (n >= 0) return;
    if (errno == EINTR) continue;
    ++tx_dropped_;  // a full socket buffer is a lossy link: the transport recovers
    if (errno == EMSGSIZE) ++tx_too_big_;
    return;
  }
}

void UdpPort::schedule_delayed() {
  if (delayed_.empty()) return;
  auto due = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(delayed_.front().due_ns));
  delay_timer_.expires_at(due);
  delay_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    uint64_t now = monotonic_ns();
    while (!delayed_.empty() && delayed_.front().due_ns <= now) {
      Delayed x = std::move(delayed_.front());
      delayed_.pop_front();
      transmit(x.dst_ip, x.dst_port, x.bytes);
    }
    schedule_delayed();
  });
}

}  // namespace simnic::io
