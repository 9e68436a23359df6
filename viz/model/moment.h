// Which moment of a recorded run a screenshot shows when it is not told (--screenshot without
// --at): the end of a run is its teardown, where every object is destroyed and the panels are
// empty, so the picture shows the last data transfer instead.
#pragma once
#include <cstddef>

#include "viz/model/event.h"
#include "viz/model/timeline.h"

namespace simnic::viz {

// A data packet (a pkt_tx or pkt_rx carrying payload; CM MADs are connection set-up, not data)
// or a completion (not a flushed one: that work request moved nothing).
bool is_data_transfer(const Event& e);

// The playhead that shows the last data transfer applied: one past the last is_data_transfer
// event. A run that moved no data: one past the last event before its teardown (the first
// destroy or close after the last create); a run without either: the end.
size_t last_transfer_pos(const Timeline& tl);

}  // namespace simnic::viz
