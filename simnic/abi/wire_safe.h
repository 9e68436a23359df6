// What a struct must be to cross a socket as bytes between the shim (or librdmacm) and
// simnicd: trivially copyable, standard layout. Its own header so that the CM's messages
// (cm.h), which the core's CmAgent uses, need not bring the control protocol (control.h).
#pragma once
#include <type_traits>

namespace simnic::abi {

template <class T>
constexpr bool kWireSafe = std::is_trivially_copyable_v<T>&& std::is_standard_layout_v<T>;

}  // namespace simnic::abi
