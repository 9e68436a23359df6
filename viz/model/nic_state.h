// What one NIC looks like at a point of its trace: its objects, each QP's state and rings,
// each CQ's ring, its counters. Rebuilt by applying events in order; no drawing code here,
// so tests can check it against a trace.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "viz/model/event.h"

namespace simnic::viz {

// A WQE slot in use: what was posted there, and where in the timeline.
struct WqeSlot {
  uint64_t wr_id = 0;
  std::string opcode;
  uint64_t length = 0;
  std::string flags;
  size_t event_pos = 0;  // position of the wqe_posted event in the timeline
};

struct WorkQueue {
  uint32_t entries = 0;
  uint64_t producer = 0;               // free-running: one past the newest posted index
  uint64_t consumer = 0;               // free-running: one past the newest freed index
  std::map<uint64_t, WqeSlot> posted;  // index -> slot, the ones not freed yet
};

// The QP's attributes as ibv_modify_qp set them (qp_state's `attr`, docs/trace-format.md):
// what the application asked for, not what the latest packet carried.
struct QpAttr {
  bool known = false;  // a qp_state with `attr` was seen
  uint32_t dest_qp = 0;
  uint32_t sq_psn = 0, rq_psn = 0;
  uint32_t mtu = 0;  // bytes
  std::string dgid;  // the peer's IPv4 address
  uint32_t qkey = 0;
  std::string access;  // qp_access_flags, e.g. "REMOTE_WRITE|REMOTE_READ"
  uint32_t timeout = 0, retry_cnt = 0, rnr_retry = 0, min_rnr_timer = 0;
  uint32_t max_rd_atomic = 0, max_dest_rd_atomic = 0;
};

struct QpInfo {
  uint32_t qpn = 0;
  std::string type;  // "RC", "UC", "UD"
  std::string state = "RESET";
  std::string prev_state;  // where the last transition came from ("" if none)
  std::string last_cause;  // "modify_qp" or the error that forced it
  uint32_t send_cq = 0, recv_cq = 0;
  QpAttr attr;  // as set by ibv_modify_qp
  // The latest packets', not the QP's attributes: "last packet sent/received".
  uint32_t last_tx_dest_qp = 0;
  uint64_t last_tx_psn = 0, last_rx_psn = 0;
  bool has_tx = false, has_rx = false;
  WorkQueue sq, rq;
  std::string last_error;  // the rule broken, from the last `error` event
};

struct CqeRecord {
  uint64_t index = 0;
  uint64_t wr_id = 0;
  uint32_t qp = 0;
  std::string opcode, status;
  uint64_t status_num = 0, byte_len = 0;
  size_t event_pos = 0;
};

struct CqInfo {
  uint32_t handle = 0;
  uint32_t entries = 0;
  uint64_t produced = 0;          // CQEs written so far (the producer index)
  std::vector<CqeRecord> recent;  // the newest CQEs, at most `entries` (and at most kMaxRecent)
  static constexpr size_t kMaxRecent = 256;
};

struct MrInfo {
  uint32_t handle = 0, pd = 0, lkey = 0, rkey = 0;
  uint64_t addr = 0, length = 0;
  std::string access;
};

// A memory window: its rkey, and the part of an MR it currently opens (mr 0 = not bound).
struct MwInfo {
  uint32_t handle = 0, pd = 0, rkey = 0, type = 1, mr = 0;
  uint64_t addr = 0, length = 0;
  std::string access;
};

// An object the trace saw destroyed, so that the viewer can say "destroyed" rather than
// "none (yet)".
struct Destroyed {
  std::string what;    // "QP", "CQ", "MR", "MW"
  uint32_t id = 0;     // QPN or handle
  std::string detail;  // e.g. "RC, was RTS"
  size_t event_pos = 0;
};

struct NicState {
  std::string name;
  std::string addr;  // "127.0.0.1"
  uint64_t mtu = 0;
  uint64_t wall_offset_ns = 0;  // wall_ns - t_ns from nic_up (0 if unknown)
  bool paused = false;
  uint64_t last_seq = 0, last_t_ns = 0;
  std::map<uint32_t, uint64_t> contexts;  // ctx -> pid
  std::map<uint32_t, uint32_t> pds;       // pd -> ctx
  std::map<uint32_t, MrInfo> mrs;
  std::map<uint32_t, MwInfo> mws;
  std::map<uint32_t, CqInfo> cqs;
  std::map<uint32_t, QpInfo> qps;
  std::map<std::string, uint64_t> counters;  // "pkt_tx", "nak", "retransmit", "drop", ...
  std::vector<Destroyed> destroyed;          // the newest kMaxDestroyed, oldest first
  static constexpr size_t kMaxDestroyed = 64;

  // Applies one event of this NIC (event_pos: its position in the merged timeline).
  void apply(const Event& e, size_t event_pos);

 private:
  bool apply_object(const Event& e, size_t pos);  // each: false when the kind is not its own
  bool apply_qp(const Event& e, size_t pos);
  bool apply_work(const Event& e, size_t pos);
  void remember_destroyed(std::string what, uint32_t id, std::string detail, size_t pos);
};

}  // namespace simnic::viz
