// The IB QP state machine drawn as a diagram with the QP's current state lit and its last
// transition drawn as a bold arrow.
#pragma once
#include <string>

namespace simnic::viz {

// Reserves `w` x `h` at the cursor.
void draw_qp_diagram(const std::string& state, const std::string& prev_state, float w, float h);

}  // namespace simnic::viz
