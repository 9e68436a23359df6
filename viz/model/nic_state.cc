#include "viz/model/nic_state.h"

namespace simnic::viz {

namespace {

// Rings are consumed in order: every slot below the consumer index is free, even when the
// viewer missed its wqe_done (a live subscriber that fell behind, or one that joined late).
void forget_below_consumer(WorkQueue& wq) { wq.posted.erase(wq.posted.begin(), wq.posted.lower_bound(wq.consumer)); }

WorkQueue* queue_of(QpInfo& qp, const std::string& which) {
  if (which == "sq") return &qp.sq;
  if (which == "rq") return &qp.rq;
  return nullptr;
}

QpAttr attr_of(const nlohmann::ordered_json& a) {
  QpAttr q;
  q.known = true;
  auto num = [&](const char* k) { return a.contains(k) && a[k].is_number() ? a[k].get<uint32_t>() : 0u; };
  auto str = [&](const char* k) { return a.contains(k) && a[k].is_string() ? a[k].get<std::string>() : std::string(); };
  q.dest_qp = num("dest_qp");
  q.sq_psn = num("sq_psn");
  q.rq_psn = num("rq_psn");
  q.mtu = num("mtu");
  q.dgid = str("dgid");
  q.qkey = num("qkey");
  q.access = str("access");
  q.timeout = num("timeout");
  q.retry_cnt = num("retry_cnt");
  q.rnr_retry = num("rnr_retry");
  q.min_rnr_timer = num("min_rnr_timer");
  q.max_rd_atomic = num("max_rd_atomic");
  q.max_dest_rd_atomic = num("max_dest_rd_atomic");
  return q;
}

// A snapshot line (a live subscriber's welcome, after the recent history) describes what
// exists now. What the history already built stays as it is (rings, counters, CQEs); only what
// the history did not show (it started after the object was created) is added.
bool already_known(const NicState& n, const Event& e) {
  if (!e.b("snapshot")) return false;
  const std::string& k = e.kind;
  if (k == "qp_create") return n.qps.count(uint32_t(e.u("qp"))) > 0;
  if (k == "cq_create") return n.cqs.count(uint32_t(e.u("cq"))) > 0;
  if (k == "mr_create") return n.mrs.count(uint32_t(e.u("mr"))) > 0;
  if (k == "mw_create") return n.mws.count(uint32_t(e.u("mw"))) > 0;
  if (k == "ctx_open") return n.contexts.count(uint32_t(e.u("ctx"))) > 0;
  if (k == "qp_state") {
    auto it = n.qps.find(uint32_t(e.u("qp")));
    return it != n.qps.end() && it->second.state == e.s("to") && it->second.attr.known;
  }
  return false;
}

}  // namespace

void NicState::remember_destroyed(std::string what, uint32_t id, std::string detail, size_t pos) {
  destroyed.push_back({std::move(what), id, std::move(detail), pos});
  if (destroyed.size() > kMaxDestroyed) destroyed.erase(destroyed.begin());
}

void NicState::apply(const Event& e, size_t pos) {
  last_seq = e.seq;
  last_t_ns = e.t_ns;
  if (already_known(*this, e)) return;
  counters[e.kind]++;
  if (apply_object(e, pos) || apply_qp(e, pos)) return;
  apply_work(e, pos);
}

// The NIC, contexts, PDs, MRs, MWs and CQs coming and going.
bool NicState::apply_object(const Event& e, size_t pos) {
  const std::string& k = e.kind;
  if (k == "nic_up") {
    addr = e.s("addr");
    mtu = e.u("mtu");
    if (uint64_t w = e.u("wall_ns")) wall_offset_ns = w - e.t_ns;
  } else if (k == "ctx_open") {
    contexts[uint32_t(e.u("ctx"))] = e.u("pid");
  } else if (k == "ctx_close") {
    contexts.erase(uint32_t(e.u("ctx")));
  } else if (k == "pd_create") {
    pds[uint32_t(e.u("pd"))] = uint32_t(e.u("ctx"));
  } else if (k == "pd_destroy") {
    pds.erase(uint32_t(e.u("pd")));
  } else if (k == "mr_create") {
    MrInfo m;
    m.handle = uint32_t(e.u("mr"));
    m.pd = uint32_t(e.u("pd"));
    m.lkey = uint32_t(e.u("lkey"));
    m.rkey = uint32_t(e.u("rkey"));
    m.addr = e.addr("addr");
    m.length = e.u("length");
    m.access = e.s("access");
    mrs[m.handle] = m;
  } else if (k == "mr_destroy") {
    mrs.erase(uint32_t(e.u("mr")));
    remember_destroyed("MR", uint32_t(e.u("mr")), "", pos);
  } else if (k == "mw_create") {
    MwInfo w;
    w.handle = uint32_t(e.u("mw"));
    w.pd = uint32_t(e.u("pd"));
    w.rkey = uint32_t(e.u("rkey"));
    w.type = uint32_t(e.u("type", 1));
    mws[w.handle] = w;
  } else if (k == "mw_bind") {
    MwInfo& w = mws[uint32_t(e.u("mw"))];
    w.handle = uint32_t(e.u("mw"));
    w.rkey = uint32_t(e.u("rkey"));
    w.mr = uint32_t(e.u("mr"));
    w.addr = e.addr("addr");
    w.length = e.u("length");
    w.access = e.s("access");
  } else if (k == "mw_invalidate") {
    auto it = mws.find(uint32_t(e.u("mw")));
    if (it != mws.end()) {
      it->second.mr = 0;
      it->second.addr = it->second.length = 0;
      it->second.access.clear();
    }
  } else if (k == "mw_destroy") {
    mws.erase(uint32_t(e.u("mw")));
    remember_destroyed("MW", uint32_t(e.u("mw")), "", pos);
  } else if (k == "cq_create") {
    CqInfo c;
    c.handle = uint32_t(e.u("cq"));
    c.entries = uint32_t(e.u("entries", e.u("cqe") + 1));
    cqs[c.handle] = c;
  } else if (k == "cq_resize") {  // ibv_resize_cq: a new ring, same indices
    auto it = cqs.find(uint32_t(e.u("cq")));
    if (it != cqs.end()) it->second.entries = uint32_t(e.u("entries", e.u("cqe") + 1));
  } else if (k == "cq_destroy") {
    cqs.erase(uint32_t(e.u("cq")));
    remember_destroyed("CQ", uint32_t(e.u("cq")), "", pos);
  } else {
    return false;
  }
  return true;
}

// QPs: creation, destruction, state and attributes.
bool NicState::apply_qp(const Event& e, size_t pos) {
  const std::string& k = e.kind;
  if (k == "qp_create") {
    QpInfo q;
    q.qpn = uint32_t(e.u("qp"));
    q.type = e.s("type");
    q.sq.entries = uint32_t(e.u("sq_entries"));
    q.rq.entries = uint32_t(e.u("rq_entries"));
    q.send_cq = uint32_t(e.u("send_cq"));
    q.recv_cq = uint32_t(e.u("recv_cq"));
    qps[q.qpn] = q;
  } else if (k == "qp_destroy") {
    // Remembered even when the viewer never saw it created (its history started later).
    auto it = qps.find(uint32_t(e.u("qp")));
    if (it != qps.end()) {
      remember_destroyed("QP", it->first, it->second.type + ", was " + it->second.state, pos);
      qps.erase(it);
    } else {
      remember_destroyed("QP", uint32_t(e.u("qp")), e.s("type"), pos);
    }
  } else if (k == "qp_state") {
    QpInfo& q = qps[uint32_t(e.u("qp"))];
    q.qpn = uint32_t(e.u("qp"));
    // A snapshot's "RESET -> RTS" only says where the QP is now: keep the transition the
    // history showed, if any.
    bool snapshot = e.b("snapshot");
    if (!snapshot || q.state != e.s("to")) q.prev_state = snapshot ? std::string() : e.s("from");
    q.state = e.s("to");
    q.last_cause = e.s("cause");
    if (e.has("attr") && e.fields["attr"].is_object()) q.attr = attr_of(e.fields["attr"]);
    // Leaving ERR or going to RESET empties the rings, as a real QP does.
    if (q.state == "RESET") {
      q.sq.posted.clear(), q.rq.posted.clear();
      q.sq.producer = q.sq.consumer = q.rq.producer = q.rq.consumer = 0;
    }
  } else {
    return false;
  }
  return true;
}

// Work on the rings, completions, packets, errors, step mode.
bool NicState::apply_work(const Event& e, size_t pos) {
  const std::string& k = e.kind;
  if (k == "wqe_posted") {
    auto qit = qps.find(uint32_t(e.u("qp")));
    if (qit == qps.end()) return true;
    WorkQueue* wq = queue_of(qit->second, e.s("queue"));
    if (!wq) return true;
    uint64_t idx = e.u("index");
    wq->posted[idx] = WqeSlot{e.u("wr_id"), e.s("opcode"), e.u("length"), e.s("flags"), pos};
    wq->producer = std::max(wq->producer, idx + 1);
    // A snapshot or a late subscriber may start mid-stream: keep the consumer sane.
    if (wq->consumer + wq->entries < wq->producer && wq->entries) wq->consumer = wq->producer - wq->entries;
    forget_below_consumer(*wq);
  } else if (k == "wqe_done") {
    auto qit = qps.find(uint32_t(e.u("qp")));
    if (qit == qps.end()) return true;
    WorkQueue* wq = queue_of(qit->second, e.s("queue"));
    if (!wq) return true;
    uint64_t idx = e.u("index");
    wq->posted.erase(idx);
    wq->consumer = std::max(wq->consumer, idx + 1);
    wq->producer = std::max(wq->producer, wq->consumer);
    forget_below_consumer(*wq);
  } else if (k == "cqe") {
    auto cit = cqs.find(uint32_t(e.u("cq")));
    if (cit == cqs.end()) return true;
    CqInfo& c = cit->second;
    CqeRecord r{e.u("index"),  e.u("wr_id"),      uint32_t(e.u("qp")), e.s("opcode"),
                e.s("status"), e.u("status_num"), e.u("byte_len"),     pos};
    c.produced = std::max(c.produced, r.index + 1);
    c.recent.push_back(std::move(r));
    size_t keep = std::min<size_t>(c.entries ? c.entries : CqInfo::kMaxRecent, CqInfo::kMaxRecent);
    if (c.recent.size() > keep) c.recent.erase(c.recent.begin(), c.recent.begin() + (c.recent.size() - keep));
    if (e.u("status_num") != 0) counters["cqe_error"]++;
  } else if (k == "pkt_tx" || k == "pkt_rx") {
    auto qit = qps.find(uint32_t(e.u("qp")));
    if (qit != qps.end()) {
      QpInfo& q = qit->second;
      if (k == "pkt_tx") q.last_tx_psn = e.u("psn"), q.has_tx = true, q.last_tx_dest_qp = uint32_t(e.u("dest_qp"));
      else q.last_rx_psn = e.u("psn"), q.has_rx = true;
    }
    if (k == "pkt_tx" && e.has("fault")) counters["fault_" + e.s("fault")]++;
    if (e.has("aeth")) counters[k + "_" + e.sub_s("aeth", "class", "ACK")]++;
  } else if (k == "error") {
    auto qit = qps.find(uint32_t(e.u("qp")));
    if (qit != qps.end()) qit->second.last_error = e.s("rule");
  } else if (k == "step") {
    paused = e.b("paused");
  } else {
    return false;
  }
  return true;
}

}  // namespace simnic::viz
