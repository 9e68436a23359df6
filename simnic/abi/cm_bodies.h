// The connection manager's part of the control protocol: what librdmacm.so.1 (rdmacm/) asks
// simnicd, like the kernel's ucma commands (include/uapi/rdma/rdma_user_cm.h), and the events
// simnicd sends back on an event channel's socket.
//
// librdmacm opens one query-only control connection per NIC (a Hello without descriptors) and
// registers each event channel with the NICs its ids use: CmAttachChannel passes the channel's
// socket (one end of a SOCK_STREAM socketpair whose other end is channel->fd), and simnicd
// sends one CmEventMsg per event on it. A channel serving ids on several NICs is one socket
// written by several simnicds, so poll() on channel->fd and O_NONBLOCK work as on the kernel's
// /dev/infiniband/rdma_cm.
//
// Addresses and ports are host order here. Every id lives on one NIC; librdmacm decides which
// (the NIC that owns the bound or source address), as the kernel binds an id to a device.
//
// This file holds the requests' bodies and the events; their ops are abi::Op::Cm* in
// control.h, and cm.h brings both. The core's CmAgent includes only this file, so that the
// core never sees the rest of the control protocol (scripts/check_layers.py).
#pragma once
#include <cstdint>

#include <infiniband/verbs.h>

#include "simnic/abi/wire_safe.h"

namespace simnic::abi {

constexpr uint32_t kCmMaxPrivateData = 224;  // the largest CM private data field (RTU, DREP)

struct CmCreateIdReq {
  uint32_t channel;     // from CmAttachChannel
  uint16_t port_space;  // enum rdma_port_space
  uint16_t reserved;
  uint32_t qp_type;  // IBV_QPT_RC or IBV_QPT_UD
  uint32_t reserved2;
  uint64_t cookie;  // returned in every event of this id (librdmacm's id)
};

struct CmMigrateReq {
  uint32_t id;
  uint32_t channel;
  uint64_t cookie;
};

struct CmBindReq {
  uint32_t id;
  uint16_t port;  // 0: any free port
  uint16_t reserved;
};

struct CmBindReply {
  uint16_t port;  // the port bound
  uint16_t reserved;
  uint32_t reserved2;
};

struct CmListenReq {
  uint32_t id;
  int32_t backlog;
};

// What the active side's REQ (or SIDR_REQ, for a UD id) carries.
struct CmConnectReq {
  uint32_t id;
  uint32_t dst_ip;
  uint16_t dst_port;
  uint8_t responder_resources;
  uint8_t initiator_depth;
  uint8_t retry_count;
  uint8_t rnr_retry_count;
  uint8_t flow_control;
  uint8_t srq;
  uint32_t qp_num;
  uint32_t starting_psn;
  uint8_t cm_response_timeout;  // IBA 12.7.22: 4.096us * 2^n before a MAD is sent again
  uint8_t max_cm_retries;
  uint8_t path_mtu;  // enum ibv_mtu
  uint8_t private_len;
  uint32_t timeout_ms;  // SIDR only: rdma_resolve_route's timeout decides
  uint8_t private_data[kCmMaxPrivateData];
};

// The passive side's REP or SIDR_REP, or the active side's RTU (after a CONNECT_RESPONSE).
struct CmAcceptReq {
  uint32_t id;
  uint32_t qp_num;
  uint32_t starting_psn;
  uint32_t qkey;  // SIDR_REP
  uint8_t responder_resources;
  uint8_t initiator_depth;
  uint8_t rnr_retry_count;
  uint8_t flow_control;
  uint8_t srq;
  uint8_t private_len;
  uint16_t reserved;
  uint8_t private_data[kCmMaxPrivateData];
};

struct CmRejectReq {
  uint32_t id;
  uint8_t private_len;
  uint8_t reserved[3];
  uint8_t private_data[kCmMaxPrivateData];
};

struct CmDisconnectReq {
  uint32_t id;
  uint8_t private_len;
  uint8_t reserved[3];
  uint8_t private_data[kCmMaxPrivateData];
};

struct CmInitQpAttrReq {
  uint32_t id;
  uint32_t qp_state;  // enum ibv_qp_state: INIT, RTR or RTS
};

struct CmInitQpAttrReply {
  struct ibv_qp_attr attr;
  int32_t attr_mask;
  uint32_t reserved;
};

// One event, sent by simnicd on a channel's socket (rdma_cm_event's contents).
struct CmEventMsg {
  uint64_t cookie;  // the id's (for CONNECT_REQUEST: the listener's)
  uint32_t event;   // enum rdma_cm_event_type
  int32_t status;   // as the kernel's: REJ reason, -ETIMEDOUT, SIDR status...
  uint32_t new_id;  // CONNECT_REQUEST: the new id's handle on this NIC
  uint32_t nic_ip;  // the NIC that sent it
  uint32_t local_ip, remote_ip;
  uint16_t local_port, remote_port;
  uint8_t responder_resources;
  uint8_t initiator_depth;
  uint8_t flow_control;
  uint8_t retry_count;
  uint8_t rnr_retry_count;
  uint8_t srq;
  uint8_t private_len;
  uint8_t reserved;
  uint32_t qp_num;  // the peer's QPN (conn) or the remote UD QPN (ud)
  uint32_t qkey;    // ud
  uint8_t private_data[kCmMaxPrivateData];
};

static_assert(kWireSafe<CmConnectReq> && kWireSafe<CmAcceptReq> && kWireSafe<CmEventMsg> &&
              kWireSafe<CmInitQpAttrReply>);

}  // namespace simnic::abi

namespace simnic::abi {

// enum rdma_cm_event_type (rdma/rdma_cma.h), which simnicd does not include; librdmacm
// static_asserts that the values agree.
enum CmEvent : uint32_t {
  kCmAddrResolved = 0,
  kCmAddrError,
  kCmRouteResolved,
  kCmRouteError,
  kCmConnectRequest,
  kCmConnectResponse,
  kCmConnectError,
  kCmUnreachable,
  kCmRejected,
  kCmEstablished,
  kCmDisconnected,
  kCmDeviceRemoval,
  kCmMulticastJoin,
  kCmMulticastError,
  kCmAddrChange,
  kCmTimewaitExit,
};

// enum rdma_port_space values simnic serves.
enum CmPortSpace : uint16_t { kPsIpoib = 0x0002, kPsIb = 0x013F, kPsTcp = 0x0106, kPsUdp = 0x0111 };

constexpr uint32_t kRdmaUdpQkey = 0x01234567;  // RDMA_UDP_QKEY (rdma_cma.h)

}  // namespace simnic::abi
