// The object tables' lookups, and the names (QPNs, keys) drawn for new objects.
#include "simnic/core/objects/tables.h"

namespace simnic::core {

Qp* ObjectTables::find_qp_by_qpn(uint32_t qpn) {
  auto it = qp_by_qpn_.find(qpn);
  return it == qp_by_qpn_.end() ? nullptr : it->second;
}

const Mr* ObjectTables::find_mr_by_key(uint32_t key) const {
  auto it = mr_by_key_.find(key);
  return it == mr_by_key_.end() ? nullptr : it->second;
}

Mw* ObjectTables::find_mw_by_rkey_index(uint32_t rkey) const {
  auto it = mws_.find(rkey >> 8);
  return it == mws_.end() ? nullptr : it->second.get();
}

// ---------------------------------------------------------------- names others must not guess

// A QPN nobody uses, drawn at random from the 24-bit space: not QP0/QP1 (the special QPs) and
// not 0xffffff (the multicast QPN, IBA 10.5.2.1).
uint32_t ObjectTables::new_qpn() {
  for (;;) {
    const uint32_t qpn = keys_.next() & 0xffffff;
    if (qpn > 1 && qpn != 0xffffff && !qp_by_qpn_.count(qpn)) return qpn;
  }
}

// MR keys have the top bit clear and memory-window rkeys have it set (their index is at least
// 0x800000), so a key names at most one of the two.
uint32_t ObjectTables::new_mr_key() {
  for (;;) {
    const uint32_t key = keys_.next() & 0x7fffffff;
    if (key && !mr_by_key_.count(key)) return key;
  }
}

uint32_t ObjectTables::new_mw_index() {
  for (;;) {
    const uint32_t index = 0x800000 | (keys_.next() & 0x7fffff);
    if (!mws_.count(index)) return index;
  }
}

}  // namespace simnic::core
