// The synchronous helpers built on the rest: rdma_getaddrinfo, rdma_create_ep and
// rdma_destroy_ep, rdma_get_request (librdmacm's addrinfo.c and the end of cma.c).
#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "rdmacm/cma.h"

using namespace simnic::rdmacm;

namespace {

sockaddr* copy_addr(const sockaddr* a, socklen_t len) {
  auto* c = static_cast<sockaddr*>(std::calloc(1, std::max<size_t>(len, sizeof(sockaddr_storage))));
  if (c && a) std::memcpy(c, a, len);
  return c;
}

// rdma_getaddrinfo's answer for one IPv4 address (the only family simnic's NICs have).
int make_info(const addrinfo* ai, const rdma_addrinfo* hints, rdma_addrinfo** out) {
  auto* r = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  if (!r) return ENOMEM;
  r->ai_flags = hints ? hints->ai_flags : 0;
  r->ai_family = AF_INET;
  r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
  r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space
                     : r->ai_qp_type == IBV_QPT_UD ? RDMA_PS_UDP
                                                   : RDMA_PS_TCP;
  const bool passive = r->ai_flags & RAI_PASSIVE;
  sockaddr* a = copy_addr(ai->ai_addr, ai->ai_addrlen);
  if (!a) {
    std::free(r);
    return ENOMEM;
  }
  if (passive) {
    r->ai_src_addr = a;
    r->ai_src_len = sizeof(sockaddr_in);
  } else {
    r->ai_dst_addr = a;
    r->ai_dst_len = sizeof(sockaddr_in);
    if (hints && hints->ai_src_addr) {
      r->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len);
      r->ai_src_len = hints->ai_src_len;
    }
  }
  if (ai->ai_canonname) r->ai_dst_canonname = strdup(ai->ai_canonname);
  *out = r;
  return 0;
}

// Neither node nor service: rdma-core's addrinfo.c answers with the hints themselves: their
// flags, family, QP type and port space as given, and copies of the addresses they carry
// (ai_dst_len, ai_src_len bytes). libfabric's verbs provider resolves a peer it holds as a
// sockaddr this way. Only no node, no service and no hints at all is EINVAL.
int hints_only_info(const rdma_addrinfo* hints, rdma_addrinfo** res) {
  if (!hints) return fail(EINVAL);
  auto* r = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  if (!r) return fail(ENOMEM);
  r->ai_flags = hints->ai_flags;
  r->ai_family = hints->ai_family;
  r->ai_qp_type = hints->ai_qp_type;
  r->ai_port_space = hints->ai_port_space;
  bool nomem = false;
  if (hints->ai_dst_len && hints->ai_dst_addr) {
    r->ai_dst_addr = copy_addr(hints->ai_dst_addr, hints->ai_dst_len);
    r->ai_dst_len = hints->ai_dst_len;
    nomem |= !r->ai_dst_addr;
  }
  if (hints->ai_src_len && hints->ai_src_addr) {
    r->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len);
    r->ai_src_len = hints->ai_src_len;
    nomem |= !r->ai_src_addr;
  }
  if (nomem) {
    rdma_freeaddrinfo(r);
    return fail(ENOMEM);
  }
  *res = r;
  return 0;
}

}  // namespace

extern "C" {

int rdma_getaddrinfo(const char* node, const char* service, const struct rdma_addrinfo* hints,
                     struct rdma_addrinfo** res) {
  if (!res) return fail(EINVAL);
  if (!node && !service) return hints_only_info(hints, res);
  if (hints && hints->ai_family && hints->ai_family != AF_INET && hints->ai_family != AF_UNSPEC)
    return fail(EAFNOSUPPORT);
  addrinfo h{};
  h.ai_family = AF_INET;
  h.ai_socktype = SOCK_STREAM;
  if (hints && (hints->ai_flags & RAI_PASSIVE)) h.ai_flags |= AI_PASSIVE;
  if (hints && (hints->ai_flags & RAI_NUMERICHOST)) h.ai_flags |= AI_NUMERICHOST;
  addrinfo* ai = nullptr;
  int rc = ::getaddrinfo(node, service, &h, &ai);
  if (rc) {
    // rdma-core returns getaddrinfo's code and sets errno from it.
    errno = rc == EAI_SYSTEM ? errno : rc == EAI_MEMORY ? ENOMEM : rc == EAI_NONAME ? ENOENT : EINVAL;
    return rc;
  }
  int e = make_info(ai, hints, res);
  ::freeaddrinfo(ai);
  return e ? fail(e) : 0;
}

void rdma_freeaddrinfo(struct rdma_addrinfo* res) {
  while (res) {
    rdma_addrinfo* next = res->ai_next;
    std::free(res->ai_src_addr);
    std::free(res->ai_dst_addr);
    std::free(res->ai_src_canonname);
    std::free(res->ai_dst_canonname);
    std::free(res->ai_route);
    std::free(res->ai_connect);
    std::free(res);
    res = next;
  }
}

int rdma_create_ep(struct rdma_cm_id** id, struct rdma_addrinfo* res, struct ibv_pd* pd,
                   struct ibv_qp_init_attr* qp_init_attr) {
  if (!id || !res) return fail(EINVAL);
  rdma_cm_id* cm_id = nullptr;
  if (rdma_create_id(nullptr, &cm_id, nullptr, rdma_port_space(res->ai_port_space))) return -1;
  auto* p = reinterpret_cast<CmaId*>(cm_id);
  int ret = 0;
  if (res->ai_flags & RAI_PASSIVE) {
    ret = rdma_bind_addr(cm_id, res->ai_src_addr);
    if (!ret && pd) cm_id->pd = pd;
    if (!ret && qp_init_attr) {
      p->qp_init_attr = new ibv_qp_init_attr(*qp_init_attr);
      p->qp_init_attr->qp_type = ibv_qp_type(res->ai_qp_type);
    }
  } else {
    ret = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000);
    if (!ret) ret = rdma_resolve_route(cm_id, 2000);
    if (!ret && qp_init_attr) {
      qp_init_attr->qp_type = ibv_qp_type(res->ai_qp_type);
      ret = rdma_create_qp(cm_id, pd, qp_init_attr);
    }
  }
  if (ret) {
    int e = errno;
    rdma_destroy_ep(cm_id);
    errno = e;
    return ret;
  }
  *id = cm_id;
  return 0;
}

void rdma_destroy_ep(struct rdma_cm_id* id) {
  if (!id) return;
  if (id->qp) rdma_destroy_qp(id);
  if (id->srq) rdma_destroy_srq(id);
  rdma_destroy_id(id);
}

int rdma_get_request(struct rdma_cm_id* listen, struct rdma_cm_id** id) {
  auto* p = reinterpret_cast<CmaId*>(listen);
  if (!p || !id || !p->sync) return fail(EINVAL);
  if (listen->event) {
    rdma_ack_cm_event(listen->event);
    listen->event = nullptr;
  }
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(listen->channel, &event)) return -1;
  int err = 0;
  if (event->event == RDMA_CM_EVENT_REJECTED) err = ECONNREFUSED;
  else if (event->status) err = event->status < 0 ? -event->status : EIO;
  else if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) err = EINVAL;
  if (!err && p->qp_init_attr) {
    ibv_qp_init_attr attr = *p->qp_init_attr;
    if (rdma_create_qp(event->id, listen->pd, &attr)) err = errno;
  }
  if (err) {
    rdma_ack_cm_event(event);
    return fail(err);
  }
  *id = event->id;
  (*id)->event = event;
  return 0;
}

}  // extern "C"
