#include "simnic/io/udp_port.h"

#include <fcntl.h>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "simnic/io/capture_watch.h"
#include "simnic/proto/headers.h"
#include "simnic/proto/icrc.h"
#include "simnic/proto/wire.h"

namespace simnic::io {

namespace {

constexpr int kBatch = 32;        // datagrams per recvmmsg
constexpr int kMaxPerTurn = 512;  // datagrams per wake-up before yielding to other work
constexpr int kSocketBuffer = 8 << 20;
constexpr size_t kMaxDatagram = 9000;
// With UDP_GRO the kernel hands over a GSO sender's whole send as one buffer of up to 64 KiB
// (a UDP_GRO cmsg says the segment size); it is cut back into datagrams here.
constexpr size_t kMaxReceive = 65536;
constexpr size_t kTxBatch = 256;        // datagrams queued before a turn's end forces a flush
constexpr size_t kMaxGsoSegments = 64;  // the kernel's UDP_MAX_SEGMENTS
constexpr size_t kMaxGsoBytes = 65507;  // the largest UDP payload over IPv4

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
    : socket_(io), delay_timer_(io), ip_(ip), port_(port) {
  // SIMNIC_GSO in simnicd's environment (`SIMNIC_GSO=1 simnic up`): 1 on, 0 off, else auto.
  if (const char* gso = std::getenv("SIMNIC_GSO")) {
    if (std::strcmp(gso, "1") == 0) gso_mode_ = GsoMode::kOn;
    if (std::strcmp(gso, "0") == 0) gso_mode_ = GsoMode::kOff;
  }
}

UdpPort::~UdpPort() { close(); }

namespace {
// Whether `fd` is a UDP socket bound to ip:port (host order).
bool bound_to(int fd, uint32_t ip, uint16_t port) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  int type = 0;
  socklen_t tlen = sizeof type;
  return ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0 && a.sin_family == AF_INET &&
         ntohl(a.sin_addr.s_addr) == ip && ntohs(a.sin_port) == port &&
         ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) == 0 && type == SOCK_DGRAM;
}
}  // namespace

bool UdpPort::open(std::string* error) {
  const bool inherited = inherited_fd_ >= 0;
  if (inherited && !bound_to(inherited_fd_, ip_, port_)) {
    *error = "--udp-fd " + std::to_string(inherited_fd_) + " is not a UDP socket bound to this NIC's address and port";
    return false;
  }
  int fd = inherited ? inherited_fd_ : ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (inherited) {
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  // Big buffers ride out bursts; as root FORCE passes rmem_max, otherwise the kernel caps it
  // (net.core.rmem_max). What we got bounds the NIC-wide window towards each peer
  // (receive_buffer_bytes; simnic/core/engines/congestion.h).
  int sz = kSocketBuffer;
  rcvbuf_forced_ = ::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) == 0;
  if (!rcvbuf_forced_) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
  int got = 0;
  socklen_t got_len = sizeof got;
  if (::getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &got, &got_len) == 0) rcvbuf_bytes_ = uint64_t(got);
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
  // Linux refuses a GSO send on such a socket (EINVAL), so with GSO the kernel fills the UDP
  // checksum in; receivers accept either, and the ICRC masks it (IBA A17.3.3).
  // (use_gso sets it for the mode chosen below, and again when kAuto changes its mind.)
  // Datagrams the kernel drops because our receive buffer is full (its RcvbufErrors) are
  // invisible otherwise; with SO_RXQ_OVFL each datagram carries the socket's drop count.
  int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &on, sizeof on);
  // A GSO sender's segments, kept together: one receive instead of up to 64 (Linux 5.0+).
  // Without it the kernel segments them before they are queued, so either way works.
  ::setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof on);
  // Each datagram's TOS byte comes with it (an IP_TOS control message): RoCEv2 carries the
  // sender's GRH traffic class there, and a UD receive shows it in its GRH area.
  ::setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &on, sizeof on);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port_);
  a.sin_addr.s_addr = htonl(ip_);
  if (!inherited && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
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
  if (gso_mode_ == GsoMode::kAuto && (ip_ >> 24) == 127) watched_ifindex_ = int(::if_nametoindex("lo"));
  use_gso(gso_mode_ == GsoMode::kOn);
  follow_captures();
  return true;
}

// GSO needs the kernel's UDP checksum: Linux refuses a GSO send on a socket with SO_NO_CHECK.
// Without GSO the checksum is 0, as RoCEv2 NICs send it (see open()).
void UdpPort::use_gso(bool on) {
  gso_ = on;
  int no_check = on ? 0 : 1;
  ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_NO_CHECK, &no_check, sizeof no_check);
}

// kAuto: GSO while nobody captures on lo, one datagram per packet while someone does, so that
// tcpdump and Wireshark on lo show the RoCEv2 packets. Looked at no more than every 20 ms, and
// only when a run of datagrams is about to leave, so that single packets (a latency test)
// never pay for the look (a read of /proc/net/packet, some 10-20 µs).
void UdpPort::follow_captures() {
  if (!watched_ifindex_) return;
  constexpr uint64_t kEveryNs = 20'000'000;
  const uint64_t now = monotonic_ns();
  if (capture_checked_ns_ && now - capture_checked_ns_ < kEveryNs) return;
  capture_checked_ns_ = now;
  const bool watched = interface_captured(watched_ifindex_);
  if (watched == !gso_) return;
  if (watched) ++gso_capture_seen_;
  use_gso(!watched);
}

void UdpPort::close() {
  if (socket_.is_open()) flush();
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
  ::setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &on, sizeof on);  // as the port's own socket (open())
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
  static thread_local std::vector<uint8_t> storage(kBatch * kMaxReceive);
  mmsghdr msgs[kBatch];
  iovec iov[kBatch];
  sockaddr_in from[kBatch];
  alignas(cmsghdr) char control[kBatch][CMSG_SPACE(sizeof(uint32_t)) + 2 * CMSG_SPACE(sizeof(int))];
  int total = 0;
  while (total < kMaxPerTurn) {
    for (int i = 0; i < kBatch; ++i) {
      iov[i] = {storage.data() + size_t(i) * kMaxReceive, kMaxReceive};
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
      const Received r = read_control(msgs[i].msg_hdr);
      const size_t segment = r.segment;
      uint32_t src = ntohl(from[i].sin_addr.s_addr);
      uint16_t sport = ntohs(from[i].sin_port);
      const auto* base = static_cast<const uint8_t*>(iov[i].iov_base);
      const size_t len = msgs[i].msg_len;
      // One datagram, or the segments of a GSO send, the k-th sent with Identification k.
      if (len > segment) ++rx_gro_buffers_;
      uint16_t k = 0;
      for (size_t off = 0; off < len; off += segment, ++k) {
        std::span<const uint8_t> bytes(base + off, std::min(segment, len - off));
        if (pcap_) pcap_->write(now_wall, proto::IpUdpInfo{src, dst_ip, sport, port_, k, r.tos}, bytes);
        on_packet_(src, sport, bytes, dst_ip, r.tos);
      }
    }
    total += n;
    if (n < kBatch) break;
  }
  if (on_batch_done_) on_batch_done_();
}

// Reads a received datagram's control messages: the SO_RXQ_OVFL count (the socket's total
// since it was opened, as of when this datagram was queued: the largest seen is kept), the
// UDP_GRO segment size and the IP_TOS byte (GRO only merges datagrams of one TOS). Returns the
// size of the datagrams the buffer holds (all of it when the kernel did not coalesce).
UdpPort::Received UdpPort::read_control(const msghdr& msg) {
  size_t segment = 0;
  uint8_t tos = 0;
  for (const cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&msg), const_cast<cmsghdr*>(c))) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
      uint32_t drops;
      std::memcpy(&drops, CMSG_DATA(c), sizeof drops);
      if (drops > rx_overflow_) rx_overflow_ = drops;
    } else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
      int gso_size;
      std::memcpy(&gso_size, CMSG_DATA(c), sizeof gso_size);
      if (gso_size > 0) segment = size_t(gso_size);
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
      tos = *CMSG_DATA(c);  // one byte (ip_cmsg_recv_tos)
    }
  }
  return Received{segment ? segment : kMaxReceive, tos};
}

core::SendOutcome UdpPort::send(uint32_t dst_ip, uint16_t dst_port, std::span<const uint8_t> bytes) {
  return send_with_tos(dst_ip, dst_port, bytes, 0);
}

core::SendOutcome UdpPort::send_with_tos(uint32_t dst_ip, uint16_t dst_port, std::span<const uint8_t> bytes,
                                         uint8_t tos) {
  core::FaultDecision d = faults_.decide();
  if (d.drop) {
    ++fault_drops_;
    return core::SendOutcome::kDropped;
  }
  if (d.copies > 1) ++fault_dups_;
  for (uint32_t c = 0; c < d.copies; ++c) {
    if (d.delay_ns == 0) {
      transmit(dst_ip, dst_port, bytes, tos);
      continue;
    }
    ++fault_delayed_;
    Delayed x{monotonic_ns() + d.delay_ns, dst_ip, dst_port, {bytes.begin(), bytes.end()}, tos};
    auto pos = std::upper_bound(delayed_.begin(), delayed_.end(), x.due_ns,
                                [](uint64_t t, const Delayed& e) { return t < e.due_ns; });
    delayed_.insert(pos, std::move(x));
    schedule_delayed();
  }
  return d.copies > 1 ? core::SendOutcome::kDuplicated
         : d.delay_ns ? core::SendOutcome::kDelayed
                      : core::SendOutcome::kSent;
}

// The kernel's table costs a walk of its whole UDP hash (about 250 µs on the 2-vCPU machine,
// loaded), so it is read at most once per kPeerTableEveryNs, and only when an ACK timer expires
// with packets outstanding. A queue that looked empty then is not known to be empty now if
// anything was sent since: it is reported as holding something.
core::PacketSink::PeerEnd UdpPort::peer_end(uint32_t dst_ip, uint16_t dst_port) {
  constexpr uint64_t kPeerTableEveryNs = 10'000'000;
  flush();  // what this turn sent is in the peer's queue before the kernel is asked about it
  if (const uint64_t t = monotonic_ns(); t - peer_table_read_ns_ >= kPeerTableEveryNs) {
    peer_sockets_.forget();
    peer_processes_.forget();
    peer_table_read_ns_ = t;
    datagrams_at_peer_table_ = tx_datagrams_;
  }
  PeerEnd end = peer_sockets_.find(dst_ip, dst_port);
  if (end.open) end.busy = peer_processes_.busy(end.socket);
  end.drops += tx_dropped_;
  if (end.queued == 0 && tx_datagrams_ != datagrams_at_peer_table_) end.queued = 1;
  return end;
}

// FIONREAD on a UDP socket gives the size of the next datagram: 0 when none waits.
bool UdpPort::holds_unread() {
  int next = 0;
  return socket_.is_open() && ::ioctl(socket_.native_handle(), FIONREAD, &next) == 0 && next > 0;
}

// Datagrams leave at the end of the event loop's turn, all of the turn's in one sendmmsg (and
// runs of same-sized ones to one peer in one GSO send when that is on): a 64 KiB WRITE is then
// one or two system calls instead of sixteen. Nothing waits longer than the turn that made it.
void UdpPort::transmit(uint32_t dst_ip, uint16_t dst_port, std::span<const uint8_t> bytes, uint8_t tos) {
  if (tx_queue_.size() >= kTxBatch) flush();
  ++tx_datagrams_;
  tx_queue_.push_back(Queued{dst_ip, dst_port, uint32_t(tx_bytes_.size()), uint32_t(bytes.size()), tos});
  tx_bytes_.insert(tx_bytes_.end(), bytes.begin(), bytes.end());
  if (flush_posted_) return;
  flush_posted_ = true;
  boost::asio::post(socket_.get_executor(), [this] {
    flush_posted_ = false;
    flush();
  });
}

size_t UdpPort::gso_run(size_t first) const {
  if (!gso_) return 1;
  const Queued& a = tx_queue_[first];
  size_t n = 1, bytes = a.len;
  while (first + n < tx_queue_.size() && n < kMaxGsoSegments) {
    const Queued& b = tx_queue_[first + n];
    if (b.dst_ip != a.dst_ip || b.dst_port != a.dst_port || b.tos != a.tos || b.len > a.len ||
        bytes + b.len > kMaxGsoBytes)
      break;
    bytes += b.len;
    ++n;
    if (b.len < a.len) break;  // only a run's last segment may be shorter (UDP_SEGMENT)
  }
  return n;
}

// The kernel gives the k-th segment of a GSO send Identification k (DF, unconnected: the first
// is 0, as every simnic datagram), and the ICRC covers it (IBA A17.3.3). The ICRC is affine in
// the header bits, so the difference between the two headers' CRCs moves it, keeping whatever
// the packet carried (a deliberately wrong ICRC stays wrong).
void UdpPort::renumber_segment(const Queued& q, uint16_t k) {
  if (k == 0 || q.len < proto::kBthBytes + proto::kIcrcBytes) return;
  uint8_t* p = tx_bytes_.data() + q.offset;
  const uint32_t delta = proto::icrc_ident_change(q.len - proto::kIcrcBytes, k);
  uint8_t* icrc = p + q.len - proto::kIcrcBytes;
  for (int i = 0; i < 4; ++i) icrc[i] ^= uint8_t(delta >> (8 * i));  // stored least significant first
}

void UdpPort::write_pcap(const Queued& q, uint16_t ip_id) {
  if (!pcap_) return;
  std::span<const uint8_t> bytes(tx_bytes_.data() + q.offset, q.len);
  pcap_->write(realtime_ns(), proto::IpUdpInfo{ip_, q.dst_ip, port_, q.dst_port, ip_id, q.tos}, bytes);
}

void UdpPort::count_send_error(int err, size_t datagrams) {
  tx_dropped_ += datagrams;  // a full socket buffer is a lossy link: the transport recovers
  if (err == EMSGSIZE) tx_too_big_ += datagrams;
}

namespace {

// A send's control messages: UDP_SEGMENT for a GSO run (`segment` > 0) and IP_TOS for a TOS
// other than the socket's 0. Datagrams with neither (most) carry none, as before.
void add_control(msghdr& h, char* buf, uint16_t segment, uint8_t tos) {
  if (!segment && !tos) return;
  h.msg_control = buf;
  h.msg_controllen = (segment ? CMSG_SPACE(sizeof(uint16_t)) : 0) + (tos ? CMSG_SPACE(sizeof(int)) : 0);
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  if (segment) {
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    std::memcpy(CMSG_DATA(c), &segment, sizeof segment);
    // The next header by hand: CMSG_NXTHDR would read the stale length at that place.
    c = reinterpret_cast<cmsghdr*>(buf + CMSG_SPACE(sizeof(uint16_t)));
  }
  if (tos) {
    const int value = tos;  // ip_cmsg_send takes an int (or one byte)
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_TOS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &value, sizeof value);
  }
}

}  // namespace

void UdpPort::flush() {
  if (tx_queue_.empty()) return;
  if (tx_queue_.size() > 1) follow_captures();
  static thread_local std::vector<mmsghdr> msgs;
  static thread_local std::vector<iovec> iov;
  static thread_local std::vector<sockaddr_in> to;
  static thread_local std::vector<size_t> runs;  // datagrams in each message
  alignas(cmsghdr) static thread_local char control[kTxBatch][CMSG_SPACE(sizeof(uint16_t)) + CMSG_SPACE(sizeof(int))];
  msgs.assign(tx_queue_.size(), mmsghdr{});
  iov.resize(tx_queue_.size());
  to.resize(tx_queue_.size());
  runs.clear();
  for (size_t i = 0; i < tx_queue_.size();) {
    const size_t m = runs.size(), n = gso_run(i);
    for (size_t k = 0; k < n; ++k) {
      renumber_segment(tx_queue_[i + k], uint16_t(k));
      write_pcap(tx_queue_[i + k], uint16_t(k));
      iov[i + k] = {tx_bytes_.data() + tx_queue_[i + k].offset, tx_queue_[i + k].len};
    }
    to[m] = sockaddr_in{};
    to[m].sin_family = AF_INET;
    to[m].sin_port = htons(tx_queue_[i].dst_port);
    to[m].sin_addr.s_addr = htonl(tx_queue_[i].dst_ip);
    msghdr& h = msgs[m].msg_hdr;
    h.msg_name = &to[m];
    h.msg_namelen = sizeof to[m];
    h.msg_iov = &iov[i];
    h.msg_iovlen = n;
    if (n > 1) ++tx_gso_sends_;
    add_control(h, control[m], n > 1 ? uint16_t(tx_queue_[i].len) : 0, tx_queue_[i].tos);
    runs.push_back(n);
    i += n;
  }
  for (size_t done = 0; done < runs.size();) {
    int sent = ::sendmmsg(socket_.native_handle(), msgs.data() + done, unsigned(runs.size() - done), MSG_DONTWAIT);
    ++tx_send_calls_;
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0) count_send_error(errno, runs[done]), sent = 1;  // that message is lost; go on
    done += size_t(sent);
  }
  tx_queue_.clear();
  tx_bytes_.clear();
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
      transmit(x.dst_ip, x.dst_port, x.bytes, x.tos);
    }
    schedule_delayed();
  });
}

}  // namespace simnic::io
