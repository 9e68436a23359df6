// One simulated NIC as a process: the Asio event loop around the pure Device. It owns the
// UDP port, the control socket (the uverbs-like slow path), each context's doorbell, the
// transport timer, pcap and trace output, and step mode. Single-threaded: every Device call
// is on the loop.
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "simnic/core/control_dispatch.h"
#include "simnic/core/device.h"
#include "simnic/io/fd_notifier.h"
#include "simnic/io/host_memory_process.h"
#include "simnic/io/lid_file.h"
#include "simnic/io/pcap_writer.h"
#include "simnic/io/shm_memfd.h"
#include "simnic/io/sim_clock.h"
#include "simnic/io/trace_hub.h"
#include "simnic/io/udp_port.h"

namespace simnic::io {

struct NicOptions {
  core::DeviceConfig device;
  std::string dir;          // where the control and telemetry sockets live
  std::string pcap_path;    // empty: no capture
  std::string trace_path;   // empty: no trace file
  core::FaultConfig faults;
  bool verbose = false;
  bool start_paused = false;
  bool history = true;       // keep recent events for viewers that attach later (costs CPU)
  std::string lid_map;       // IB mode: the LID registry (default <dir>/lids)
  std::string iface;         // the interface holding device.ipv4 ("lo" for 127/8)
  uint32_t link_mtu = 0;     // its MTU in bytes; device.mtu_bytes fits in it unfragmented
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
  explicit NicServer(NicOptions options);
  ~NicServer();

  // Binds the port and the sockets. Returns 0, or an exit code with *error set.
  int start(std::string* error);
  // Runs until SIGTERM/SIGINT.
  void run();
  void stop();

 private:
  struct Session;
  // An input held back while the NIC is paused (step mode).
  struct HeldAction {
    enum Kind { kPacket, kDoorbell, kPending } kind;
    uint32_t src_ip = 0;
    uint16_t src_port = 0;
    std::vector<uint8_t> bytes;
    uint32_t context_id = 0;
    uint32_t dst_ip = 0;  // a packet's destination: 0 (this NIC) or a multicast group
  };

  uint64_t now() const;
  void accept_next();
  void accept_pending();
  void pause_accepting(int err);
  void add_session(int fd);
  void on_control_readable(Session* s);
  void serve_control(Session* s);
  void handle_message(Session* s, std::vector<uint8_t>& buf, std::vector<int>& fds);
  void refuse_message(Session* s, const std::vector<uint8_t>& buf, int status);
  bool alive(Session* s, uint64_t id) const;
  void close_session(Session* s);
  void watch_doorbell(Session* s);
  void watch_process(Session* s);
  int check_client_fd(core::FdRole role, int fd, const core::ControlSession& s);
  void after_event();
  void update_tracing();
  void watch_for_viewer_wqes();
  void perform(HeldAction& a);
  std::string step_command(const std::string& cmd, int* status);
  std::string set_faults(const std::string& spec, int* status);
  std::string status_text();

  NicOptions opt_;
  boost::asio::io_context io_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer timer_;
  uint64_t timer_due_ = 0;
  bool pending_posted_ = false;
  SimClock clock_;
  std::deque<HeldAction> held_;
  bool pending_held_ = false;

  StderrLogger logger_;
  ProcessMemory memory_;
  MemfdAllocator shm_;
  FdNotifier notifier_;
  PcapWriter pcap_;
  UdpPort port_;
  TraceHub trace_;
  core::Device device_;
  core::ControlDispatcher dispatcher_;
  std::unique_ptr<LidFile> lids_;  // IB mode only

  std::string socket_path_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> listener_;
  boost::asio::steady_timer accept_backoff_;  // out of descriptors: accept again later
  boost::asio::steady_timer viewer_watch_;    // while a viewer is attached: look at the RQs
  bool viewer_watch_armed_ = false;
  bool fd_exhaustion_logged_ = false;
  std::map<Session*, std::unique_ptr<Session>> sessions_;
  uint64_t next_session_id_ = 1;
};

}  // namespace simnic::io
