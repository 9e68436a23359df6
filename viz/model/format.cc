#include "viz/model/format.h"

#include <cstdio>

namespace simnic::viz {

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

std::string hex_dec(uint64_t v) { return hex(v) + " (" + std::to_string(v) + ")"; }

bool is_hex_field(const std::string& key) {
  for (const char* k : {"qp", "dest_qp", "src_qp", "psn", "sq_psn", "rq_psn", "lkey", "rkey", "key", "ieth_rkey",
                        "qkey", "syndrome", "msn", "imm"})
    if (key == k) return true;
  return false;
}

}  // namespace simnic::viz
