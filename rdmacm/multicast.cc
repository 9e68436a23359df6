// rdma_join_multicast / rdma_leave_multicast for RoCE v2: an IPv4 multicast address is the
// group whose GID is its IPv4-mapped form (::ffff:a.b.c.d), and any other non-zero IPv4 address
// the group ff0e::ffff:a.b.c.d (group_gid_of, as the kernel's cma_iboe_join_multicast, which
// refuses only the zero address); the group is joined by attaching the id's UD QP
// with ibv_attach_mcast; there is no SA to ask, so the join completes at once with
// RDMA_CM_EVENT_MULTICAST_JOIN, whose ud param carries the group's address handle attributes,
// QPN 0xFFFFFF and the Q_Key RDMA_UDP_QKEY (kernel cma_iboe_join_multicast).
#include <arpa/inet.h>

#include <cstring>

#include "rdmacm/cma.h"

namespace simnic::rdmacm {
namespace {

ibv_gid group_gid(uint32_t ip) {
  ibv_gid g{};
  group_gid_of(ip, &g);
  return g;
}

// The group an address names: any IPv4 address but 0.0.0.0 (kernel cma_iboe_join_multicast:
// cma_zero_addr is -EINVAL). simnic's wire is IPv4 only: an IPv6 group is refused.
bool group_of(const sockaddr* a, uint32_t* ip) {
  if (!a || a->sa_family != AF_INET) return false;
  *ip = ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr);
  return *ip != 0;
}

int join(CmaId* p, const sockaddr* addr, uint16_t flags, void* context) {
  uint32_t ip = 0;
  if (!p || !p->nic) return fail(EINVAL);  // bind or resolve first (rdma_join_multicast(3))
  if (!group_of(addr, &ip)) {
    explain("rdma_join_multicast: the group must be a non-zero IPv4 address (%s)",
            addr && addr->sa_family == AF_INET6 ? "simnic's wire is IPv4; IPv6 groups are not simulated"
                                                : "0.0.0.0 names no group");
    return fail(EINVAL);
  }
  if (p->id.qp_type != IBV_QPT_UD) {
    explain("rdma_join_multicast: the id's port space is not RDMA_PS_UDP/RDMA_PS_IPOIB: only UD QPs join groups");
    return fail(EINVAL);
  }
  for (auto& [g, att] : p->mc_groups)
    if (g == ip) return fail(EADDRINUSE);
  bool attach = p->id.qp && flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
  int status = 0;
  if (attach) {
    const ibv_gid gid = group_gid(ip);
    status = ibv_attach_mcast(p->id.qp, &gid, 0);
  }
  if (status == 0) p->mc_groups.emplace_back(ip, attach);
  // As librdmacm's ucma_process_join: a failed attach turns the join into MULTICAST_ERROR.
  const uint32_t type = status ? RDMA_CM_EVENT_MULTICAST_ERROR : RDMA_CM_EVENT_MULTICAST_JOIN;
  if (int e = post_local_event(p, type, -status, ip, uint64_t(uintptr_t(context)))) return fail(e);
  return 0;
}

}  // namespace

void leave_all_groups(CmaId* p) {
  for (auto& [ip, attached] : p->mc_groups)
    if (attached && p->id.qp) {
      const ibv_gid gid = group_gid(ip);
      ibv_detach_mcast(p->id.qp, &gid, 0);
    }
  p->mc_groups.clear();
}

}  // namespace simnic::rdmacm

using namespace simnic::rdmacm;

extern "C" {

int rdma_join_multicast(struct rdma_cm_id* id, struct sockaddr* addr, void* context) {
  return join(reinterpret_cast<CmaId*>(id), addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

int rdma_join_multicast_ex(struct rdma_cm_id* id, struct rdma_cm_join_mc_attr_ex* attr, void* context) {
  if (!attr || (attr->comp_mask & ~uint32_t(RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS)) ||
      !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS))
    return fail(EINVAL);
  uint16_t flags = (attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ? uint16_t(attr->join_flags)
                                                                       : uint16_t(RDMA_MC_JOIN_FLAG_FULLMEMBER);
  if (flags != RDMA_MC_JOIN_FLAG_FULLMEMBER && flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) return fail(EINVAL);
  return join(reinterpret_cast<CmaId*>(id), attr->addr, flags, context);
}

int rdma_leave_multicast(struct rdma_cm_id* id, struct sockaddr* addr) {
  auto* p = reinterpret_cast<CmaId*>(id);
  uint32_t ip = 0;
  if (!p || !group_of(addr, &ip)) return fail(EINVAL);
  for (auto it = p->mc_groups.begin(); it != p->mc_groups.end(); ++it) {
    if (it->first != ip) continue;
    int e = 0;
    if (it->second && id->qp) {
      const ibv_gid gid = group_gid(ip);
      e = ibv_detach_mcast(id->qp, &gid, 0);
    }
    p->mc_groups.erase(it);
    return e ? fail(e) : 0;
  }
  return fail(EADDRNOTAVAIL);
}

}  // extern "C"
