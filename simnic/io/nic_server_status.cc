// The lines NicServer adds to `simnic status` (the I/O side: sockets, fault injector, step
// mode, outputs) and `simnic fault`'s run-time change of the fault injector.
#include <unistd.h>

#include <cerrno>

#include "simnic/io/nic_server.h"

namespace simnic::io {

// Lines `simnic status` shows beyond the Device's own.
std::string NicServer::status_text() {
  std::string s = "pid " + std::to_string(::getpid()) + "\n";
  s += "faults " + port_.faults().describe() + "\n";
  s += "fault_drops " + std::to_string(port_.fault_drops()) + "\n";
  s += "fault_dups " + std::to_string(port_.fault_dups()) + "\n";
  s += "fault_delayed " + std::to_string(port_.fault_delayed()) + "\n";
  s += "tx_socket_drops " + std::to_string(port_.tx_dropped()) + "\n";
  s += "tx_too_big " + std::to_string(port_.tx_too_big()) + "\n";
  s += "gso " + std::string(port_.gso() ? "1" : "0") + "\n";
  const UdpPort::GsoMode mode = port_.gso_mode();
  s += "gso_mode " +
       std::string(mode == UdpPort::GsoMode::kOn    ? "on"
                   : mode == UdpPort::GsoMode::kOff ? "off"
                                                    : "auto") +
       "\n";
  s += "gso_capture_seen " + std::to_string(port_.gso_capture_seen()) + "\n";
  s += "tx_send_calls " + std::to_string(port_.tx_send_calls()) + "\n";
  s += "tx_gso_sends " + std::to_string(port_.tx_gso_sends()) + "\n";
  s += "rx_gro_buffers " + std::to_string(port_.rx_gro_buffers()) + "\n";
  s += "busy_poll_us " + std::to_string(opt_.busy_poll_us) + "\n";
  s += "busy_poll_found " + std::to_string(busy_poll_found_) + "\n";
  s += "busy_poll_sleeps " + std::to_string(busy_poll_sleeps_) + "\n";
  s += "busy_poll_gave_way " + std::to_string(busy_poll_gave_way_) + "\n";
  if (!opt_.iface.empty()) s += "iface " + opt_.iface + "\nlink_mtu " + std::to_string(opt_.link_mtu) + "\n";
  // An rx_drop_* line, so `simnic status` counts it under DROPS with the Device's own.
  s += "rx_drop_socket_overflow " + std::to_string(port_.rx_overflow_drops()) + "\n";
  s += "rx_socket_buffer " + std::to_string(port_.receive_buffer_bytes()) + "\n";
  s += "rx_socket_buffer_forced " + std::string(port_.receive_buffer_forced() ? "1" : "0") + "\n";
  // Shared pages (issue 26 point 4): MRs the NIC reaches with memcpy, and the bytes it moved
  // that way and by process_vm_* (the fallback).
  const ProcessMemory::Stats mem = memory_.stats();
  s += "shared_views " + std::to_string(mem.views) + "\n";
  s += "shared_view_bytes " + std::to_string(mem.view_bytes) + "\n";
  s += "dma_bytes_shared " + std::to_string(mem.copied_shared) + "\n";
  s += "dma_bytes_by_pid " + std::to_string(mem.copied_by_pid) + "\n";
  s += "event_drops " + std::to_string(notifier_.dropped()) + "\n";
  s += "paused " + std::string(clock_.paused() ? "1" : "0") + "\n";
  s += "trace_subscribers " + std::to_string(trace_.subscribers()) + "\n";
  if (!opt_.pcap_path.empty()) s += "pcap " + opt_.pcap_path + "\n";
  if (!opt_.trace_path.empty()) s += "trace " + opt_.trace_path + "\n";
  s += pcap_.file().status_lines() + trace_.file().status_lines();  // sizes, limits, records lost
  return s;
}

std::string NicServer::set_faults(const std::string& spec, int* status) {
  std::string err;
  if (!port_.faults().apply_spec(spec, &err)) {
    *status = EINVAL;
    return err;
  }
  logger_.log(core::LogLevel::kInfo, "faults now " + port_.faults().describe());
  return port_.faults().describe();
}

}  // namespace simnic::io
