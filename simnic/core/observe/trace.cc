#include "simnic/core/observe/trace.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace simnic::core {

namespace {

// Numbers and strings are appended in place: an event is built in a buffer reused from the
// previous one, with no temporary strings, because with a viewer's history on every packet
// makes several events (docs/performance.md, "Tracing's cost").
template <class Int>
void append_number(std::string& out, Int v, int base = 10) {
  char b[24];
  const auto r = std::to_chars(b, b + sizeof b, v, base);
  out.append(b, r.ptr);
}

// A JSON string's characters (RFC 8259, section 7): most strings need no escape at all.
void append_escaped(std::string& out, std::string_view s) {
  size_t plain = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    const char c = s[k];
    const char* esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\t' ? "\\t" : nullptr;
    if (!esc && static_cast<unsigned char>(c) >= 0x20) continue;
    out.append(s.data() + plain, k - plain);
    plain = k + 1;
    if (esc) {
      out += esc;
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    }
  }
  out.append(s.data() + plain, s.size() - plain);
}

}  // namespace

std::string json_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  append_escaped(out, s);
  return out;
}

// --- The compact form ---------------------------------------------------------------------
// Header: seq (u64), t_ns (u64), kind (u8), the NIC's escaped name (text). Then per field: its
// type (one of kFieldTypes), its key (text), its value: a u64/i64/u8 as stored, or text.
// Text is a u32 length and the bytes. Only this file reads or writes it.

namespace {

constexpr char kU = 'u', kI = 'i', kB = 'b', kS = 's', kX = 'x', kR = 'r', kP = 'p';

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_text(std::string& out, std::string_view s) {
  put<uint32_t>(out, uint32_t(s.size()));
  out.append(s);
}
template <class T>
T get(std::string_view& in) {
  T v{};
  if (in.size() < sizeof v) return in = {}, v;
  std::memcpy(&v, in.data(), sizeof v);
  in.remove_prefix(sizeof v);
  return v;
}
std::string_view get_text(std::string_view& in) {
  const uint32_t n = std::min<uint32_t>(get<uint32_t>(in), uint32_t(in.size()));
  const std::string_view s = in.substr(0, n);
  in.remove_prefix(n);
  return s;
}

}  // namespace

bool trace_event_is(std::string_view event, TraceKind kind) {
  return event.size() > 16 && uint8_t(event[16]) == uint8_t(kind);  // after seq and t_ns
}

void append_trace_json(std::string& out, std::string_view ev) {
  out += "{\"seq\":";
  append_number(out, get<uint64_t>(ev));
  out += ",\"t_ns\":";
  append_number(out, get<uint64_t>(ev));
  const auto kind = size_t(get<uint8_t>(ev));
  out += ",\"nic\":\"";
  out += get_text(ev);
  out += "\",\"kind\":\"";
  out += kind < kTraceKindCount ? trace_kind_name(TraceKind(kind)) : "unknown";
  out += '"';
  while (!ev.empty()) {
    const char type = ev[0];
    ev.remove_prefix(1);
    out += ",\"";
    out += get_text(ev);
    out += "\":";
    switch (type) {
      case kU: append_number(out, get<uint64_t>(ev)); break;
      case kI: append_number(out, get<int64_t>(ev)); break;
      case kB: out += get<uint8_t>(ev) ? "true" : "false"; break;
      case kX:
        out += "\"0x";
        append_number(out, get<uint64_t>(ev), 16);
        out += '"';
        break;
      case kS:
        out += '"';
        append_escaped(out, get_text(ev));
        out += '"';
        break;
      case kP: {
        const uint32_t a = get<uint32_t>(ev);
        out += '"';
        for (int shift = 24; shift >= 0; shift -= 8) {
          append_number(out, (a >> shift) & 255u);
          if (shift) out += '.';
        }
        out += '"';
        break;
      }
      default: out += get_text(ev); break;  // kR: JSON as given
    }
  }
  out += '}';
}

std::string trace_json(std::string_view event) {
  std::string out;
  out.reserve(256);
  append_trace_json(out, event);
  return out;
}

TraceEvent::TraceEvent(Tracer* t, TraceKind kind) : t_(t) {
  if (!t_) return;
  line_.swap(t_->spare_);
  line_.clear();
  put<uint64_t>(line_, ++t_->seq_);
  put<uint64_t>(line_, t_->t_ns_);
  put<uint8_t>(line_, uint8_t(kind));
  put_text(line_, t_->nic_json_);
}

TraceEvent::~TraceEvent() {
  if (!t_) return;
  t_->sink_->write_event(line_);
  if (t_->spare_.capacity() < line_.capacity()) t_->spare_.swap(line_);
}

void TraceEvent::key(const char* k) { put_text(line_, k); }

TraceEvent& TraceEvent::u(const char* k, uint64_t v) {
  if (t_) line_ += kU, key(k), put<uint64_t>(line_, v);
  return *this;
}

TraceEvent& TraceEvent::i(const char* k, int64_t v) {
  if (t_) line_ += kI, key(k), put<int64_t>(line_, v);
  return *this;
}

TraceEvent& TraceEvent::b(const char* k, bool v) {
  if (t_) line_ += kB, key(k), put<uint8_t>(line_, v ? 1 : 0);
  return *this;
}

TraceEvent& TraceEvent::s(const char* k, std::string_view v) {
  if (t_) line_ += kS, key(k), put_text(line_, v);
  return *this;
}

TraceEvent& TraceEvent::ip(const char* k, uint32_t ipv4) {
  if (t_) line_ += kP, key(k), put<uint32_t>(line_, ipv4);
  return *this;
}

TraceEvent& TraceEvent::hex(const char* k, uint64_t v) {
  if (t_) line_ += kX, key(k), put<uint64_t>(line_, v);
  return *this;
}

TraceEvent& TraceEvent::raw(const char* k, const std::string& json) {
  if (t_) line_ += kR, key(k), put_text(line_, json);
  return *this;
}

}  // namespace simnic::core
