#include "simnic/io/nic_server.h"
#include "simnic/io/sysfs_tree.h"

#include <malloc.h>

#include <linux/kcmp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <utility>

#include "simnic/abi/daemon_alive.h"
#include "simnic/abi/paths.h"
#include "simnic/abi/seqpacket.h"
#include "simnic/abi/state_dir.h"
#include "simnic/io/exec_in_place.h"
#include "simnic/io/fd_checks.h"
#include "simnic/io/netif.h"
#include "simnic/io/peer_process.h"

namespace simnic::io {

namespace asio = boost::asio;

namespace {
// Control messages served per wake-up of one connection, so a client that floods its socket
// takes turns with the others and with packets.
constexpr int kMaxMessagesPerTurn = 16;

// ibv_open_xrcd's file, identified as the kernel identifies it: by device and inode.
int file_identity(int fd, uint64_t* dev, uint64_t* ino) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return EBADF;
  *dev = uint64_t(st.st_dev);
  *ino = uint64_t(st.st_ino);
  return 0;
}

// ibv_import_device: is descriptor `their_fd` of process `pid` the file our `fd` is open on?
// kcmp needs the access to `pid` process_vm_readv needs already (PR_SET_PTRACER).
// Without kcmp (a kernel without CONFIG_KCMP), the socket's inode in /proc/PID/fd says the same.
bool same_file(pid_t pid, int their_fd, int fd) {
  long r = ::syscall(SYS_kcmp, pid, ::getpid(), KCMP_FILE, their_fd, fd);
  if (r >= 0 || errno != ENOSYS) return r == 0;
  struct stat st {};
  char link[64] = {}, want[64];
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(their_fd);
  if (::fstat(fd, &st) != 0 || ::readlink(path.c_str(), link, sizeof link - 1) < 0) return false;
  std::snprintf(want, sizeof want, "socket:[%llu]", static_cast<unsigned long long>(st.st_ino));
  return std::strcmp(link, want) == 0;
}
}  // namespace

struct NicServer::Session {
  uint64_t id = 0;  // tells a live session from a freed one whose address was reused
  service::ControlSession state;
  std::unique_ptr<asio::posix::stream_descriptor> control;
  std::unique_ptr<asio::posix::stream_descriptor> doorbell;
  std::unique_ptr<asio::posix::stream_descriptor> process;  // pidfd of the client (contexts only)
  bool counted = false;                                     // in sessions_per_uid_ (else refused: in refusals_pending_)
  std::string refusal;  // why this connection is over its user's share ("" if it is not)
  // A reply longer than one message, being sent in pieces (abi::kRespMore): the rest goes
  // when the socket has room, and no request of this connection is read meanwhile.
  abi::RespHeader unsent_head{};
  std::vector<uint8_t> unsent;
  size_t unsent_from = 0;
};

void StderrLogger::log(core::LogLevel level, const std::string& line) {
  if (level == core::LogLevel::kDebug && !verbose_) return;
  static const char* kTag[] = {"error", "warn", "info", "debug"};
  std::fprintf(stderr, "simnicd[%s] %s: %s\n", name_.c_str(), kTag[int(level)], line.c_str());
}

NicServer::NicServer(NicOptions options, boost::asio::io_context& io, ProcessHooks hooks)
    : opt_(std::move(options)),
      io_(io),
      hooks_(std::move(hooks)),
      signals_(io_, SIGINT, SIGTERM),
      timer_(io_),
      clock_(monotonic_ns()),
      logger_(opt_.device.name, opt_.verbose),
      notifier_(&logger_),
      port_(io_, opt_.device.ipv4, opt_.device.udp_port),
      trace_(io_),
      device_(opt_.device, memory_, port_, shm_, notifier_, logger_),
      dispatcher_(device_, ::getpid(),
                  {[this](const std::string& spec, int* st) { return set_faults(spec, st); },
                   [this] { return status_text(); },
                   [this](const std::string& cmd, int* st) { return step_.command(cmd, st); },
                   [this](service::FdRole role, int fd, const service::ControlSession& s) {
                     return check_client_fd(role, fd, s);
                   },
                   file_identity, same_file, [this] { return daemon_alive_fd(); },
                   [this] { return direct_send_socket(); }}),
      step_(device_, clock_, opt_.device.name,
            {[this](uint32_t context_id, uint64_t t) { ring_held_doorbell(context_id, t); }, [this] { after_event(); },
             [this] {
               timer_.cancel();
               timer_due_ = 0;
             },
             [this] { trace_.flush_file(); }}),
      listener_(io_, logger_),
      viewer_watch_(io_) {
  port_.faults().configure(opt_.faults);
  device_.tracer().set_nic(opt_.device.name);
  if (const char* v = std::getenv("SIMNIC_ACK_COALESCING"); v && std::string_view(v) == "0")
    device_.set_ack_coalescing(false);
}

NicServer::~NicServer() {
  stop();
  if (alive_fd_ >= 0) ::close(alive_fd_);
}

// A descriptor of the alive page for one reply (the I/O layer closes what it sent).
int NicServer::daemon_alive_fd() const { return alive_fd_ < 0 ? -1 : ::fcntl(alive_fd_, F_DUPFD_CLOEXEC, 0); }

// A descriptor of the NIC's UDP socket for a program that sends its QPs' lent PSNs itself
// (abi/direct_send.h; the I/O layer closes what it sent). SIMNIC_DIRECT_SEND=0 in simnicd's
// environment keeps every packet the NIC's own (an A/B, docs/performance.md).
int NicServer::direct_send_socket() {
  static const bool off = [] {
    const char* v = std::getenv("SIMNIC_DIRECT_SEND");
    return v && std::string_view(v) == "0";
  }();
  const int fd = port_.native_fd();
  return off || fd < 0 ? -1 : ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

uint64_t NicServer::now() const { return clock_.now(monotonic_ns()); }

int NicServer::start(std::string* error) {
  if (std::string bad = abi::make_private_dir(opt_.dir); !bad.empty()) {
    *error = bad;  // someone else's or a world-open directory: never open anything in it
    return 1;
  }
  if (opt_.device.infiniband) {
    lids_ = std::make_unique<LidFile>(opt_.lid_map.empty() ? abi::lid_map_path(opt_.dir) : opt_.lid_map, logger_);
    device_.addressing().set_lid_directory(lids_.get());
  }
  socket_path_ = abi::control_socket_path(opt_.dir, opt_.device.name);
  // Another simnicd serving this name? A socket that answers is taken; a dead one is stale.
  if (int s = abi::connect_control(socket_path_); s >= 0) {
    ::close(s);
    *error = "a simnicd named " + opt_.device.name + " is already running (" + socket_path_ + ")";
    return 2;
  }
  // On the thread that runs the NIC for the process' life (the mutex is its until it exits).
  alive_fd_ = abi::create_daemon_alive_memfd();
  if (alive_fd_ < 0)
    logger_.log(core::LogLevel::kWarn, std::string("no alive page (") + std::strerror(errno) +
                                           "): applications see this NIC's death on every 128th post only");
  if (opt_.udp_fd >= 0) port_.adopt(opt_.udp_fd);
  if (opt_.gso >= 0) port_.set_gso_mode(opt_.gso ? UdpPort::GsoMode::kOn : UdpPort::GsoMode::kOff);
  if (!port_.open(error)) return 2;
  // What this NIC keeps in flight towards one peer stays well under a receive buffer like its
  // own: a quarter of it (the kernel counts each datagram at up to twice its size, and a NIC
  // may hear from several peers at once). docs/congestion.md.
  // SIMNIC_PEER_WINDOW_BYTES (peer_window_bytes) sets it as is.
  if (uint64_t rcvbuf = port_.receive_buffer_bytes(); rcvbuf && !opt_.device.peer_window_bytes)
    device_.set_peer_window_cap(std::min<uint64_t>(core::DeviceConfig::kDefaultPeerWindow, rcvbuf / 4));
  if (int rc = open_outputs(error)) return rc;
  write_device_files();
  if (!listener_.open(socket_path_, error, [this](int fd, const ucred& peer) { add_session(fd, peer); })) return 1;
  start_port();
  signals_.add(SIGUSR2);  // `simnic restart NAME`
  wait_for_signals();
  if (opt_.start_paused) {
    int st;
    step_.command("on", &st);
  }
  return 0;
}

// SIGTERM/SIGINT stop the NIC; SIGUSR2 restarts it in place.
void NicServer::wait_for_signals() {
  signals_.async_wait([this](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    if (signo != SIGUSR2) {
      logger_.log(core::LogLevel::kInfo, std::string("stopping (") + ::strsignal(signo) + ")");
      return stop();
    }
    restart_in_place();
    wait_for_signals();  // only reached when the exec failed: the NIC goes on as it was
  });
}

// `simnic restart NAME` (SIGUSR2): simnicd executes itself anew, same pid and command line,
// handing its bound UDP socket to the new image (--udp-fd). The NIC's address is never
// released, so no other local user can bind it between the old NIC and the new one and
// receive its peers' packets (issue 29 point 3). Contexts end as on any restart: the control
// connections close, and the kernel clears the alive word (abi/daemon_alive.h) at exec.
void NicServer::restart_in_place() {
  if (hooks_.restart) return hooks_.restart();  // several NICs in this process: they restart together
  const int fd = prepare_restart();
  if (fd < 0) return logger_.log(core::LogLevel::kError, "cannot restart in place: no UDP socket");
  restart_failed(exec_in_place({fd}));
}

int NicServer::prepare_restart() {
  logger_.log(core::LogLevel::kInfo, "restarting in place (simnic restart): keeping " + ipv4_string(opt_.device.ipv4) +
                                         ":" + std::to_string(opt_.device.udp_port) + " bound");
  trace_.flush_file();
  return port_.native_fd();
}

void NicServer::restart_failed(int error) {
  logger_.log(core::LogLevel::kError,
              std::string("cannot restart in place: exec: ") + std::strerror(error) + "; the NIC goes on as it was");
}

// The pcap file, the trace file and the trace socket. Returns 0, or an exit code with *error set.
int NicServer::open_outputs(std::string* error) {
  if (!opt_.pcap_path.empty()) {
    if (!pcap_.open(opt_.pcap_path, opt_.pcap_max_bytes, &logger_, error)) return 1;
    port_.set_pcap(&pcap_);
  }
  if (!opt_.trace_path.empty() && !trace_.open_file(opt_.trace_path, opt_.trace_max_bytes, &logger_, error)) return 1;
  std::string trace_sock = opt_.dir + "/" + opt_.device.name + ".trace";  // not *.sock: those are NICs
  trace_.set_history(opt_.history);
  device_.tracer().set_engine_steps(opt_.trace_steps);
  if (!trace_.listen(trace_sock, error, [this] {
        device_.tracer().set_sink(&trace_);
        device_.tracer().set_time(now());
        device_.tracer().set_wall_ns(realtime_ns());
        device_.trace_points().trace_snapshot();
        watch_for_viewer_wqes();
      }))
    return 1;
  update_tracing();
  device_.tracer().set_time(now());
  device_.tracer().set_wall_ns(realtime_ns());
  device_.trace_points().trace_snapshot();  // the file starts with the NIC itself
  return 0;
}

// Packets go to the Device, or wait in step mode's queue while the NIC is paused.
void NicServer::start_port() {
  port_.start(
      [this](uint32_t src, uint16_t sport, std::span<const uint8_t> bytes, uint32_t dst, uint8_t tos) {
        if (step_.paused()) return step_.hold_packet(src, sport, bytes, dst, tos);
        device_.on_packet(src, sport, bytes, now(), dst, tos);
      },
      [this] { after_event(); });
  // For the NICs sharing this loop: this one is behind while it holds work for a later turn
  // (a paused NIC is not behind: it waits for a user, as a stopped process would).
  struct stat st {};
  if (::fstat(port_.native_fd(), &st) == 0) port_inode_ = uint64_t(st.st_ino);
  LoopNics::add(port_inode_, [this] { return !step_.paused() && (pending_posted_ || device_.has_pending_work()); });
}

// Without a busy poll the loop sleeps in epoll whenever nothing is ready. With one, after each
// event it keeps looking (io_.poll(): epoll with a zero timeout) for busy_poll_us, and again for
// as long after every event found meanwhile: a doorbell or a packet that follows within the
// window is served without a sleep and a wake-up (which on an idle vCPU costs more than a small
// message's whole round trip: docs/performance.md).
void NicServer::run() {
  if (opt_.busy_poll_us == 0) return (void)io_.run();
  while (!io_.stopped() && io_.run_one()) busy_poll();
}

// The window closes early when another task waits for a CPU (CpuShare): on two vCPUs the
// application a NIC is waiting for would otherwise wait for the NIC's time slice to end.
void NicServer::busy_poll() {
  constexpr uint64_t kLookEveryNs = 5'000;  // how often to ask whether someone waits for a CPU
  const uint64_t window = uint64_t(opt_.busy_poll_us) * 1000;
  uint64_t t = monotonic_ns(), until = t + window, next_look = t;
  while (!io_.stopped()) {
    if (const size_t ran = io_.poll()) {
      busy_poll_found_ += ran;
      until = monotonic_ns() + window;
      continue;
    }
    t = monotonic_ns();
    if (t >= until) return (void)++busy_poll_sleeps_;
    if (t < next_look) continue;
    if (!cpu_share_.nobody_waits()) return (void)++busy_poll_gave_way_;
    next_look = t + kLookEveryNs;
  }
}

void NicServer::stop() {
  boost::system::error_code ec;
  signals_.cancel(ec);
  timer_.cancel();
  listener_.close();
  while (!sessions_.empty()) close_session(sessions_.begin()->first);
  device_.tracer().set_sink(nullptr);
  trace_.close();
  LoopNics::remove(port_inode_);
  port_.close();
  pcap_.close();
  if (!sysfs_root_.empty()) {
    unlink_sysfs_class_entry(opt_.dir, opt_.device.name);
    remove_sysfs_tree(sysfs_root_, device_.addressing().port_attr().gid_tbl_len);
  }
  sysfs_root_.clear();
  if (hooks_.stopped) return std::exchange(hooks_.stopped, nullptr)();  // once: the destructor stops again
  io_.stop();
}

// The device's sysfs-style files at its ibdev_path, where the shim's ibv_device points.
void NicServer::write_device_files() {
  sysfs_root_ = opt_.dir + "/" + opt_.device.name;
  if (std::string bad = write_sysfs_tree(sysfs_root_, device_, opt_.iface); !bad.empty())
    logger_.log(core::LogLevel::kWarn, "device files (sysfs layout) not written: " + bad);
  else if (std::string bad = link_sysfs_class_entry(opt_.dir, opt_.device.name); !bad.empty())
    logger_.log(core::LogLevel::kWarn, "sysfs root entry not written: " + bad);
}

// Tracing costs only while someone listens: a trace file or a live subscriber.
void NicServer::update_tracing() { device_.tracer().set_sink(trace_.active() ? &trace_ : nullptr); }

// ibv_post_recv rings no doorbell (a real RNIC finds receives when a packet needs one), so a
// live viewer would see a posted receive only when the first SEND arrives. While a viewer is
// attached, the NIC looks at every ring each 20 ms and reports what was posted meanwhile; with
// no viewer it costs nothing.
void NicServer::watch_for_viewer_wqes() {
  if (viewer_watch_armed_) return;
  viewer_watch_armed_ = true;
  viewer_watch_.expires_after(std::chrono::milliseconds(20));
  viewer_watch_.async_wait([this](const boost::system::error_code& ec) {
    viewer_watch_armed_ = false;
    if (ec || trace_.subscribers() == 0) return;
    // A NIC held in step mode changes nothing, its trace included, until it is stepped.
    if (!step_.paused()) device_.trace_points().trace_posted_wqes();
    watch_for_viewer_wqes();
  });
}

// A user holding its share of connections (SessionShares): "" if not, else why the new one
// is refused. The limit is read at each connection (a control-path system call), so that one
// changed with prlimit while the NIC runs counts too.
std::string NicServer::over_session_share(uid_t uid) {
  rlimit nofile{};
  fd_limit_ = ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 ? nofile.rlim_cur : 1024;
  max_sessions_per_uid_ = SessionShares::per_user(fd_limit_);
  auto held = sessions_per_uid_.find(uid);
  if (held == sessions_per_uid_.end() || held->second < max_sessions_per_uid_) return {};
  return "uid " + std::to_string(uid) + " already has " + std::to_string(held->second) + " connections to " +
         opt_.device.name + ", its share of simnicd's descriptors (at most " + std::to_string(max_sessions_per_uid_) +
         " per user: 3/4 of what simnicd's descriptor limit of " + std::to_string(fd_limit_) +
         " allows, so that one user cannot take them all; docs/security.md); close some contexts "
         "(ibv_close_device) and try again";
}

void NicServer::add_session(int fd, const ucred& peer) {
  std::string refusal = over_session_share(peer.uid);
  if (!refusal.empty()) {
    // Told why in answer to its first request; a user flooding connections past that gets
    // them closed at once, so refusals cannot take the descriptors either.
    if (sessions_refused_++ % 1000 == 0)
      logger_.log(core::LogLevel::kWarn, "refused a control connection of pid " + std::to_string(peer.pid) + ": " +
                                             refusal + " (" + std::to_string(sessions_refused_) + " refused so far)");
    if (refusals_pending_[peer.uid] >= SessionShares::kMaxRefusalsPending) {
      ::close(fd);
      return;
    }
    ++refusals_pending_[peer.uid];
  } else {
    ++sessions_per_uid_[peer.uid];
  }
  auto s = std::make_unique<Session>();
  s->id = next_session_id_++;
  s->state.pid = peer.pid;
  s->state.uid = peer.uid;
  s->counted = refusal.empty();
  s->refusal = std::move(refusal);
  s->control = std::make_unique<asio::posix::stream_descriptor>(io_, fd);
  Session* raw = s.get();
  sessions_[raw] = std::move(s);
  on_control_readable(raw);
}

bool NicServer::alive(Session* s, uint64_t id) const {
  auto it = sessions_.find(s);
  return it != sessions_.end() && it->second->id == id;
}

void NicServer::on_control_readable(Session* s) {
  s->control->async_wait(asio::posix::descriptor_base::wait_read, [this, s](const boost::system::error_code& ec) {
    if (ec) return;
    serve_control(s);
  });
}

// Serves what the connection has, at most kMaxMessagesPerTurn messages, then lets others run.
// The socket is non-blocking (simnicd's own end), so nothing here waits for the client.
void NicServer::serve_control(Session* s) {
  for (int served = 0; served < kMaxMessagesPerTurn; ++served) {
    if (!s->unsent.empty()) return;  // send_pieces comes back here once the reply is out
    std::vector<uint8_t> buf;
    std::vector<int> fds;
    bool fds_lost = false;
    int e = abi::recv_message(s->control->native_handle(), buf, fds, &fds_lost);
    if (e == EAGAIN || e == EWOULDBLOCK) return on_control_readable(s);
    if (e != 0 || buf.size() < sizeof(abi::ReqHeader)) {
      for (int fd : fds) ::close(fd);
      close_session(s);  // the application closed its context, or died, or sent garbage
      after_event();
      return;
    }
    if (fds_lost) {
      // Too many descriptors, or we are out of them: the request cannot be what was meant
      // (a Hello would silently become query-only). Refuse it and keep serving.
      for (int fd : fds) ::close(fd);
      refuse_message(s, buf, EMFILE);
      continue;
    }
    if (!s->refusal.empty()) return refuse_session(s, buf, fds);
    handle_message(s, buf, fds);
  }
  // More may be waiting, and the edge-triggered wait would not report it again: come back.
  asio::post(io_, [this, s, id = s->id] {
    if (alive(s, id)) serve_control(s);
  });
}

void NicServer::handle_message(Session* s, std::vector<uint8_t>& buf, std::vector<int>& fds) {
  update_tracing();
  device_.set_time(now());
  abi::ReqHeader h;
  std::memcpy(&h, buf.data(), sizeof h);
  std::span<const uint8_t> body(buf.data() + sizeof h, buf.size() - sizeof h);
  service::ControlReply reply;
  if (h.len != body.size() || h.op == 0 || h.op >= uint32_t(abi::Op::Count_)) {
    reply.status = EPROTO;  // malformed: answer, never crash
  } else {
    reply = dispatcher_.handle(s->state, abi::Op(h.op), body, fds, now());
  }
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
  send_reply(s, h.op, reply);
  for (int fd : reply.fds) ::close(fd);
  if (s->state.ctx && !s->doorbell) {
    watch_doorbell(s);
    watch_process(s);
  }
  after_event();
}

// One message, or pieces when the body is longer than a message can carry (abi::kRespMore:
// `simnic status` of a NIC with a thousand QPs). Non-blocking: a client that does not read its
// replies loses a one-message reply; the rest of a reply in pieces waits for room in its socket
// (a client can only hold back its own connection), the NIC never waits.
void NicServer::send_reply(Session* s, uint32_t op, service::ControlReply& reply) {
  const int fd = s->control->native_handle();
  if (reply.body.size() <= abi::kMaxReplyPiece) {
    abi::RespHeader rh{op, uint32_t(reply.body.size()), reply.status, 0};
    abi::send_message(fd, &rh, sizeof rh, reply.body.data(), reply.body.size(), reply.fds);
    return;
  }
  abi::RespHeader first{op, abi::kMaxReplyPiece, reply.status, abi::kRespMore};
  if (abi::send_message(fd, &first, sizeof first, reply.body.data(), abi::kMaxReplyPiece, reply.fds) != 0) return;
  s->unsent_head = abi::RespHeader{op, 0, reply.status, 0};
  s->unsent = std::move(reply.body);
  s->unsent_from = abi::kMaxReplyPiece;
  send_pieces(s);
}

// Sends what the socket takes of the reply in pieces; waits for room for the rest, and then
// serves the connection again (serve_control stopped reading it meanwhile). All sent at once,
// the caller's serve_control simply goes on: no second reader of the socket is started.
void NicServer::send_pieces(Session* s, bool resume) {
  const int fd = s->control->native_handle();
  while (s->unsent_from < s->unsent.size()) {
    const size_t n = std::min<size_t>(abi::kMaxReplyPiece, s->unsent.size() - s->unsent_from);
    abi::RespHeader rh = s->unsent_head;
    rh.len = uint32_t(n);
    rh.flags = s->unsent_from + n < s->unsent.size() ? abi::kRespMore : 0;
    int e = abi::send_message(fd, &rh, sizeof rh, s->unsent.data() + s->unsent_from, n);
    if (e == EAGAIN || e == EWOULDBLOCK) {
      s->control->async_wait(asio::posix::descriptor_base::wait_write,
                             [this, s, id = s->id](const boost::system::error_code& ec) {
                               if (!ec && alive(s, id)) send_pieces(s, true);
                             });
      return;
    }
    if (e != 0) break;  // the client went away: serve_control finds the end of the connection
    s->unsent_from += n;
  }
  s->unsent.clear();
  s->unsent_from = 0;
  if (resume) serve_control(s);
}

void NicServer::refuse_message(Session* s, const std::vector<uint8_t>& buf, int status) {
  abi::ReqHeader h;
  std::memcpy(&h, buf.data(), sizeof h);
  abi::RespHeader rh{h.op, 0, status, 0};
  abi::send_message(s->control->native_handle(), &rh, sizeof rh, nullptr, 0);
}

// The first request of a connection over its user's share: EMFILE (what opening one more
// uverbs file would give a process out of descriptors) with the reason, then the connection ends.
void NicServer::refuse_session(Session* s, std::vector<uint8_t>& buf, std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
  abi::ReqHeader h;
  std::memcpy(&h, buf.data(), sizeof h);
  abi::RespHeader rh{h.op, uint32_t(s->refusal.size()), EMFILE, 0};
  abi::send_message(s->control->native_handle(), &rh, sizeof rh, s->refusal.data(), s->refusal.size());
  close_session(s);
  after_event();
}

int NicServer::check_client_fd(service::FdRole role, int fd, const service::ControlSession& s) {
  int e = role == service::FdRole::kDoorbell    ? check_doorbell_fd(fd)
          : role == service::FdRole::kCmChannel ? check_cm_channel_socket(fd, s.pid)
                                                : check_event_socket(fd, s.pid);
  if (e)
    logger_.log(core::LogLevel::kWarn,
                "pid " + std::to_string(s.pid) + " passed a descriptor that is not " +
                    (role == service::FdRole::kDoorbell ? "an eventfd" : "its own SEQPACKET event socket") +
                    ": refused (EINVAL)");
  return e;
}

void NicServer::watch_doorbell(Session* s) {
  if (!s->doorbell) s->doorbell = std::make_unique<asio::posix::stream_descriptor>(io_, s->state.ctx->doorbell_fd);
  s->doorbell->async_wait(asio::posix::descriptor_base::wait_read, [this, s](const boost::system::error_code& ec) {
    if (ec || !s->state.ctx) return;
    // One non-blocking read empties an eventfd: O_NONBLOCK is the client's to change, so it is
    // not what keeps this from blocking.
    const uint64_t rings = drain_doorbell(s->doorbell->native_handle());
    update_tracing();
    if (step_.paused()) {
      step_.hold_doorbell(s->state.ctx->id);
    } else {
      device_.on_doorbell(s->state.ctx, now(), rings ? rings : 1);
      after_event();
    }
    watch_doorbell(s);
  });
}

// A context dies with its process, even if something it passed us (a socket with the control
// connection in flight, say) keeps the control connection itself open.
void NicServer::watch_process(Session* s) {
  int pidfd = peer_pidfd(s->control->native_handle(), s->state.pid);
  if (pidfd < 0) return;  // an old kernel: the connection's EOF is all we have
  s->process = std::make_unique<asio::posix::stream_descriptor>(io_, pidfd);
  s->process->async_wait(asio::posix::descriptor_base::wait_read, [this, s](const boost::system::error_code& ec) {
    if (ec) return;
    logger_.log(core::LogLevel::kDebug, "pid " + std::to_string(s->state.pid) + " exited: closing its context");
    close_session(s);
    after_event();
  });
}

namespace {
void forget_session_of(std::map<uid_t, size_t>& per_uid, uid_t uid) {
  auto it = per_uid.find(uid);
  if (it != per_uid.end() && --it->second == 0) per_uid.erase(it);
}
}  // namespace

void NicServer::close_session(Session* s) {
  boost::system::error_code ec;
  if (s->state.ctx) {
    int doorbell = s->state.ctx->doorbell_fd, async = s->state.ctx->async_fd;
    uint32_t id = s->state.ctx->id;
    step_.forget_context(id);
    dispatcher_.close(s->state);
    if (s->doorbell) s->doorbell->close(ec);
    else if (doorbell >= 0) ::close(doorbell);
    if (async >= 0) ::close(async);
    // A context's queues and per-WQE state can be hundreds of MB; glibc keeps freed heap for
    // reuse unless asked, and a NIC that outlives many programs should not keep their peak.
    ::malloc_trim(0);
  } else if (s->state.cm_client) {
    dispatcher_.close(s->state);  // librdmacm's connection: its ids go (DREQ/REJ to their peers)
  }
  if (s->process) s->process->close(ec);
  if (s->control) s->control->close(ec);
  forget_session_of(s->counted ? sessions_per_uid_ : refusals_pending_, s->state.uid);
  sessions_.erase(s);
}

// A doorbell held in step mode, rung when stepped to: its context may have closed meanwhile.
void NicServer::ring_held_doorbell(uint32_t context_id, uint64_t t) {
  for (auto& [p, s] : sessions_)
    if (s->state.ctx && s->state.ctx->id == context_id) device_.on_doorbell(s->state.ctx, t);
}

// After any event: let engines continue long work, and re-arm the transport timer.
void NicServer::after_event() {
  device_.finish_turn();  // the event's writes into application memory, coalesced; pollers woken
  if (device_.has_pending_work()) continue_pending_work();
  arm_timer();
}

// Long work (a large WQE, many QPs) continues in its own turn of the loop, so packets and
// other clients interleave with it; a paused NIC holds it for the next step.
void NicServer::continue_pending_work() {
  if (step_.paused()) return step_.hold_pending_work();
  if (pending_posted_) return;
  pending_posted_ = true;
  asio::post(io_, [this] {
    pending_posted_ = false;
    if (step_.paused()) return after_event();
    device_.run_pending(now());
    after_event();
  });
}

void NicServer::arm_timer() {
  uint64_t due = step_.paused() ? 0 : device_.next_deadline();
  if (due == timer_due_) return;
  timer_due_ = due;
  if (!due) {
    timer_.cancel();
    return;
  }
  timer_.expires_at(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(clock_.real_time_of(due))));
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || step_.paused()) return;
    timer_due_ = 0;
    // A NIC that was not scheduled finds its timers late and its peer's ACKs waiting in its
    // socket: read those first, so a timeout counts packets lost, not time this process lost.
    port_.read_queued();
    device_.on_timer(now());
    after_event();
  });
}

}  // namespace simnic::io
