#include "viz/model/event.h"

#include "viz/model/format.h"

#include <cstdio>
#include <cstdlib>

namespace simnic::viz {

uint64_t Event::u(const char* key, uint64_t fallback) const {
  auto it = fields.find(key);
  if (it == fields.end()) return fallback;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer()) return uint64_t(it->get<int64_t>());
  if (it->is_boolean()) return it->get<bool>() ? 1 : 0;
  if (it->is_string()) return std::strtoull(it->get_ref<const std::string&>().c_str(), nullptr, 0);
  return fallback;
}

std::string Event::s(const char* key, const std::string& fallback) const {
  auto it = fields.find(key);
  if (it == fields.end()) return fallback;
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

bool Event::b(const char* key) const {
  auto it = fields.find(key);
  return it != fields.end() && it->is_boolean() && it->get<bool>();
}

std::string Event::sub_s(const char* object, const char* key, const std::string& fallback) const {
  auto it = fields.find(object);
  if (it == fields.end() || !it->is_object()) return fallback;
  auto sub = it->find(key);
  return sub != it->end() && sub->is_string() ? sub->get<std::string>() : fallback;
}

uint64_t Event::addr(const char* key) const { return u(key); }

std::optional<Event> parse_event_line(const std::string& line) {
  auto j = nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto nic = j.find("nic"), kind = j.find("kind"), seq = j.find("seq");
  if (nic == j.end() || !nic->is_string() || kind == j.end() || !kind->is_string() || seq == j.end() ||
      !seq->is_number_unsigned())
    return std::nullopt;
  Event e;
  e.nic = nic->get<std::string>();
  e.kind = kind->get<std::string>();
  e.seq = seq->get<uint64_t>();
  if (auto t = j.find("t_ns"); t != j.end() && t->is_number_unsigned()) e.t_ns = t->get<uint64_t>();
  e.fields = std::move(j);
  return e;
}

std::string summarize(const Event& e) {
  const std::string& k = e.kind;
  std::string out = k;
  auto add = [&](const std::string& s) { out += " " + s; };
  if (k == "pkt_tx" || k == "pkt_rx") {
    add(e.s("opcode"));
    if (e.has("cm")) add("CM " + e.s("cm"));  // a connection manager MAD (QP1)
    add("psn " + hex(e.u("psn")));
    if (e.u("dest_qp") == 0xffffff) add((k == "pkt_tx" ? "-> group " : "group ") + e.s("dst"));  // multicast
    else add((k == "pkt_tx" ? "-> qp " : "qp ") + hex(k == "pkt_tx" ? e.u("dest_qp") : e.u("qp")));
    if (e.u("payload")) add("(" + std::to_string(e.u("payload")) + " B)");
    if (e.has("aeth")) add(e.sub_s("aeth", "class", ""));
    if (e.has("fault")) add("[" + e.s("fault") + "]");
  } else if (k == "wqe_posted") {
    add(e.s("queue") + "[" + std::to_string(e.u("index")) + "] qp " + hex(e.u("qp")) + " " + e.s("opcode") + " wr_id " +
        std::to_string(e.u("wr_id")) + " len " + std::to_string(e.u("length")));
  } else if (k == "wqe_done") {
    add(e.s("queue") + "[" + std::to_string(e.u("index")) + "] qp " + hex(e.u("qp")));
  } else if (k == "cqe") {
    add("cq " + std::to_string(e.u("cq")) + "[" + std::to_string(e.u("index")) + "] " + e.s("opcode") + " " +
        e.s("status") + " qp " + hex(e.u("qp")) + " wr_id " + std::to_string(e.u("wr_id")) + " len " +
        std::to_string(e.u("byte_len")));
  } else if (k == "qp_state") {
    add("qp " + hex(e.u("qp")) + " " + e.s("from") + " -> " + e.s("to"));
  } else if (k == "cm_state") {  // the connection manager's id (rdma_cm) changed state
    add("cm id " + std::to_string(e.u("id")) + " " + e.s("from") + " -> " + e.s("to") + " (" + e.s("cause") + ")");
  } else if (k == "cm_event") {
    add("cm id " + std::to_string(e.u("id")) + " RDMA_CM_EVENT_" + e.s("event"));
    if (const auto st = e.fields.find("status"); st != e.fields.end() && st->is_number_integer() && st->get<int64_t>())
      add("status " + std::to_string(st->get<int64_t>()));
  } else if (k == "cm_rx") {
    add(e.s("cm") + " from " + e.s("src"));
  } else if (k == "nak") {
    add("qp " + hex(e.u("qp")) + " psn " + hex(e.u("psn")) + " " + e.s("code"));
  } else if (k == "retransmit") {
    add("qp " + hex(e.u("qp")) + " psn " + hex(e.u("psn")) + " (" + e.s("cause") + ")");
  } else if (k == "timer") {
    add("qp " + hex(e.u("qp")) + " " + e.s("what") + " " + e.s("action"));
  } else if (k == "dma") {
    add(e.s("dir") + " " + std::to_string(e.u("length")) + " B at " + e.s("addr") + " key " + hex(e.u("key")));
  } else if (k == "error") {
    add("qp " + hex(e.u("qp")) + ": " + e.s("rule"));
  } else if (k == "pkt_drop") {  // the drop table's reason, then what was wrong with this packet
    add(e.s("reason"));
    if (e.has("detail")) out += ": " + e.s("detail");
  } else if (k == "qp_create" || k == "qp_destroy") {
    add(e.s("type") + " qp " + hex(e.u("qp")));
  } else if (k == "mr_create" || k == "mr_destroy") {
    add("mr " + std::to_string(e.u("mr")) + " lkey " + hex(e.u("lkey")) + " rkey " + hex(e.u("rkey")) + " len " +
        std::to_string(e.u("length")) + " " + e.s("access"));
  } else if (k == "mw_create" || k == "mw_destroy") {
    add("mw " + std::to_string(e.u("mw")) + " rkey " + hex(e.u("rkey")) +
        (k == "mw_create" ? " type " + std::to_string(e.u("type", 1)) : std::string()));
  } else if (k == "mw_bind") {
    add("mw " + std::to_string(e.u("mw")) + " rkey " + hex(e.u("rkey")) +
        (e.u("mr") ? " -> mr " + std::to_string(e.u("mr")) + " " + e.s("addr") + " len " +
                         std::to_string(e.u("length")) + " " + e.s("access")
                   : std::string(" unbound")));
  } else if (k == "mw_invalidate") {
    add("mw " + std::to_string(e.u("mw")) + " rkey " + hex(e.u("rkey")) + " by " + e.s("by"));
  } else if (k == "step") {
    add(e.b("paused") ? "paused" : "running");
  } else if (k == "engine_steps") {  // the named steps one packet walked in the completer or responder
    add(e.s("engine") + " qp " + hex(e.u("qp")) + " psn " + hex(e.u("psn")) + ": " + e.s("steps"));
  }
  // A live subscriber's snapshot line says what exists now, after the history.
  if (e.b("snapshot")) out += "  [snapshot: exists now]";
  return out;
}

}  // namespace simnic::viz
