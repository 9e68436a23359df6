// XrcVerbs: the XRC verbs (IBA Annex A14): XRC domains (ibv_open_xrcd, shared by file between
// the contexts of this NIC), XRC SRQs, INI and TGT QPs, and ibv_open_qp's extra handles on a
// TGT QP. A part of Device (device.h); the XRC receive path is the engines' (xrc.cc).
#pragma once
#include <cstdint>

#include <infiniband/verbs.h>

namespace simnic::core {

class Device;
struct Context;
struct Qp;
struct Srq;
struct Xrcd;

class XrcVerbs {
 public:
  explicit XrcVerbs(Device& dev);

  // ibv_open_xrcd: with a file (has_file: the file's device and inode, as simnicd saw them),
  // the domain every context of this NIC opening that file shares, made if O_CREAT allows;
  // without a file, a new domain of its own. *handle names it for this context.
  int open_xrcd(Context* ctx, bool has_file, uint64_t dev, uint64_t ino, int oflags, uint32_t* handle);
  int close_xrcd(Context* ctx, uint32_t handle);
  // ibv_create_srq_ex with IBV_SRQT_XRC: receives complete on `cq`; (*out)->srqn is its number.
  int create_xrc_srq(Context* ctx, uint32_t pd, uint32_t xrcd, uint32_t cq, const ibv_srq_attr& attr, Srq** out);
  // ibv_create_qp_ex with IBV_QPT_XRC_SEND (an INI QP: pd and send_cq) or IBV_QPT_XRC_RECV (a
  // TGT QP: xrcd only).
  int create_xrc_qp(Context* ctx, const ibv_qp_init_attr& init, uint32_t pd, uint32_t send_cq, uint32_t xrcd, Qp** out);
  // ibv_open_qp: another handle on TGT QP `qpn` of XRC domain `xrcd`, which ctx has open. The QP
  // lives while any handle on it does: its creator's destroy hands it to an opener.
  int open_xrc_qp(Context* ctx, uint32_t xrcd, uint32_t qpn, uint32_t* handle, Qp** out);

  // What QueueVerbs and ContextVerbs share with the XRC verbs.
  void close_xrcds(Context* ctx);  // a closing context lets go of its XRCDs
  void xrc_release_srq(Srq& srq);  // an XRC SRQ is being destroyed
  int destroy_xrc_qp(Context* ctx, Qp& qp);
  Qp* opened_qp(Context* ctx, uint32_t handle);        // a TGT QP ctx holds through ibv_open_qp
  int close_opened_qp(Context* ctx, uint32_t handle);  // EINVAL when handle is no such open

 private:
  Xrcd* opened_xrcd(Context* ctx, uint32_t handle);  // an XRCD ctx has open, or nullptr
  void xrcd_put(Xrcd* xrcd);                         // frees it once nobody opens or uses it
  bool hand_over_tgt_qp(Qp& qp);                     // to another context's open, if any

  Device& dev_;
};

}  // namespace simnic::core
