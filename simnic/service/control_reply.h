// The small pieces every part of the control dispatcher (control_dispatch.cc, its XRC and
// rdma_cm parts) builds requests and replies with: one copy, so they cannot drift apart.
#pragma once
#include <cstdint>
#include <cstring>
#include <span>

#include "simnic/core/env.h"
#include "simnic/service/control_dispatch.h"

namespace simnic::service::control {

// A request body is exactly one struct of the expected size, or it is refused.
template <class T>
bool decode(std::span<const uint8_t> body, T* out) {
  if (body.size() != sizeof(T)) return false;
  std::memcpy(static_cast<void*>(out), body.data(), sizeof(T));
  return true;
}

template <class T>
ControlReply ok(const T& v) {
  ControlReply r;
  r.body.resize(sizeof(T));
  std::memcpy(r.body.data(), &v, sizeof(T));
  return r;
}

inline ControlReply fail(int status) {
  ControlReply r;
  r.status = status;
  return r;
}

// Moves the memfd of a shared region into the reply.
inline void attach(ControlReply& r, core::ShmRegion& mem) {
  if (mem.fd >= 0) {
    r.fds.push_back(mem.fd);
    mem.fd = -1;
  }
}

// A reply struct with the region's memfd (rings the client maps).
template <class T>
ControlReply ok(const T& v, core::ShmRegion& mem) {
  ControlReply r = ok(v);
  attach(r, mem);
  return r;
}

}  // namespace simnic::service::control
