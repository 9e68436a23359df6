#include "viz/model/moment.h"

#include <string>

namespace simnic::viz {

namespace {

bool ends_with(const std::string& s, const char* tail) {
  const std::string t(tail);
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

bool is_teardown(const Event& e) { return ends_with(e.kind, "_destroy") || ends_with(e.kind, "_close"); }
bool is_creation(const Event& e) { return ends_with(e.kind, "_create") || ends_with(e.kind, "_open"); }

}  // namespace

bool is_data_transfer(const Event& e) {
  // A flushed work request (IBV_WC_WR_FLUSH_ERR) moved nothing: its QP was already in ERR.
  constexpr uint64_t kFlushed = 5;
  if (e.kind == "cqe") return e.u("status_num") != kFlushed;
  return (e.kind == "pkt_tx" || e.kind == "pkt_rx") && e.u("payload") > 0 && !e.has("cm");
}

size_t last_transfer_pos(const Timeline& tl) {
  if (tl.empty()) return tl.end_pos();
  for (size_t p = tl.end_pos(); p-- > tl.first_pos();)
    if (is_data_transfer(tl.at(p))) return p + 1;
  // No data moved: the moment before teardown began, when the objects all still exist.
  size_t last_create = tl.first_pos();
  for (size_t p = tl.first_pos(); p < tl.end_pos(); ++p)
    if (is_creation(tl.at(p))) last_create = p;
  for (size_t p = last_create; p < tl.end_pos(); ++p)
    if (is_teardown(tl.at(p))) return p;
  return tl.end_pos();
}

}  // namespace simnic::viz
