// UD multicast verbs (IBA 10.5): ibv_attach_mcast and ibv_detach_mcast, with rdma-core's errnos;
// the port joins a group's IPv4 group while a QP here is attached (multicast.cc delivers).
#include <arpa/inet.h>
#include <algorithm>
#include <cerrno>

#include "simnic/core/device.h"
#include "simnic/core/objects/qp_state_table.h"
#include "simnic/core/text.h"
#include "simnic/proto/opcode_table.h"

namespace simnic::core {

using namespace simnic::proto;

// The checks of the kernel's ib_attach_mcast (a multicast GID, a UD QP) and rxe's limits, with
// their errnos: EINVAL, and ENOMEM past a limit ibv_query_device reports.
int QueueVerbs::check_mcast_attach(const Qp& qp, const ibv_gid& gid, const McastGroup* group) {
  if (!is_multicast_gid(gid))
    return dev_.journal().refuse(EINVAL, gid_string(gid) +
                                             " is not a multicast GID (an IPv4-mapped ::ffff:224.0.0.0/4 address, "
                                             "or ff00::/8): ibv_attach_mcast needs a group's MGID");
  if (qp.type != IBV_QPT_UD)
    return dev_.journal().refuse(EINVAL, "QP " + hex(qp.qpn) + " is " + qp_type_name(qp.type) +
                                             ": only UD QPs can be attached to a multicast group (IBA 10.5)");
  if (!group && dev_.mcast_groups_.size() >= DeviceLimits::kMaxMcastGrp)
    return dev_.journal().refuse(ENOMEM, "this NIC already has members in " +
                                             std::to_string(dev_.mcast_groups_.size()) +
                                             " multicast groups (max_mcast_grp)");
  if (group && group->qps.size() >= DeviceLimits::kMaxMcastQpAttach)
    return dev_.journal().refuse(ENOMEM, "group " + gid_string(gid) + " already has " +
                                             std::to_string(group->qps.size()) +
                                             " QPs attached on this NIC (max_mcast_qp_attach)");
  if (dev_.mcast_attachments_ >= DeviceLimits::kMaxTotalMcastQpAttach)
    return dev_.journal().refuse(ENOMEM, "this NIC already has " + std::to_string(dev_.mcast_attachments_) +
                                             " multicast attachments (max_total_mcast_qp_attach)");
  return 0;
}

// The MLID is not checked: on an Ethernet port the RoCE annex says to ignore it, and the
// kernel's ib_attach_mcast does (is_valid_mcast_lid).
int QueueVerbs::attach_mcast(Context* ctx, uint32_t handle, const ibv_gid& gid, uint16_t /*lid*/) {
  Qp* qp = dev_.tables().owned(dev_.qps_, ctx, handle);
  if (!qp) return EINVAL;
  const GidBytes key = gid_bytes(gid);
  if (std::find(qp->mcast_gids.begin(), qp->mcast_gids.end(), key) != qp->mcast_gids.end())
    return 0;  // attached already: uverbs answers success and changes nothing
  auto it = dev_.mcast_groups_.find(key);
  McastGroup* group = it == dev_.mcast_groups_.end() ? nullptr : &it->second;
  if (int e = check_mcast_attach(*qp, gid, group)) return e;
  if (!group) {
    const uint32_t ip = group_ipv4(gid);
    if (!dev_.engines_.datagram.group_ip_joined(ip))
      if (int e = dev_.env_.wire.join_group(ip))
        return dev_.journal().refuse(e,
                                     "the port could not join IP group " + ip_string(ip) + " for " + gid_string(gid));
    group = &dev_.mcast_groups_[key];
    group->gid = gid;
    group->ip = ip;
  }
  group->qps.push_back(qp);
  qp->mcast_gids.push_back(key);
  ++dev_.mcast_attachments_;
  dev_.tracer_.event(TraceKind::kMcastAttach)
      .u("ctx", ctx->id)
      .u("qp", qp->qpn)
      .s("mgid", gid_string(gid))
      .ip("group", group->ip)
      .u("members", group->qps.size());
  dev_.journal().log(LogLevel::kInfo, "QP " + hex(qp->qpn) + " attached to multicast group " + gid_string(gid) +
                                          " (IP " + ip_string(group->ip) + ")");
  return 0;
}

int QueueVerbs::detach_mcast(Context* ctx, uint32_t handle, const ibv_gid& gid, uint16_t /*lid*/) {
  Qp* qp = dev_.tables().owned(dev_.qps_, ctx, handle);
  if (!qp) return EINVAL;
  const GidBytes key = gid_bytes(gid);
  if (std::find(qp->mcast_gids.begin(), qp->mcast_gids.end(), key) == qp->mcast_gids.end())
    return dev_.journal().refuse(EINVAL, "QP " + hex(qp->qpn) + " is not attached to " + gid_string(gid) +
                                             " (ibv_detach_mcast of a group it never joined, or left already)");
  detach_qp_from(*qp, key);
  return 0;
}

// Removes one attachment; the port leaves the IP group once no group of this NIC uses it.
void QueueVerbs::detach_qp_from(Qp& qp, const GidBytes& key) {
  std::erase(qp.mcast_gids, key);
  auto it = dev_.mcast_groups_.find(key);
  if (it == dev_.mcast_groups_.end()) return;
  McastGroup& group = it->second;
  std::erase(group.qps, &qp);
  --dev_.mcast_attachments_;
  const uint32_t ip = group.ip;
  dev_.tracer_.event(TraceKind::kMcastDetach)
      .u("ctx", qp.ctx->id)
      .u("qp", qp.qpn)
      .s("mgid", gid_string(group.gid))
      .ip("group", ip)
      .u("members", group.qps.size());
  if (!group.qps.empty()) return;
  dev_.mcast_groups_.erase(it);
  if (!dev_.engines_.datagram.group_ip_joined(ip)) dev_.env_.wire.leave_group(ip);
}

// A process that dies attached leaves its groups (uverbs detaches a dying context's QPs).
void QueueVerbs::detach_all_mcast(Qp& qp) {
  for (const GidBytes& key : std::vector<GidBytes>(qp.mcast_gids)) detach_qp_from(qp, key);
}
}  // namespace simnic::core
