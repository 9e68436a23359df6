// NIC-wide counters, shown by `simnic status`. Every drop has a counter that says why. The
// list, with what each counts, is simnic/abi/device_counters.h.
#pragma once
#include <cstdint>

#include "simnic/abi/device_counters.h"

namespace simnic::core {

struct DeviceCounters {
#define SIMNIC_DECLARE_COUNTER(name, meaning) uint64_t name = 0;
  SIMNIC_DEVICE_COUNTERS(SIMNIC_DECLARE_COUNTER)
#undef SIMNIC_DECLARE_COUNTER

  template <class F>
  void for_each(F&& f) const {
#define SIMNIC_VISIT_COUNTER(name, meaning) f(#name, name);
    SIMNIC_DEVICE_COUNTERS(SIMNIC_VISIT_COUNTER)
#undef SIMNIC_VISIT_COUNTER
  }

  // The name of the counter `member` points to (the drop table names counters by member).
  static const char* name_of(uint64_t DeviceCounters::*member) {
#define SIMNIC_NAME_COUNTER(name, meaning) \
  if (member == &DeviceCounters::name) return #name;
    SIMNIC_DEVICE_COUNTERS(SIMNIC_NAME_COUNTER)
#undef SIMNIC_NAME_COUNTER
    return "";
  }
};

}  // namespace simnic::core
