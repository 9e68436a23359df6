// librdmacm's internals: the objects behind rdma_cm_id and rdma_event_channel, and the NICs.
//
// Each rdma_cm_id the program holds is the first member of a CmaId, as rdma-core's
// cma_id_private; each event channel the first member of a CmaChannel. An id bound to one NIC
// has one handle in that NIC's connection manager (simnicd's CmAgent); a listener on the
// wildcard address has one per NIC, as the kernel's cma makes one listener per device.
#pragma once
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "simnic/abi/cm.h"

namespace simnic::rdmacm {

// One simnic NIC, found in the simnic directory; its control connection (query-only, used
// for the CM requests) and its verbs context (for id->verbs and the default PD) are opened on
// first use and kept for the life of the process, as librdmacm keeps its devices open.
struct Nic {
  std::string name;
  std::string socket_path;
  uint32_t ipv4 = 0;  // host order
  int fd = -1;
  std::mutex mu;  // one request/reply at a time on fd
  ibv_context* verbs = nullptr;
  ibv_pd* pd = nullptr;  // the default PD (rdma_create_qp with NULL pd, rdma_reg_msgs on ep ids)
  ibv_device_attr attr{};
};

struct CmaChannel {
  rdma_event_channel ch;                            // first: ch.fd is the read end of a SOCK_STREAM socketpair
  int write_fd = -1;                                // the other end: given to each NIC, and used for local events
  std::vector<std::pair<Nic*, uint32_t>> attached;  // the NICs that have it, with its handle there
};

struct CmaId {
  rdma_cm_id id;                                     // first: the program holds &id
  uint64_t cookie = 0;                               // how events find it
  bool sync = false;                                 // created with a NULL channel: calls wait for their event
  Nic* nic = nullptr;                                // bound to a device
  uint32_t handle = 0;                               // on nic
  std::vector<std::pair<Nic*, uint32_t>> listeners;  // wildcard listen: one per NIC
  bool bound_any = false;
  uint16_t port = 0;                                     // host order, once bound
  uint8_t initiator_depth = 0, responder_resources = 0;  // from CONNECT_REQUEST, for accept
  bool connect_error = false;
  uint8_t ack_timeout = 0;                           // RDMA_OPTION_ID_ACK_TIMEOUT, 0 = the CM's
  ibv_qp_init_attr* qp_init_attr = nullptr;          // rdma_create_ep on a listener: for rdma_get_request
  std::vector<std::pair<uint32_t, bool>> mc_groups;  // joined IPv4 groups, and whether the QP is attached
  CmaChannel* channel() { return reinterpret_cast<CmaChannel*>(id.channel); }
};

struct CmaEvent {
  rdma_cm_event event;  // first: the program holds &event
  uint8_t private_data[abi::kCmMaxPrivateData];
  CmaId* id_priv = nullptr;
};

// nics.cc
Nic* nic_by_ip(uint32_t ipv4);  // rescans the directory once if unknown
Nic* nic_for_destination(uint32_t dst_ipv4);
std::vector<Nic*> all_nics();
int open_nic(Nic* nic);  // connection and verbs context; 0 or errno
// One CM request on the NIC's connection: 0 or a positive errno (printed if SIMNIC_EXPLAIN).
int nic_call(Nic* nic, abi::Op op, const void* req, size_t len, void* reply, size_t reply_len,
             const std::vector<int>& fds = {});
int attach_channel(CmaChannel* ch, Nic* nic, uint32_t* handle);

// multicast.cc
void leave_all_groups(CmaId* p);

// An IPv4 address and port (host order) as a sockaddr_in.
inline void set_sin(sockaddr_in* s, uint32_t ip, uint16_t port) {
  std::memset(s, 0, sizeof *s);
  s->sin_family = AF_INET;
  s->sin_addr.s_addr = htonl(ip);
  s->sin_port = htons(port);
}

// The IPv4-mapped GID of RoCE v2 for an address (host order).
inline void gid_of(uint32_t ip, ibv_gid* g) {
  std::memset(g, 0, sizeof *g);
  g->raw[10] = g->raw[11] = 0xff;
  uint32_t be = htonl(ip);
  std::memcpy(g->raw + 12, &be, 4);
}

// The group GID rdma_join_multicast gives an IPv4 address (host order), as the kernel's
// cma_iboe_set_mgid: a multicast address becomes its RoCE v2 form ::ffff:a.b.c.d; any other
// (non-zero) address becomes ff0e::ffff:a.b.c.d, the form the kernel gives it for RoCE v1 and
// InfiniBand. That one is a multicast GID (ff00::/8) that ibv_attach_mcast accepts, where
// ::ffff:<unicast> is refused by ib_attach_mcast's rdma_is_multicast_addr.
inline void group_gid_of(uint32_t ip, ibv_gid* g) {
  gid_of(ip, g);
  if (!IN_MULTICAST(ip)) g->raw[0] = 0xff, g->raw[1] = 0x0e;
}

// ids.cc
void register_id(CmaId* p);
void unregister_id(CmaId* p);
CmaId* lookup_id(uint64_t cookie);
int post_local_event(CmaId* p, uint32_t type, int32_t status, uint32_t remote_ip = 0, uint64_t context = 0);
int create_nic_id(CmaId* p, Nic* nic, uint32_t* handle);
int ucma_complete(CmaId* p);
int modify_qp_to(CmaId* p, ibv_qp_state state, int override_rd_atomic);
void modify_qp_err(CmaId* p);

inline int fail(int err) {
  errno = err;
  return -1;
}

void explain(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace simnic::rdmacm
