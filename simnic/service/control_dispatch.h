// Decodes control-socket requests, calls the Device, encodes replies. No I/O: the I/O layer
// hands in the bytes and descriptors of one message and sends back what this returns.
#pragma once
#include <sys/types.h>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "simnic/abi/control.h"
#include "simnic/core/device.h"

namespace simnic::service {

// One control connection.
struct ControlSession {
  pid_t pid = 0;  // from SO_PEERCRED
  uid_t uid = 0;
  bool greeted = false;          // Hello seen
  core::Context* ctx = nullptr;  // set by a Hello that brought a doorbell (an ibv_context)
  uint32_t cm_client = 0;        // set by the first rdma_cm request (librdmacm's connection)
};

// What a descriptor passed by a client is for; the I/O layer checks that it fits (see Hooks).
// kCmChannel: an rdma_cm event channel, a SOCK_STREAM socket (a SEQPACKET one would hold only
// net.unix.max_dgram_qlen events, 10 by default, and a busy listener gets more).
enum class FdRole { kDoorbell, kEventSocket, kCmChannel };

struct ControlReply {
  int status = 0;  // 0 or a positive errno
  std::vector<uint8_t> body;
  std::vector<int> fds;  // sent with the reply, then closed by the I/O layer
};

class ControlDispatcher {
 public:
  // What the I/O layer adds: fault injection lives at the port, and status has I/O lines.
  struct Hooks {
    std::function<std::string(const std::string& spec, int* status)> set_faults;
    std::function<std::string()> extra_status;
    std::function<std::string(const std::string& command, int* status)> step;
    // 0 when `fd` may serve as `role` for this session, else the errno to refuse with. Unset
    // (tests): every descriptor is taken as it is.
    std::function<int(FdRole role, int fd, const ControlSession& s)> check_fd;
    // The device and inode of the file `fd` is open on (fstat): 0, or the errno to refuse
    // ibv_open_xrcd with. Unset: domains on files are refused (EOPNOTSUPP).
    std::function<int(int fd, uint64_t* dev, uint64_t* ino)> file_identity;
    // ibv_import_device: whether descriptor `their_fd` of process `pid` and our `fd` are the
    // same open file (kcmp). Unset: no context can be imported (EOPNOTSUPP).
    std::function<bool(pid_t pid, int their_fd, int fd)> same_file;
    // A new descriptor of simnicd's DaemonAlive page (abi/daemon_alive.h), sent with each
    // context's page so the shim sees a dead NIC on every post; -1 or unset (tests): none.
    std::function<int()> daemon_alive_fd;
    // A new descriptor of the NIC's UDP socket, for a program that sends its QPs' lent PSNs
    // itself (abi/direct_send.h); -1 or unset: the NIC lends nothing.
    std::function<int()> direct_send_socket;
  };

  ControlDispatcher(core::Device& device, pid_t daemon_pid, Hooks hooks = {});

  // Handles one request. Descriptors the request brought and the dispatcher keeps are set
  // to -1 in `fds`; the caller closes the rest.
  ControlReply handle(ControlSession& s, abi::Op op, std::span<const uint8_t> body, std::vector<int>& fds,
                      uint64_t now);

  // The connection closed: free what it created.
  void close(ControlSession& s);

 private:
  // The checks the op's table line asks for (control_ops.h), then its handler.
  ControlReply handle_op(ControlSession& s, abi::Op op, std::span<const uint8_t> body, std::vector<int>& fds,
                         uint64_t now);

  core::Device& dev_;
  pid_t daemon_pid_;
  Hooks hooks_;
};

}  // namespace simnic::service
