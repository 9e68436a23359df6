// QueueVerbs: the verbs on queues (IBA 11.2.5-11.2.8): completion channels, CQs (and
// ibv_resize_cq), SRQs, QPs of every type (create, modify, query, destroy) and multicast
// attach/detach of UD QPs (IBA 10.5). A part of Device (device.h): the objects live in Device's
// tables, and the state machine's transitions are Device's shared helpers (set_qp_state, ...).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <infiniband/verbs.h>

#include "simnic/core/objects/multicast.h"

namespace simnic::core {

class Device;
struct Context;
struct Cq;
struct McastGroup;
struct Qp;
struct QpLayout;
struct Srq;

// Each verb returns 0 or a positive errno, as the kernel's uverbs would.
class QueueVerbs {
 public:
  explicit QueueVerbs(Device& dev);

  // cq.cc: completion channels, CQs
  int create_channel(Context* ctx, int fd, uint32_t* handle);  // takes ownership of fd
  int destroy_channel(Context* ctx, uint32_t handle);
  int create_cq(Context* ctx, int cqe, uint32_t channel, Cq** out);
  int destroy_cq(Context* ctx, uint32_t handle);
  // ibv_resize_cq: a new ring of at least `cqe` entries takes the CQ's pending completions in
  // order. The caller (the shim) must not poll the CQ until it has mapped the new ring.
  int resize_cq(Context* ctx, uint32_t handle, int cqe, Cq** out);
  // srq.cc
  int create_srq(Context* ctx, uint32_t pd, const ibv_srq_attr& attr, Srq** out);
  int modify_srq(Context* ctx, uint32_t handle, const ibv_srq_attr& attr, int mask);
  int query_srq(Context* ctx, uint32_t handle, ibv_srq_attr* attr);
  int destroy_srq(Context* ctx, uint32_t handle);
  // qp.cc (create, destroy), qp_modify.cc (modify, query)
  int create_qp(Context* ctx, const ibv_qp_init_attr& init, uint32_t pd, uint32_t send_cq, uint32_t recv_cq,
                uint32_t srq, Qp** out);
  int modify_qp(Context* ctx, uint32_t handle, const ibv_qp_attr& attr, int mask, uint64_t now);
  int query_qp(Context* ctx, uint32_t handle, ibv_qp_attr* attr, Qp** qp);
  int destroy_qp(Context* ctx, uint32_t handle);
  // multicast_verbs.cc: UD QPs join and leave multicast groups (IBA 10.5), with rdma-core's errnos.
  int attach_mcast(Context* ctx, uint32_t qp, const ibv_gid& gid, uint16_t lid);
  int detach_mcast(Context* ctx, uint32_t qp, const ibv_gid& gid, uint16_t lid);

  // What XrcVerbs and ContextVerbs share with the QP verbs.
  int map_qp_queues(Context* ctx, Qp& qp, const QpLayout& layout);
  Qp* add_qp(std::unique_ptr<Qp> qp);
  void remove_qp(Context* ctx, Qp& qp);
  void detach_all_mcast(Qp& qp);  // a dying context's QP leaves every group

 private:
  int check_qp_request(Context* ctx, const ibv_qp_init_attr& init, bool has_srq);  // what RC, UC, UD share
  int check_qp_attr_values(const Qp& qp, const ibv_qp_attr& attr, int mask, std::string* why);
  void apply_qp_attr(Qp& qp, const ibv_qp_attr& attr, int mask, uint64_t now);
  int check_mcast_attach(const Qp& qp, const ibv_gid& gid, const McastGroup* group);  // 0 or the errno
  void detach_qp_from(Qp& qp, const GidBytes& gid);

  Device& dev_;
};

}  // namespace simnic::core
