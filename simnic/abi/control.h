// The control protocol: the slow path between the shim and simnicd, like uverbs' commands.
//
// Transport: a Unix SOCK_SEQPACKET socket at control_socket_path(); one connection per
// ibv_context (per `simnic` query). Every request is one message, ReqHeader + body, and gets
// exactly one reply message, RespHeader + body. File descriptors (eventfds, memfds, channel
// sockets) travel as SCM_RIGHTS. Bodies are the trivially copyable structs below; where
// libibverbs already defines the struct (ibv_qp_attr, ibv_port_attr, ...) we carry it as is,
// since both ends are compiled against the same infiniband/verbs.h.
//
// A reply's status is 0 or a positive errno, the value the verb returns (or sets) in
// rdma-core. simnicd identifies the caller by SO_PEERCRED and frees everything the connection
// created when it closes, as the kernel does when a process dies.
#pragma once
#include <cstdint>
#include <type_traits>

#include <infiniband/verbs.h>

#include "simnic/abi/wire_safe.h"

namespace simnic::abi {

constexpr uint32_t kAbiVersion = 3;  // 2: RegMrReq::pages_base (shared pages); 3: QpShared::direct, OpenDirectSend
constexpr uint32_t kMaxMessage = 64 * 1024;  // largest control message, header included

enum class Op : uint32_t {
  Hello = 1,           // fds: [doorbell eventfd, async-event socket] -> HelloReply
  QueryDevice,         // -> QueryDeviceReply
  QueryPort,           // QueryPortReq -> QueryPortReply
  QueryGid,            // QueryGidReq -> QueryGidReply
  AllocPd,             // -> HandleReply
  DeallocPd,           // HandleReq
  RegMr,               // RegMrReq -> RegMrReply
  DeregMr,             // HandleReq
  CreateCompChannel,   // fds: [channel socket, simnicd's end] -> HandleReply
  DestroyCompChannel,  // HandleReq
  CreateCq,            // CreateCqReq -> CreateCqReply, fds: [memfd]
  DestroyCq,           // HandleReq
  CreateQp,            // CreateQpReq -> CreateQpReply, fds: [memfd]
  ModifyQp,            // ModifyQpReq
  QueryQp,             // QueryQpReq -> QueryQpReply
  DestroyQp,           // HandleReq
  CreateSrq,           // CreateSrqReq -> CreateSrqReply, fds: [memfd]
  ModifySrq,           // ModifySrqReq
  QuerySrq,            // HandleReq -> QuerySrqReply
  DestroySrq,          // HandleReq
  CreateAh,            // CreateAhReq -> HandleReply
  DestroyAh,           // HandleReq
  Status,              // -> text: "key value" lines (the `simnic status` view)
  SetFault,            // text "loss=0.05 dup=0 ..." -> text
  Step,                // text "on" | "off" | "next [N]" | "status" -> text "paused 1\nqueued 3\n..."
  AllocMw,             // AllocMwReq -> AllocMwReply
  DeallocMw,           // HandleReq
  ExplainQp,           // HandleReq{qp_num} -> text: why the QP's work requests completed in error
  TakeNotices,         // -> text: what the NIC noticed about this context's QPs since last asked, one per line
  AttachMcast,         // McastReq (ibv_attach_mcast)
  DetachMcast,         // McastReq (ibv_detach_mcast)
  OpenXrcd,            // OpenXrcdReq, fds: [the file, when has_file] -> HandleReply
  CloseXrcd,           // HandleReq
  CreateXrcSrq,        // CreateXrcSrqReq -> CreateXrcSrqReply, fds: [memfd]
  CreateXrcQp,         // CreateXrcQpReq -> CreateQpReply, fds: [memfd]
  OpenXrcQp,           // OpenXrcQpReq -> CreateQpReply (no memfd: a TGT QP has no rings to share)
  // The connection manager (abi/cm.h), on a query-only connection from librdmacm.
  CmAttachChannel,  // fds: [channel socket] -> HandleReply
  CmCreateId,       // CmCreateIdReq -> HandleReply
  CmDestroyId,      // HandleReq
  CmMigrateId,      // CmMigrateReq
  CmBind,           // CmBindReq -> CmBindReply
  CmListen,         // CmListenReq
  CmConnect,        // CmConnectReq: sends REQ (SIDR_REQ for UD)
  CmAccept,         // CmAcceptReq: sends REP (SIDR_REP), or RTU after a CONNECT_RESPONSE
  CmReject,         // CmRejectReq: sends REJ (SIDR_REP status reject)
  CmDisconnect,     // CmDisconnectReq: sends DREQ, or DREP to a DREQ
  CmInitQpAttr,     // CmInitQpAttrReq -> CmInitQpAttrReply
  ResizeCq,         // ResizeCqReq -> CreateCqReply (the same CQ handle), fds: [memfd of the new ring]
  MapContextPage,   // -> MapContextPageReply, fds: [memfd of the context's ContextShared page, simnicd's
                    //    DaemonAlive page (daemon_alive.h) when alive_bytes]; once per context
  // Verbs completeness (issue 17; control_dispatch_verbs.cc).
  ReregMr,      // ReregMrReq -> RegMrReply (the same MR handle)
  QueryClock,   // -> QueryClockReply (ibv_query_rt_values_ex, wall-clock CQE timestamps)
  AllocDm,      // AllocDmReq -> AllocDmReply, fds: [memfd of the device memory]
  FreeDm,       // HandleReq
  RegDmMr,      // RegDmMrReq -> RegMrReply
  ImportPd,     // HandleReq{pd handle} -> HandleReply (the same handle)
  ImportMr,     // HandleReq{mr handle} -> ImportMrReply
  JoinContext,  // fds: [another context's cmd_fd] (ibv_import_device): share its PDs and MRs
  AdviseMr,     // AdviseMrReq (ibv_advise_mr: on-demand paging, memory/odp.cc)
  // Posts that send themselves (issue 26; abi/direct_send.h): once per context.
  OpenDirectSend,  // -> OpenDirectSendReply, fds: [the NIC's UDP socket]
  Count_
};

struct ReqHeader {
  uint32_t op;   // Op
  uint32_t len;  // bytes of body following the header
};

// A refusal (status != 0) may carry the NIC's reason as its body: text, for the application's
// stderr (the rule that was broken, e.g. "QP 0x11 INIT->RTR: sgid_index 1 is beyond ...").
struct RespHeader {
  uint32_t op;     // echoes the request's op
  uint32_t len;    // bytes of body following the header
  int32_t status;  // 0 or a positive errno
  uint32_t flags;  // kRespMore, or 0 (was reserved, always 0: a one-message reply)
};

// A reply longer than one message (kMaxMessage) comes in pieces, in order, each a RespHeader
// with this op, status and its own len; every piece but the last has kRespMore. The
// descriptors, if any, ride on the first. (`simnic status` of a NIC with a thousand QPs.)
constexpr uint32_t kRespMore = 1;
constexpr uint32_t kMaxReplyPiece = kMaxMessage - uint32_t(sizeof(RespHeader));
constexpr size_t kMaxReplyBytes = 64u << 20;  // what a client takes in pieces before it gives up

struct HandleReq {
  uint32_t handle;
  uint32_t reserved;
};

struct HandleReply {
  uint32_t handle;
  uint32_t reserved;
};

struct HelloReq {
  uint32_t abi_version;  // kAbiVersion
  uint32_t ctl_fd;       // the caller's descriptor number of this socket: how simnicd recognizes
                         // the socket when another process imports it (ibv_import_device);
                         // 0: not given (query-only connections)
};

// The NIC's UDP socket comes with it: the shim sends a lent PSN's packet from the NIC's own
// address and port, which its peers accept (ingress.cc, from_nic_port), on the NIC's path.
struct OpenDirectSendReply {
  uint32_t ipv4;      // the NIC's address, host order (the packet's source, in its ICRC)
  uint32_t udp_port;  // the NIC's port, its peers' too: the packet's source and destination
};

struct MapContextPageReply {
  uint32_t bytes;        // of the memfd, to map
  uint32_t alive_bytes;  // of the second memfd (simnicd's DaemonAlive page, read-only), 0: none sent
};

struct HelloReply {
  char name[64];       // e.g. "simnic0"
  uint64_t node_guid;  // network byte order, as in ibv_device_attr
  uint32_t ipv4;       // the NIC's address, network byte order
  uint32_t daemon_pid;
  uint32_t abi_version;
  uint32_t num_comp_vectors;
};

struct QueryDeviceReply {
  struct ibv_device_attr attr;
};

struct QueryPortReq {
  uint32_t port_num;
  uint32_t reserved;
};

struct QueryPortReply {
  struct ibv_port_attr attr;
};

struct QueryGidReq {
  uint32_t port_num;
  uint32_t index;
};

struct QueryGidReply {
  union ibv_gid gid;
  uint32_t gid_type;  // enum ibv_gid_type (verbs.h): IB, ROCE_V1 or ROCE_V2
                      // (status ENODATA: an empty slot below gid_tbl_len; EINVAL: beyond it)
  uint32_t ndev_ifindex;
};

struct RegMrReq {
  uint32_t pd;
  uint32_t access;  // enum ibv_access_flags
  uint64_t addr;    // in the caller's address space
  uint64_t length;
  uint64_t iova;  // what remote peers address (== addr for ibv_reg_mr)
  // Shared pages (docs/shim.md): when the request carries a descriptor, it is a sealed memfd
  // holding the pages of [addr, addr + length), mapped in the caller at pages_base (its offset
  // 0). simnicd may map it and reach the MR with memcpy instead of process_vm_*.
  uint64_t pages_base;
};

struct RegMrReply {
  uint32_t handle;
  uint32_t lkey;
  uint32_t rkey;
  uint32_t reserved;
};

struct AllocMwReq {
  uint32_t pd;
  uint32_t type;  // enum ibv_mw_type
};

struct AllocMwReply {
  uint32_t handle;
  uint32_t rkey;
};

struct CreateCqReq {
  int32_t cqe;       // entries asked for
  uint32_t channel;  // comp channel handle, 0 for none
  uint32_t comp_vector;
  uint32_t reserved;
};

struct CreateCqReply {
  uint32_t handle;
  int32_t cqe;       // usable entries (>= asked)
  uint32_t entries;  // ring slots, a power of two
  uint32_t reserved;
  uint64_t mem_bytes;  // size of the memfd to map
};

// ibv_resize_cq. The reply is a CreateCqReply for the new ring, whose memfd replaces the old
// one: the pending CQEs are in it, at the same ring indices.
struct ResizeCqReq {
  uint32_t handle;
  int32_t cqe;  // entries asked for
};

struct CreateQpReq {
  uint32_t pd;
  uint32_t send_cq;
  uint32_t recv_cq;
  uint32_t srq;      // 0 for none
  uint32_t qp_type;  // enum ibv_qp_type
  uint32_t sq_sig_all;
  struct ibv_qp_cap cap;
};

struct CreateQpReply {
  uint32_t handle;
  uint32_t qp_num;
  struct ibv_qp_cap cap;  // what was granted
  uint32_t sq_entries;    // ring slots, powers of two
  uint32_t rq_entries;    // 0 with an SRQ
  uint32_t sq_offset;     // byte offsets of the slot arrays in the memfd
  uint32_t rq_offset;
  uint64_t mem_bytes;
};

struct ModifyQpReq {
  uint32_t qp;
  int32_t attr_mask;  // enum ibv_qp_attr_mask
  struct ibv_qp_attr attr;
};

struct QueryQpReq {
  uint32_t qp;
  int32_t attr_mask;
};

struct QueryQpReply {
  struct ibv_qp_attr attr;
  struct ibv_qp_cap cap;
  uint32_t qp_type;
  uint32_t sq_sig_all;
};

struct CreateSrqReq {
  uint32_t pd;
  uint32_t reserved;
  struct ibv_srq_attr attr;
};

struct CreateSrqReply {
  uint32_t handle;
  uint32_t entries;
  struct ibv_srq_attr attr;
  uint32_t wqe_offset;
  uint32_t reserved;
  uint64_t mem_bytes;
};

struct ModifySrqReq {
  uint32_t srq;
  int32_t attr_mask;  // enum ibv_srq_attr_mask
  struct ibv_srq_attr attr;
};

struct QuerySrqReply {
  struct ibv_srq_attr attr;
};

struct CreateAhReq {
  uint32_t pd;
  uint32_t reserved;
  struct ibv_ah_attr attr;
};

struct McastReq {
  uint32_t qp;   // QP handle
  uint16_t lid;  // the MLID (ignored on an Ethernet port, as by the kernel)
  uint16_t reserved;
  union ibv_gid gid;  // the group's MGID
};

// ibv_open_xrcd. The file travels as a descriptor, never as a name or an inode number the
// client could make up: simnicd identifies it itself (fstat), as the kernel does.
struct OpenXrcdReq {
  uint32_t has_file;  // 1: the request carries the file's descriptor; 0: fd -1, a private domain
  int32_t oflags;     // O_CREAT, O_EXCL
};

struct CreateXrcSrqReq {
  uint32_t pd;
  uint32_t xrcd;
  uint32_t cq;
  uint32_t reserved;
  struct ibv_srq_attr attr;
};

struct CreateXrcSrqReply {
  CreateSrqReply srq;
  uint32_t srq_num;  // what requesters put in the XRCETH (ibv_get_srq_num)
  uint32_t reserved;
};

struct CreateXrcQpReq {
  CreateQpReq qp;  // qp_type IBV_QPT_XRC_SEND (pd, send_cq) or IBV_QPT_XRC_RECV
  uint32_t xrcd;   // IBV_QPT_XRC_RECV: its XRC domain
  uint32_t reserved;
};

// ibv_open_qp: a handle on an existing XRC TGT QP of an XRC domain the caller opened.
struct OpenXrcQpReq {
  uint32_t xrcd;
  uint32_t qp_num;
};

// ibv_rereg_mr. Only what `flags` (enum ibv_rereg_mr_flags) names changes: the PD, the
// translation (addr, length; the new iova is addr, as rdma-core's providers send), the access.
struct ReregMrReq {
  uint32_t mr;
  uint32_t flags;
  uint32_t pd;
  uint32_t access;
  uint64_t addr;
  uint64_t length;
};

struct QueryClockReply {
  uint64_t nic_ns;  // the NIC's clock (simulated ns: the CQE timestamps' clock) when it answered
};

// ibv_alloc_dm: device memory simnicd holds in a memfd; the client maps it.
constexpr uint64_t kMaxDmSize = 4ull << 20;  // max_dm_size: all of a NIC's device memory
struct AllocDmReq {
  uint64_t length;
  uint32_t log_align_req;
  uint32_t comp_mask;
};

struct AllocDmReply {
  uint32_t handle;
  uint32_t reserved;
  uint64_t mem_bytes;  // the memfd's size (length rounded up to a page)
};

// ibv_reg_dm_mr: an MR over [dm_offset, dm_offset + length) of a DM, always zero-based.
// mapped_at: where the caller mapped the DM's memfd. The MR is one of the caller's own memory
// (DMA reaches it through that mapping, as any MR), so a wrong address can only hurt the caller.
struct RegDmMrReq {
  uint32_t pd;
  uint32_t dm;
  uint64_t dm_offset;
  uint64_t length;
  uint32_t access;
  uint32_t reserved;
  uint64_t mapped_at;
};

// ibv_import_mr: what the importer needs to rebuild its struct ibv_mr.
struct ImportMrReply {
  uint32_t handle;
  uint32_t pd;  // the PD's handle
  uint32_t lkey;
  uint32_t rkey;
  uint64_t addr;  // in the address space of the process that registered it
  uint64_t length;
  uint32_t access;
  uint32_t is_dm;  // 1: an MR over device memory (ibv_reg_dm_mr)
};

// ibv_advise_mr: prefetch advice on ranges of on-demand-paging MRs. The shim sends a longer
// scatter list in pieces of kMaxAdviseSge.
constexpr uint32_t kMaxAdviseSge = 32;
struct AdviseMrReq {
  uint32_t pd;
  uint32_t advice;   // enum ibv_advise_mr_advice
  uint32_t flags;    // IBV_ADVISE_MR_FLAG_FLUSH
  uint32_t num_sge;  // 1..kMaxAdviseSge
  ibv_sge sge[kMaxAdviseSge];
};

// Sent by simnicd on a completion channel's socket, one message per event.
struct CqEventMsg {
  uint32_t cq;  // the CQ handle
  uint32_t reserved;
};

// Sent by simnicd on the context's async-event socket.
struct AsyncEventMsg {
  uint32_t event_type;  // enum ibv_event_type
  uint32_t handle;      // QP / CQ / SRQ handle, or the port number
};

static_assert(kWireSafe<HelloReply> && kWireSafe<CreateQpReq> && kWireSafe<ModifyQpReq> && kWireSafe<QueryQpReply> &&
              kWireSafe<CreateAhReq>);

inline const char* op_name(Op op) {
  switch (op) {
    case Op::Hello: return "Hello";
    case Op::QueryDevice: return "QueryDevice";
    case Op::QueryPort: return "QueryPort";
    case Op::QueryGid: return "QueryGid";
    case Op::AllocPd: return "AllocPd";
    case Op::DeallocPd: return "DeallocPd";
    case Op::RegMr: return "RegMr";
    case Op::DeregMr: return "DeregMr";
    case Op::CreateCompChannel: return "CreateCompChannel";
    case Op::DestroyCompChannel: return "DestroyCompChannel";
    case Op::CreateCq: return "CreateCq";
    case Op::DestroyCq: return "DestroyCq";
    case Op::CreateQp: return "CreateQp";
    case Op::ModifyQp: return "ModifyQp";
    case Op::QueryQp: return "QueryQp";
    case Op::DestroyQp: return "DestroyQp";
    case Op::CreateSrq: return "CreateSrq";
    case Op::ModifySrq: return "ModifySrq";
    case Op::QuerySrq: return "QuerySrq";
    case Op::DestroySrq: return "DestroySrq";
    case Op::CreateAh: return "CreateAh";
    case Op::DestroyAh: return "DestroyAh";
    case Op::Status: return "Status";
    case Op::SetFault: return "SetFault";
    case Op::Step: return "Step";
    case Op::AllocMw: return "AllocMw";
    case Op::DeallocMw: return "DeallocMw";
    case Op::ExplainQp: return "ExplainQp";
    case Op::TakeNotices: return "TakeNotices";
    case Op::AttachMcast: return "AttachMcast";
    case Op::DetachMcast: return "DetachMcast";
    case Op::OpenXrcd: return "OpenXrcd";
    case Op::CloseXrcd: return "CloseXrcd";
    case Op::CreateXrcSrq: return "CreateXrcSrq";
    case Op::CreateXrcQp: return "CreateXrcQp";
    case Op::OpenXrcQp: return "OpenXrcQp";
    case Op::CmAttachChannel: return "CmAttachChannel";
    case Op::CmCreateId: return "CmCreateId";
    case Op::CmDestroyId: return "CmDestroyId";
    case Op::CmMigrateId: return "CmMigrateId";
    case Op::CmBind: return "CmBind";
    case Op::CmListen: return "CmListen";
    case Op::CmConnect: return "CmConnect";
    case Op::CmAccept: return "CmAccept";
    case Op::CmReject: return "CmReject";
    case Op::CmDisconnect: return "CmDisconnect";
    case Op::CmInitQpAttr: return "CmInitQpAttr";
    case Op::ResizeCq: return "ResizeCq";
    case Op::MapContextPage: return "MapContextPage";
    case Op::ReregMr: return "ReregMr";
    case Op::QueryClock: return "QueryClock";
    case Op::AllocDm: return "AllocDm";
    case Op::FreeDm: return "FreeDm";
    case Op::RegDmMr: return "RegDmMr";
    case Op::ImportPd: return "ImportPd";
    case Op::ImportMr: return "ImportMr";
    case Op::JoinContext: return "JoinContext";
    case Op::AdviseMr: return "AdviseMr";
    case Op::OpenDirectSend: return "OpenDirectSend";
    case Op::Count_: break;
  }
  return "?";
}

}  // namespace simnic::abi
