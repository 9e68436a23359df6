// One simulated NIC as a process: the Asio event loop around the pure Device. It owns the
// UDP port, the control sessions (the uverbs-like slow path; their listening socket is
// control_listener.h), each context's doorbell, the transport timer, pcap and trace output;
// step mode is step_controller.h, the status lines nic_server_status.cc. Single-threaded:
// every Device call is on the loop.
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "simnic/core/device.h"
#include "simnic/io/control_listener.h"
#include "simnic/io/cpu_share.h"
#include "simnic/io/fd_notifier.h"
#include "simnic/io/host_memory_process.h"
#include "simnic/io/lid_file.h"
#include "simnic/io/pcap_writer.h"
#include "simnic/io/shm_memfd.h"
#include "simnic/io/sim_clock.h"
#include "simnic/io/step_controller.h"
#include "simnic/io/trace_hub.h"
#include "simnic/io/udp_port.h"
#include "simnic/service/control_dispatch.h"

namespace simnic::io {

// How long the event loop keeps polling after it handled something before it sleeps in epoll
// (simnicd --busy-poll-us). Off: on a shared 2-vCPU machine the poll gave way to other tasks
// almost every time and cost a little on each event (docs/performance.md, the data path, 5).
inline constexpr uint32_t kDefaultBusyPollUs = 0;

struct NicOptions {
  core::DeviceConfig device;
  int udp_fd = -1;         // --udp-fd: a socket already bound to the NIC's address (restart in place)
  std::string dir;         // where the control and telemetry sockets live
  std::string pcap_path;   // empty: no capture
  std::string trace_path;  // empty: no trace file
  uint64_t pcap_max_bytes = kDefaultOutputMaxBytes;  // each file stops, whole, at this size
  uint64_t trace_max_bytes = kDefaultOutputMaxBytes;
  core::FaultConfig faults;
  bool verbose = false;
  bool start_paused = false;
  bool trace_steps = false;  // engine_steps events: the steps each packet walks (--trace-steps)
  int gso = -1;              // UDP GSO sends: 1 --gso, 0 --no-gso, -1 SIMNIC_GSO or automatic (UdpPort::GsoMode)
  uint32_t busy_poll_us = kDefaultBusyPollUs;  // after an event, poll this long before sleeping (0: never)
  bool history = true;                         // keep recent events for viewers that attach later (costs CPU)
  std::string lid_map;                         // IB mode: the LID registry (default <dir>/lids)
  std::string iface;                           // the interface holding device.ipv4 ("lo" for 127/8)
  uint32_t link_mtu = 0;                       // its MTU in bytes; device.mtu_bytes fits in it unfragmented
};

class StderrLogger final : public core::Logger {
 public:
  StderrLogger(std::string name, bool verbose) : name_(std::move(name)), verbose_(verbose) {}
  void log(core::LogLevel level, const std::string& line) override;

 private:
  std::string name_;
  bool verbose_;
};

class NicServer {
 public:
  // What a process serving several NICs on one loop (simnicd --next) does for them all.
  struct ProcessHooks {
    std::function<void()> stopped;  // this NIC stopped: the loop stops after the last one
    std::function<void()> restart;  // `simnic restart` (SIGUSR2): every NIC of the process
  };
  // The NIC runs on `io`, which other NICs of the same process may share; without hooks, it
  // is the process' only NIC, and stops the loop itself.
  NicServer(NicOptions options, boost::asio::io_context& io, ProcessHooks hooks = {});
  ~NicServer();

  // Binds the port and the sockets. Returns 0, or an exit code with *error set.
  int start(std::string* error);
  // Runs until SIGTERM/SIGINT.
  void run();
  void stop();
  // For a restart of the whole process: says so, flushes the trace, and returns the UDP
  // socket the new image keeps (-1: none); restart_failed logs why exec did not happen.
  int prepare_restart();
  void restart_failed(int error);

 private:
  struct Session;

  uint64_t now() const;
  int open_outputs(std::string* error);
  int start_tracing(std::string* error);
  void start_port();
  void add_session(int fd, const ucred& peer);
  void on_control_readable(Session* s);
  void serve_control(Session* s);
  void handle_message(Session* s, std::vector<uint8_t>& buf, std::vector<int>& fds);
  void refuse_message(Session* s, const std::vector<uint8_t>& buf, int status);
  std::string over_session_share(uid_t uid);
  void refuse_session(Session* s, std::vector<uint8_t>& buf, std::vector<int>& fds);
  void send_reply(Session* s, uint32_t op, service::ControlReply& reply);
  void send_pieces(Session* s, bool resume = false);
  bool alive(Session* s, uint64_t id) const;
  void close_session(Session* s);
  void watch_doorbell(Session* s);
  void watch_process(Session* s);
  void ring_held_doorbell(uint32_t context_id, uint64_t now);
  int check_client_fd(service::FdRole role, int fd, const service::ControlSession& s);
  void after_event();
  void busy_poll();
  void continue_pending_work();
  void arm_timer();
  void update_tracing();
  void write_device_files();
  void watch_for_viewer_wqes();
  std::string set_faults(const std::string& spec, int* status);
  std::string status_text();
  int daemon_alive_fd() const;
  int direct_send_socket();
  void wait_for_signals();
  void restart_in_place();

  NicOptions opt_;
  boost::asio::io_context& io_;
  ProcessHooks hooks_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer timer_;
  uint64_t timer_due_ = 0;
  uint64_t port_inode_ = 0;  // the UDP socket's, as LoopNics knows this NIC
  bool pending_posted_ = false;
  uint64_t busy_poll_found_ = 0;     // handlers the busy poll ran (events served without sleeping)
  uint64_t busy_poll_sleeps_ = 0;    // windows that ended with nothing to do: back to epoll
  uint64_t busy_poll_gave_way_ = 0;  // windows closed early: another task waited for a CPU
  CpuShare cpu_share_;
  SimClock clock_;

  StderrLogger logger_;
  ProcessMemory memory_;
  MemfdAllocator shm_;
  FdNotifier notifier_;
  PcapWriter pcap_;
  UdpPort port_;
  TraceHub trace_;
  core::Device device_;
  service::ControlDispatcher dispatcher_;
  std::unique_ptr<LidFile> lids_;  // IB mode only
  StepController step_;

  std::string socket_path_;
  std::string sysfs_root_;  // <dir>/<name>: the device's ibdev_path (sysfs_tree.h)
  ControlListener listener_;
  boost::asio::steady_timer viewer_watch_;  // while a viewer is attached: look at the RQs
  bool viewer_watch_armed_ = false;
  std::map<Session*, std::unique_ptr<Session>> sessions_;
  uint64_t next_session_id_ = 1;
  // Control connections per uid, held to SessionShares::per_user of the descriptor limit.
  std::map<uid_t, size_t> sessions_per_uid_;
  std::map<uid_t, size_t> refusals_pending_;  // connections over the share, awaiting their refusal
  rlim_t fd_limit_ = 0;
  size_t max_sessions_per_uid_ = 0;
  uint64_t sessions_refused_ = 0;
  int alive_fd_ = -1;  // simnicd's DaemonAlive page (abi/daemon_alive.h)
};

}  // namespace simnic::io
