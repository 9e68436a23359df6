// Event channels, ids, addresses: rdma_create_event_channel .. rdma_listen, and the id
// registry events use to find their id (an event for an id already destroyed is dropped, as
// the kernel drops the events of a destroyed ucma context).
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>

#include "rdmacm/cma.h"

namespace simnic::rdmacm {
namespace {

std::mutex g_ids_mu;
std::map<uint64_t, CmaId*> g_ids;
std::atomic<uint64_t> g_next_cookie{1};

uint32_t ipv4_of(const sockaddr* a, bool* any) {
  *any = false;
  if (a->sa_family == AF_INET) {
    uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr);
    *any = ip == INADDR_ANY;
    return ip;
  }
  const auto* s6 = reinterpret_cast<const sockaddr_in6*>(a);
  if (IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr)) {
    *any = true;
    return 0;
  }
  uint32_t ip;
  std::memcpy(&ip, s6->sin6_addr.s6_addr + 12, 4);
  return ntohl(ip);
}

bool is_loopback(uint32_t ip) { return (ip >> 24) == 127; }  // ipv4_is_loopback: 127.0.0.0/8

uint16_t port_of(const sockaddr* a) {
  return ntohs(a->sa_family == AF_INET ? reinterpret_cast<const sockaddr_in*>(a)->sin_port
                                       : reinterpret_cast<const sockaddr_in6*>(a)->sin6_port);
}

bool family_ok(const sockaddr* a) {
  if (!a) return false;
  if (a->sa_family == AF_INET) return true;
  if (a->sa_family != AF_INET6) return false;
  const auto* s6 = reinterpret_cast<const sockaddr_in6*>(a);
  return IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr) || IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr);
}

// Binds the id to `nic`: a handle there, the port, the device and the source address.
int bind_to_nic(CmaId* p, Nic* nic, uint16_t port) {
  if (int e = open_nic(nic)) return e;
  uint32_t h = 0;
  if (int e = create_nic_id(p, nic, &h)) return e;
  abi::CmBindReq req{h, port, 0};
  abi::CmBindReply rep{};
  if (int e = nic_call(nic, abi::Op::CmBind, &req, sizeof req, &rep, sizeof rep)) {
    abi::HandleReq d{h, 0};
    nic_call(nic, abi::Op::CmDestroyId, &d, sizeof d, nullptr, 0);
    return e;
  }
  p->nic = nic;
  p->handle = h;
  p->port = rep.port;
  p->id.verbs = nic->verbs;
  p->id.pd = nic->pd;
  p->id.port_num = 1;
  set_sin(&p->id.route.addr.src_sin, nic->ipv4, rep.port);
  gid_of(nic->ipv4, &p->id.route.addr.addr.ibaddr.sgid);
  p->id.route.addr.addr.ibaddr.pkey = 0xffff;
  return 0;
}

void destroy_listeners(CmaId* p) {
  for (auto& [nic, h] : p->listeners) {
    abi::HandleReq d{h, 0};
    nic_call(nic, abi::Op::CmDestroyId, &d, sizeof d, nullptr, 0);
  }
  p->listeners.clear();
}

// The wildcard address: the port is reserved on every NIC now, as the kernel reserves it at
// bind time (rdma_get_src_port works before rdma_listen, and a listen is then immediate); the
// first NIC picks it when the program asked for port 0. rdma_listen listens on all of them
// (the kernel's cma_listen_on_all); rdma_resolve_addr keeps the one it goes out through.
int bind_any(CmaId* p, uint16_t port) {
  std::vector<Nic*> nics = all_nics();
  if (nics.empty()) {
    explain("rdma_bind_addr: no simnic NIC is running (start them with `simnic up`)");
    return ENODEV;
  }
  for (Nic* nic : nics) {
    if (open_nic(nic)) continue;
    uint32_t h = 0;
    if (create_nic_id(p, nic, &h)) continue;
    abi::CmBindReq b{h, port, 0};
    abi::CmBindReply r{};
    if (int e = nic_call(nic, abi::Op::CmBind, &b, sizeof b, &r, sizeof r)) {
      abi::HandleReq d{h, 0};
      nic_call(nic, abi::Op::CmDestroyId, &d, sizeof d, nullptr, 0);
      if (e == EADDRINUSE) {
        destroy_listeners(p);
        return EADDRINUSE;
      }
      continue;
    }
    port = r.port;
    p->listeners.emplace_back(nic, h);
  }
  if (p->listeners.empty()) return ENODEV;
  p->bound_any = true;
  p->port = port;
  return 0;
}

}  // namespace

void register_id(CmaId* p) {
  std::lock_guard lock(g_ids_mu);
  p->cookie = g_next_cookie++;
  g_ids[p->cookie] = p;
}

void unregister_id(CmaId* p) {
  std::lock_guard lock(g_ids_mu);
  g_ids.erase(p->cookie);
}

CmaId* lookup_id(uint64_t cookie) {
  std::lock_guard lock(g_ids_mu);
  auto it = g_ids.find(cookie);
  return it == g_ids.end() ? nullptr : it->second;
}

int create_nic_id(CmaId* p, Nic* nic, uint32_t* handle) {
  uint32_t ch = 0;
  if (int e = attach_channel(p->channel(), nic, &ch)) return e;
  abi::CmCreateIdReq req{ch, uint16_t(p->id.ps), 0, uint32_t(p->id.qp_type), 0, p->cookie};
  abi::HandleReply rep{};
  if (int e = nic_call(nic, abi::Op::CmCreateId, &req, sizeof req, &rep, sizeof rep)) return e;
  *handle = rep.handle;
  return 0;
}

// An event librdmacm makes itself (address and route resolution), queued on the id's channel
// behind whatever the NICs sent.
int post_local_event(CmaId* p, uint32_t type, int32_t status, uint32_t remote_ip, uint64_t context) {
  abi::CmEventMsg ev{};
  ev.cookie = p->cookie;
  ev.event = type;
  ev.status = status;
  ev.local_ip = ntohl(p->id.route.addr.src_sin.sin_addr.s_addr);
  ev.remote_ip = remote_ip ? remote_ip : ntohl(p->id.route.addr.dst_sin.sin_addr.s_addr);
  std::memcpy(ev.private_data, &context, sizeof context);  // multicast: the caller's context
  if (::send(p->channel()->write_fd, &ev, sizeof ev, MSG_NOSIGNAL) != ssize_t(sizeof ev)) return errno;
  return 0;
}

}  // namespace simnic::rdmacm

using namespace simnic::rdmacm;
namespace abi = simnic::abi;

extern "C" {

struct rdma_event_channel* rdma_create_event_channel(void) {
  int sv[2];
  // A stream, not SEQPACKET: a datagram queue holds net.unix.max_dgram_qlen (10) events.
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return nullptr;
  int big = 4 << 20;  // events wait here until the program reads them
  ::setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  ::setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  auto* ch = new CmaChannel;
  ch->ch.fd = sv[0];
  ch->write_fd = sv[1];
  return &ch->ch;
}

void rdma_destroy_event_channel(struct rdma_event_channel* channel) {
  if (!channel) return;
  auto* ch = reinterpret_cast<CmaChannel*>(channel);
  ::close(ch->ch.fd);
  ::close(ch->write_fd);
  delete ch;
}

int rdma_create_id(struct rdma_event_channel* channel, struct rdma_cm_id** id, void* context, enum rdma_port_space ps) {
  if (!id) return fail(EINVAL);
  ibv_qp_type type;
  switch (ps) {
    case RDMA_PS_TCP:
    case RDMA_PS_IB: type = IBV_QPT_RC; break;
    case RDMA_PS_UDP:
    case RDMA_PS_IPOIB: type = IBV_QPT_UD; break;
    default: return fail(EINVAL);
  }
  auto* p = new CmaId;
  std::memset(&p->id, 0, sizeof p->id);
  p->id.context = context;
  p->id.ps = ps;
  p->id.qp_type = type;
  if (!channel) {  // a synchronous id: its own channel, and calls wait for their event
    channel = rdma_create_event_channel();
    if (!channel) {
      delete p;
      return -1;
    }
    p->sync = true;
  }
  p->id.channel = channel;
  register_id(p);
  *id = &p->id;
  return 0;
}

int rdma_destroy_id(struct rdma_cm_id* id) {
  if (!id) return fail(EINVAL);
  auto* p = reinterpret_cast<CmaId*>(id);
  unregister_id(p);
  leave_all_groups(p);
  if (p->nic) {
    abi::HandleReq req{p->handle, 0};
    nic_call(p->nic, abi::Op::CmDestroyId, &req, sizeof req, nullptr, 0);
  }
  for (auto& [nic, h] : p->listeners) {
    abi::HandleReq req{h, 0};
    nic_call(nic, abi::Op::CmDestroyId, &req, sizeof req, nullptr, 0);
  }
  if (id->event) rdma_ack_cm_event(id->event);
  if (p->sync) rdma_destroy_event_channel(id->channel);
  delete p->qp_init_attr;
  std::free(id->route.path_rec);
  delete p;
  return 0;
}

int rdma_bind_addr(struct rdma_cm_id* id, struct sockaddr* addr) {
  if (!id || !family_ok(addr)) return fail(addr && id ? EAFNOSUPPORT : EINVAL);
  auto* p = reinterpret_cast<CmaId*>(id);
  if (p->nic || p->bound_any) return fail(EINVAL);
  bool any = false;
  const uint32_t ip = ipv4_of(addr, &any);
  const uint16_t port = port_of(addr);
  Nic* nic = any ? nullptr : nic_by_ip(ip);
  if (any || (!nic && is_loopback(ip))) {
    // The kernel's rdma_bind_addr treats a loopback address like the wildcard (cma_any_addr:
    // cma_zero_addr || cma_loopback_addr): no device is acquired, id->verbs stays NULL, the
    // address is kept as given, and rdma_listen then listens on every device. A 127/8
    // address a simnic NIC has is that NIC's address instead (simnic's hosts live on 127/8).
    if (int e = bind_any(p, port)) return fail(e);
    set_sin(&id->route.addr.src_sin, any ? 0 : ip, p->port);
    return 0;
  }
  if (!nic) {
    char text[INET_ADDRSTRLEN];
    const in_addr a{htonl(ip)};
    explain("rdma_bind_addr: no simnic NIC has the address %s (see `simnic status`)",
            inet_ntop(AF_INET, &a, text, sizeof text));
    return fail(EADDRNOTAVAIL);
  }
  if (int e = bind_to_nic(p, nic, port)) return fail(e);
  return 0;
}

int rdma_resolve_addr(struct rdma_cm_id* id, struct sockaddr* src_addr, struct sockaddr* dst_addr, int) {
  if (!id || !family_ok(dst_addr)) return fail(dst_addr && id ? EAFNOSUPPORT : EINVAL);
  auto* p = reinterpret_cast<CmaId*>(id);
  if (src_addr && !p->nic && !p->bound_any && rdma_bind_addr(id, src_addr)) return -1;
  bool any = false;
  const uint32_t dst = ipv4_of(dst_addr, &any);
  if (any) return fail(EADDRNOTAVAIL);
  if (!p->nic) {
    Nic* nic = nic_for_destination(dst);
    if (!nic) {
      explain("rdma_resolve_addr: no simnic NIC is running (start them with `simnic up`)");
      return fail(ENODEV);
    }
    if (!p->listeners.empty()) destroy_listeners(p);  // the port is free again for bind_to_nic
    if (int e = bind_to_nic(p, nic, p->port)) return fail(e);
  }
  set_sin(&id->route.addr.dst_sin, dst, port_of(dst_addr));
  gid_of(dst, &id->route.addr.addr.ibaddr.dgid);
  if (int e = post_local_event(p, RDMA_CM_EVENT_ADDR_RESOLVED, 0)) return fail(e);
  return ucma_complete(p);
}

// The route of RoCE v2 between two IPv4 addresses: the GIDs and the port's MTU, no SA query.
int rdma_resolve_route(struct rdma_cm_id* id, int) {
  if (!id) return fail(EINVAL);
  auto* p = reinterpret_cast<CmaId*>(id);
  if (!p->nic || !id->route.addr.dst_sin.sin_addr.s_addr) return fail(EINVAL);
  ibv_port_attr port{};
  ibv_query_port(id->verbs, 1, &port);
  auto* rec = static_cast<ibv_sa_path_rec*>(std::calloc(1, sizeof(ibv_sa_path_rec)));
  if (!rec) return fail(ENOMEM);
  rec->sgid = id->route.addr.addr.ibaddr.sgid;
  rec->dgid = id->route.addr.addr.ibaddr.dgid;
  rec->pkey = htons(0xffff);
  rec->mtu = port.active_mtu;
  rec->mtu_selector = 2;  // exactly
  rec->rate_selector = 2;
  rec->rate = 3;  // 10 Gb/s (IBA Table 205 code 3)
  rec->packet_life_time_selector = 2;
  rec->packet_life_time = 16;
  rec->hop_limit = 64;
  rec->reversible = 1;
  rec->numb_path = 1;
  std::free(id->route.path_rec);
  id->route.path_rec = rec;
  id->route.num_paths = 1;
  if (int e = post_local_event(p, RDMA_CM_EVENT_ROUTE_RESOLVED, 0)) return fail(e);
  return ucma_complete(p);
}

int rdma_listen(struct rdma_cm_id* id, int backlog) {
  if (!id) return fail(EINVAL);
  auto* p = reinterpret_cast<CmaId*>(id);
  if (p->nic) {
    abi::CmListenReq req{p->handle, backlog};
    if (int e = nic_call(p->nic, abi::Op::CmListen, &req, sizeof req, nullptr, 0)) return fail(e);
    return 0;
  }
  if (!p->bound_any || p->listeners.empty()) return fail(EINVAL);
  for (auto& [nic, h] : p->listeners) {
    abi::CmListenReq req{h, backlog};
    if (int e = nic_call(nic, abi::Op::CmListen, &req, sizeof req, nullptr, 0)) return fail(e);
  }
  return 0;
}

int rdma_migrate_id(struct rdma_cm_id* id, struct rdma_event_channel* channel) {
  if (!id) return fail(EINVAL);
  auto* p = reinterpret_cast<CmaId*>(id);
  bool made = false;
  if (!channel) {
    channel = rdma_create_event_channel();
    if (!channel) return -1;
    made = true;
  }
  auto* ch = reinterpret_cast<CmaChannel*>(channel);
  auto move = [&](Nic* nic, uint32_t h) {
    uint32_t chh = 0;
    if (int e = attach_channel(ch, nic, &chh)) return e;
    abi::CmMigrateReq req{h, chh, p->cookie};
    return nic_call(nic, abi::Op::CmMigrateId, &req, sizeof req, nullptr, 0);
  };
  int e = p->nic ? move(p->nic, p->handle) : 0;
  for (auto& [nic, h] : p->listeners)
    if (!e) e = move(nic, h);
  if (e) {
    if (made) rdma_destroy_event_channel(channel);
    return fail(e);
  }
  if (p->sync) rdma_destroy_event_channel(id->channel);
  p->sync = made;
  id->channel = channel;
  return 0;
}

__be16 rdma_get_src_port(struct rdma_cm_id* id) { return id->route.addr.src_sin.sin_port; }
__be16 rdma_get_dst_port(struct rdma_cm_id* id) { return id->route.addr.dst_sin.sin_port; }

}  // extern "C"
