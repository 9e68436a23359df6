// Whether simnicd may keep a CPU busy while it waits for work (NicServer's busy poll). On two
// vCPUs a NIC that spins while an application or the other NIC waits for a CPU delays exactly
// the process that would have given it work: it may spin only while every runnable task on the
// machine has a CPU of its own.
#pragma once

namespace simnic::io {

class CpuShare {
 public:
  CpuShare();
  ~CpuShare();
  CpuShare(const CpuShare&) = delete;
  CpuShare& operator=(const CpuShare&) = delete;

  // True when the tasks running or waiting to run (this one included) are no more than the
  // online CPUs, so spinning takes a CPU nobody waits for. False when anyone waits, and when
  // the count cannot be read (no /proc): then the NIC sleeps, as without a busy poll.
  bool nobody_waits() const;

 private:
  int loadavg_fd_ = -1;  // /proc/loadavg, read again at offset 0 for the current count
  long cpus_ = 1;
};

// The "running" count of a /proc/loadavg line ("0.20 0.18 0.12 3/118 4242": 3); -1 if malformed.
long runnable_in_loadavg(const char* line);

}  // namespace simnic::io
