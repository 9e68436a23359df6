// The rdma_cm event channels and the events sent on them.
#include "simnic/core/cm/events.h"

#include <string>

#include "simnic/core/cm/id_table.h"

namespace simnic::core {

CmEvents::~CmEvents() {
  for (auto& [h, ch] : channels_) notifier_.release_fd(ch.fd);
}

int CmEvents::attach(uint32_t client, int fd, uint32_t* handle) {
  size_t mine = 0;
  for (auto& [h, ch] : channels_) mine += ch.client == client;
  if (mine >= 1024) {
    notifier_.release_fd(fd);
    return ENOMEM;
  }
  *handle = ids_.new_handle();
  channels_[*handle] = Channel{client, fd};
  return 0;
}

bool CmEvents::owns(uint32_t client, uint32_t channel) const {
  auto ch = channels_.find(channel);
  return ch != channels_.end() && ch->second.client == client;
}

void CmEvents::close_client(uint32_t client) {
  for (auto it = channels_.begin(); it != channels_.end();) {
    if (it->second.client != client) {
      ++it;
      continue;
    }
    notifier_.release_fd(it->second.fd);
    it = channels_.erase(it);
  }
}

abi::CmEventMsg CmEvents::event_for(const CmId& id, uint32_t type, int32_t status) const {
  abi::CmEventMsg ev{};
  ev.cookie = id.cookie;
  ev.event = type;
  ev.status = status;
  ev.nic_ip = nic_.ipv4;
  ev.local_ip = nic_.ipv4;
  ev.remote_ip = id.remote_ip;
  ev.local_port = id.local_port;
  ev.remote_port = id.remote_port;
  ev.qp_num = id.remote_qpn;
  ev.qkey = id.remote_qkey;
  ev.responder_resources = id.responder_resources;
  ev.initiator_depth = id.initiator_depth;
  ev.retry_count = id.retry_count;
  ev.rnr_retry_count = id.rnr_retry_count;
  return ev;
}

void CmEvents::deliver(const CmId& id, abi::CmEventMsg ev) {
  static const char* kNames[] = {"ADDR_RESOLVED",   "ADDR_ERROR",       "ROUTE_RESOLVED", "ROUTE_ERROR",
                                 "CONNECT_REQUEST", "CONNECT_RESPONSE", "CONNECT_ERROR",  "UNREACHABLE",
                                 "REJECTED",        "ESTABLISHED",      "DISCONNECTED",   "DEVICE_REMOVAL",
                                 "MULTICAST_JOIN",  "MULTICAST_ERROR",  "ADDR_CHANGE",    "TIMEWAIT_EXIT"};
  tracer_.event(TraceKind::kCmEvent)
      .u("id", id.handle)
      .s("event", ev.event < 16 ? kNames[ev.event] : "?")
      .i("status", ev.status);
  auto ch = channels_.find(id.channel);
  if (ch == channels_.end()) return;
  if (!notifier_.send_event(ch->second.fd, &ev, sizeof ev))
    logger_.log(LogLevel::kWarn, "rdma_cm id " + std::to_string(id.handle) +
                                     ": an event was lost (the program does "
                                     "not read its event channel)");
}

}  // namespace simnic::core
