// How numbers read in simnic-viz: QPNs, PSNs and keys in hex ("0x1a2b3c"), as the NIC's logs,
// ibv_rc_pingpong and perftest print them; the inspector adds the decimal value.
#pragma once
#include <cstdint>
#include <string>

namespace simnic::viz {

// "0x1a2b3c".
std::string hex(uint64_t v);
// "0x1a2b3c (1715004)": hex first, decimal in parentheses (the inspector).
std::string hex_dec(uint64_t v);
// Whether a trace field holds a QPN, PSN or key (shown in hex), by its name.
bool is_hex_field(const std::string& key);

}  // namespace simnic::viz
