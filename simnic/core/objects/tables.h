// The NIC's object tables: every context, PD, MR, memory window, completion channel, CQ, SRQ,
// QP, address handle, XRC domain and multicast group, by handle, with the lookups the data
// path needs (MR by key, QP by QPN, XRC SRQ by number). Device keeps them (as a private base,
// so its verbs and engines name the tables directly); the verbs that fill them are in
// device_<object>.cc.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <infiniband/verbs.h>

#include "simnic/abi/rings.h"
#include "simnic/core/objects/key_source.h"
#include "simnic/core/objects/multicast.h"
#include "simnic/core/objects/objects.h"

namespace simnic::core {

// A multicast group with a member QP on this NIC (multicast.cc).
struct McastGroup {
  ibv_gid gid{};
  uint32_t ip = 0;       // the IPv4 group its datagrams travel to (group_ipv4)
  std::vector<Qp*> qps;  // attached, in attach order
};

// How many objects of each kind the NIC holds (`simnic status`, tests).
struct ObjectCounts {
  size_t contexts, pds, mrs, mws, channels, cqs, srqs, qps, ahs, xrcds, qp_opens, mcast_groups;
  bool operator==(const ObjectCounts&) const = default;
};

struct ObjectTables {
  // seed: KeySource's (0: keys and QPNs from getrandom).
  explicit ObjectTables(uint64_t key_seed) : keys_(key_seed) {}

  size_t context_count() const { return contexts_.size(); }
  ObjectCounts counts() const {
    return {contexts_.size(), pds_.size(), mrs_.size(), mws_.size(),   channels_.size(),  cqs_.size(),
            srqs_.size(),     qps_.size(), ahs_.size(), xrcds_.size(), tgt_opens_.size(), mcast_groups_.size()};
  }

  uint32_t new_handle() { return next_handle_++; }
  // A new object of `ctx` with a fresh handle; insert_object() then puts it in its table and in the
  // context's list of its handles, erase_object() takes it out of both.
  template <class T>
  std::unique_ptr<T> make_object(Context* ctx) {
    auto o = std::make_unique<T>();
    o->handle = new_handle();
    o->ctx = ctx;
    return o;
  }
  template <class T>
  T* insert_object(std::map<uint32_t, std::unique_ptr<T>>& table, std::vector<uint32_t>& handles,
                   std::unique_ptr<T> o) {
    T* raw = o.get();
    handles.push_back(raw->handle);
    table[raw->handle] = std::move(o);
    return raw;
  }
  template <class T>
  void erase_object(std::map<uint32_t, std::unique_ptr<T>>& table, std::vector<uint32_t>& handles, uint32_t handle) {
    handles.erase(std::remove(handles.begin(), handles.end(), handle), handles.end());
    table.erase(handle);
  }

  // The questions every part of the NIC asks the tables (tables.cc).
  // The object `handle` names, if it belongs to `ctx` (a context never reaches another's).
  // PDs and MRs are also reachable from the contexts that imported their creator's
  // (ibv_import_device; shares_objects).
  template <class T>
  T* owned(std::map<uint32_t, std::unique_ptr<T>>& table, Context* ctx, uint32_t handle) {
    auto it = table.find(handle);
    constexpr bool kShared = std::is_same_v<T, Pd> || std::is_same_v<T, Mr>;
    if (it == table.end()) return nullptr;
    const Context* owner = it->second->ctx;
    if (owner != ctx && !(kShared && shares_objects && shares_objects(owner, ctx))) return nullptr;
    return it->second.get();
  }
  Qp* find_qp_by_qpn(uint32_t qpn);
  const Mr* find_mr_by_key(uint32_t key) const;
  Mw* find_mw_by_rkey_index(uint32_t rkey) const;  // the window whose index `rkey` carries
  // Names others must not guess (key_source.h), each unused in its table.
  uint32_t new_qpn();
  uint32_t new_mr_key();
  uint32_t new_mw_index();

  // Whether `user` may use the PDs and MRs `owner` created (the import groups: Device sets it).
  std::function<bool(const Context* owner, const Context* user)> shares_objects;
  KeySource keys_;

  uint32_t next_handle_ = 1;
  uint32_t next_context_id_ = 1;
  std::map<uint32_t, std::unique_ptr<Context>> contexts_;
  std::map<uint32_t, std::unique_ptr<Pd>> pds_;
  std::map<uint32_t, std::unique_ptr<Mr>> mrs_;
  std::map<uint32_t, Mr*> mr_by_key_;
  std::map<uint32_t, std::unique_ptr<Mw>> mws_;  // by handle, which is also the rkey's index
  std::map<uint32_t, std::unique_ptr<Channel>> channels_;
  std::map<uint32_t, std::unique_ptr<Cq>> cqs_;
  std::map<uint32_t, std::unique_ptr<Srq>> srqs_;
  std::map<uint32_t, std::unique_ptr<Qp>> qps_;
  std::map<uint32_t, Qp*> qp_by_qpn_;
  std::map<uint32_t, std::unique_ptr<Ah>> ahs_;
  std::map<GidBytes, McastGroup> mcast_groups_;  // groups with a member here, by MGID
  uint32_t mcast_attachments_ = 0;               // (QP, group) pairs, all groups
  std::map<uint32_t, std::unique_ptr<Xrcd>> xrcds_;
  std::map<uint32_t, Srq*> srq_by_srqn_;                    // XRC SRQs by the number an XRCETH carries
  std::map<uint32_t, std::pair<Context*, Qp*>> tgt_opens_;  // ibv_open_qp handles on TGT QPs
};

// Helpers of the verbs that fill the tables.
inline uint32_t round_up_pow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

// Where a QP's rings lie in its shared memory, and how many bytes it charges its context
// (rings plus the NIC's per-WQE state; not the page rounding of the mapping).
struct QpLayout {
  uint32_t sq_off, rq_off;
  size_t ring_bytes;
  uint64_t charged;
};

inline QpLayout qp_layout(uint32_t sq_entries, uint32_t rq_entries) {
  QpLayout l;
  l.sq_off = abi::align_up(sizeof(abi::QpShared), abi::kCacheLine);
  l.rq_off = abi::align_up(l.sq_off + sq_entries * sizeof(abi::SendWqe), abi::kCacheLine);
  l.ring_bytes = l.rq_off + size_t(rq_entries) * sizeof(abi::RecvWqe);
  l.charged = l.ring_bytes + uint64_t(sq_entries) * sizeof(SendWqeState);
  return l;
}

// An XRC QP's: the header and its SQ (a TGT QP keeps a one-slot SQ that nothing may use, so the
// rings' layout stays the one the shim knows); no RQ.
inline QpLayout xrc_qp_layout(uint32_t sq_entries) {
  QpLayout l;
  l.sq_off = abi::align_up(sizeof(abi::QpShared), abi::kCacheLine);
  l.ring_bytes = l.sq_off + size_t(sq_entries) * sizeof(abi::SendWqe);
  l.rq_off = uint32_t(l.ring_bytes);  // no slots
  l.charged = l.ring_bytes + uint64_t(sq_entries) * sizeof(SendWqeState);
  return l;
}

// What a new QP of any type is: its PD and send CQ (none for an XRC TGT QP), type, signalling.
void set_qp_identity(Qp& qp, const ibv_qp_init_attr& init, Pd* pd, Cq* send_cq);

inline QpLayout qp_layout_of(const Qp& qp) {
  return qp.is_xrc() ? xrc_qp_layout(qp.sq_entries) : qp_layout(qp.sq_entries, qp.rq_entries);
}

}  // namespace simnic::core
