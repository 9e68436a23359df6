#include "simnic/core/observe/trace.h"

#include <cstdio>

namespace simnic::core {

std::string json_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += c;
        }
    }
  }
  return out;
}

TraceEvent::TraceEvent(Tracer* t, TraceKind kind) : t_(t) {
  if (!t_) return;
  line_.reserve(256);
  line_ = "{\"seq\":" + std::to_string(++t_->seq_) + ",\"t_ns\":" + std::to_string(t_->t_ns_) + ",\"nic\":\"" +
          json_escape(t_->nic_) + "\",\"kind\":\"" + trace_kind_name(kind) + "\"";
}

TraceEvent::~TraceEvent() {
  if (!t_) return;
  line_ += "}";
  t_->sink_->write_line(line_);
}

void TraceEvent::key(const char* k) {
  line_ += ",\"";
  line_ += k;
  line_ += "\":";
}

TraceEvent& TraceEvent::u(const char* k, uint64_t v) {
  if (t_) key(k), line_ += std::to_string(v);
  return *this;
}

TraceEvent& TraceEvent::i(const char* k, int64_t v) {
  if (t_) key(k), line_ += std::to_string(v);
  return *this;
}

TraceEvent& TraceEvent::b(const char* k, bool v) {
  if (t_) key(k), line_ += v ? "true" : "false";
  return *this;
}

TraceEvent& TraceEvent::s(const char* k, const std::string& v) {
  if (t_) key(k), line_ += "\"" + json_escape(v) + "\"";
  return *this;
}

TraceEvent& TraceEvent::hex(const char* k, uint64_t v) {
  if (!t_) return *this;
  char b[24];
  std::snprintf(b, sizeof b, "\"0x%llx\"", static_cast<unsigned long long>(v));
  key(k);
  line_ += b;
  return *this;
}

TraceEvent& TraceEvent::raw(const char* k, const std::string& json) {
  if (t_) key(k), line_ += json;
  return *this;
}

}  // namespace simnic::core
