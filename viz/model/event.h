// One trace event as simnic-viz holds it (docs/trace-format.md): the common fields pulled out,
// the whole JSON object kept for the inspector and for fields only some kinds carry.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace simnic::viz {

struct Event {
  uint64_t seq = 0;   // per-NIC sequence number
  uint64_t t_ns = 0;  // the NIC's simulated time
  std::string nic;
  std::string kind;
  nlohmann::ordered_json fields;  // the whole line

  uint64_t u(const char* key, uint64_t fallback = 0) const;
  std::string s(const char* key, const std::string& fallback = "") const;
  bool b(const char* key) const;
  // A string inside an object field (e.g. aeth.class); `fallback` when either is missing or of
  // another type: a trace is input, and a malformed line must not throw.
  std::string sub_s(const char* object, const char* key, const std::string& fallback) const;
  bool has(const char* key) const { return fields.contains(key); }
  // "0x7f.." strings and plain numbers both read as numbers.
  uint64_t addr(const char* key) const;
};

// Parses one JSON line. Lines that are not JSON objects with nic/kind/seq are rejected
// (nullopt), never thrown: a live stream may end mid-line.
std::optional<Event> parse_event_line(const std::string& line);

// A one-line human summary, e.g. "pkt_tx RC_SEND_FIRST psn 1200 -> qp 18 (1024 B)".
std::string summarize(const Event& e);

}  // namespace simnic::viz
