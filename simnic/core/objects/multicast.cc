// UD multicast (IBA 10.5): ibv_attach_mcast/ibv_detach_mcast, and the delivery of a datagram
// sent to a group to every QP of this NIC attached to it. RoCEv2 carries the multicast GID as
// an IP multicast destination: the port joins the IPv4 group (PacketSink::join_group) while a
// QP here is attached, and the network (the kernel's IP multicast, on simnic's wire) hands every
// member NIC its copy, the sender's own NIC included.
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
int Device::check_mcast_attach(const Qp& qp, const ibv_gid& gid, const McastGroup* group) {
  if (!is_multicast_gid(gid))
    return refuse(EINVAL, gid_string(gid) +
                              " is not a multicast GID (an IPv4-mapped ::ffff:224.0.0.0/4 address, "
                              "or ff00::/8): ibv_attach_mcast needs a group's MGID");
  if (qp.type != IBV_QPT_UD)
    return refuse(EINVAL, "QP " + hex(qp.qpn) + " is " + qp_type_name(qp.type) +
                              ": only UD QPs can be attached to a multicast group (IBA 10.5)");
  if (!group && mcast_groups_.size() >= DeviceLimits::kMaxMcastGrp)
    return refuse(ENOMEM, "this NIC already has members in " + std::to_string(mcast_groups_.size()) +
                              " multicast groups (max_mcast_grp)");
  if (group && group->qps.size() >= DeviceLimits::kMaxMcastQpAttach)
    return refuse(ENOMEM, "group " + gid_string(gid) + " already has " + std::to_string(group->qps.size()) +
                              " QPs attached on this NIC (max_mcast_qp_attach)");
  if (mcast_attachments_ >= DeviceLimits::kMaxTotalMcastQpAttach)
    return refuse(ENOMEM, "this NIC already has " + std::to_string(mcast_attachments_) +
                              " multicast attachments (max_total_mcast_qp_attach)");
  return 0;
}

// The MLID is not checked: on an Ethernet port the RoCE annex says to ignore it, and the
// kernel's ib_attach_mcast does (is_valid_mcast_lid).
int Device::attach_mcast(Context* ctx, uint32_t handle, const ibv_gid& gid, uint16_t /*lid*/) {
  Qp* qp = owned(qps_, ctx, handle);
  if (!qp) return EINVAL;
  const GidBytes key = gid_bytes(gid);
  if (std::find(qp->mcast_gids.begin(), qp->mcast_gids.end(), key) != qp->mcast_gids.end())
    return 0;  // attached already: uverbs answers success and changes nothing
  auto it = mcast_groups_.find(key);
  McastGroup* group = it == mcast_groups_.end() ? nullptr : &it->second;
  if (int e = check_mcast_attach(*qp, gid, group)) return e;
  if (!group) {
    const uint32_t ip = group_ipv4(gid);
    if (!group_ip_joined(ip))
      if (int e = wire_.join_group(ip))
        return refuse(e, "the port could not join IP group " + ip_string(ip) + " for " + gid_string(gid));
    group = &mcast_groups_[key];
    group->gid = gid;
    group->ip = ip;
  }
  group->qps.push_back(qp);
  qp->mcast_gids.push_back(key);
  ++mcast_attachments_;
  tracer_.event(TraceKind::kMcastAttach)
      .u("ctx", ctx->id)
      .u("qp", qp->qpn)
      .s("mgid", gid_string(gid))
      .s("group", ip_string(group->ip))
      .u("members", group->qps.size());
  log(LogLevel::kInfo,
      "QP " + hex(qp->qpn) + " attached to multicast group " + gid_string(gid) + " (IP " + ip_string(group->ip) + ")");
  return 0;
}

int Device::detach_mcast(Context* ctx, uint32_t handle, const ibv_gid& gid, uint16_t /*lid*/) {
  Qp* qp = owned(qps_, ctx, handle);
  if (!qp) return EINVAL;
  const GidBytes key = gid_bytes(gid);
  if (std::find(qp->mcast_gids.begin(), qp->mcast_gids.end(), key) == qp->mcast_gids.end())
    return refuse(EINVAL, "QP " + hex(qp->qpn) + " is not attached to " + gid_string(gid) +
                              " (ibv_detach_mcast of a group it never joined, or left already)");
  detach_qp_from(*qp, key);
  return 0;
}

// Removes one attachment; the port leaves the IP group once no group of this NIC uses it.
void Device::detach_qp_from(Qp& qp, const GidBytes& key) {
  std::erase(qp.mcast_gids, key);
  auto it = mcast_groups_.find(key);
  if (it == mcast_groups_.end()) return;
  McastGroup& group = it->second;
  std::erase(group.qps, &qp);
  --mcast_attachments_;
  const uint32_t ip = group.ip;
  tracer_.event(TraceKind::kMcastDetach)
      .u("ctx", qp.ctx->id)
      .u("qp", qp.qpn)
      .s("mgid", gid_string(group.gid))
      .s("group", ip_string(ip))
      .u("members", group.qps.size());
  if (!group.qps.empty()) return;
  mcast_groups_.erase(it);
  if (!group_ip_joined(ip)) wire_.leave_group(ip);
}

// A process that dies attached leaves its groups (uverbs detaches a dying context's QPs).
void Device::detach_all_mcast(Qp& qp) {
  for (const GidBytes& key : std::vector<GidBytes>(qp.mcast_gids)) detach_qp_from(qp, key);
}

}  // namespace simnic::core
