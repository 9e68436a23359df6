// The names of completion statuses (the CQEs themselves: completions.cc).
#include "simnic/abi/wc_status.h"
#include "simnic/core/device.h"

namespace simnic::core {

const char* wc_status_name(ibv_wc_status status) { return abi::wc_status_str(status); }

}  // namespace simnic::core
