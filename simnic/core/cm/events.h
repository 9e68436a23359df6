// The rdma_cm event channels of the programs using this NIC, and the events sent on them
// (cm/events.cc). Owns the channels (a socket each, handed over by the I/O layer) and which
// client owns each. Calls Notifier (send_event, release_fd), CmIdTable (a channel's handle),
// Tracer and Logger.
#pragma once
#include <cstdint>
#include <map>

#include "simnic/abi/cm_bodies.h"
#include "simnic/core/cm/cm_id.h"
#include "simnic/core/env.h"
#include "simnic/core/observe/trace.h"

namespace simnic::core {

class CmIdTable;

class CmEvents {
 public:
  CmEvents(const CmNicInfo& nic, CmIdTable& ids, Notifier& notifier, Tracer& tracer, Logger& logger)
      : nic_(nic), ids_(ids), notifier_(notifier), tracer_(tracer), logger_(logger) {}
  ~CmEvents();

  // --- Channels ---
  int attach(uint32_t client, int fd, uint32_t* handle);  // takes fd
  bool owns(uint32_t client, uint32_t channel) const;
  void close_client(uint32_t client);  // releases the client's channels

  // --- Events ---
  abi::CmEventMsg event_for(const CmId& id, uint32_t type, int32_t status = 0) const;
  void deliver(const CmId& id, abi::CmEventMsg ev);  // on the id's channel, traced

 private:
  struct Channel {
    uint32_t client = 0;
    int fd = -1;
  };
  const CmNicInfo& nic_;
  CmIdTable& ids_;
  Notifier& notifier_;
  Tracer& tracer_;
  Logger& logger_;
  std::map<uint32_t, Channel> channels_;
};

}  // namespace simnic::core
