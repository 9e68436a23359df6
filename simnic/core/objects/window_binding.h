// The memory-window data path (IBA 10.6.7): BIND_MW and LOCAL_INV executed in SQ order,
// invalidation by SEND_WITH_INV, and the check of a remote access through a window's rkey.
// Owns no state of its own (the windows are Device's table); calls only the Device's shared
// helpers (owned, find_mr_by_key, find_mw_by_rkey_index, the MW table, the tracer).
#pragma once
#include <cstdint>
#include <string>

#include "simnic/core/objects/objects.h"

namespace simnic::core {

class Device;

class WindowBinding {
 public:
  explicit WindowBinding(Device& dev) : dev_(dev) {}

  // Executes a BIND_MW or LOCAL_INV WQE; IBV_WC_SUCCESS or the status it completes with.
  ibv_wc_status execute_local_wqe(Qp& qp, const abi::SendWqe& w, std::string* why);
  // LOCAL_INV, or SEND_WITH_INV at the responder: frees the type 2 window `rkey` names.
  bool invalidate_mw(Qp& qp, uint32_t rkey, const char* by, std::string* why);
  const Mr* check_mw_access(const Qp& qp, const Mw& mw, uint32_t rkey, uint64_t va, uint64_t len, uint32_t access,
                            uint64_t* mr_va, std::string* why) const;
  void unbind_mw(Mw& mw);
  void unbind_mws_of_qp(const Qp& qp);  // a destroyed QP's type 2 windows become free

 private:
  void bind_mw(Qp& qp, const abi::SendWqe& w, Mw& mw, const Mr* mr);  // checked: binds it

  Device& dev_;
};

}  // namespace simnic::core
