// libFuzzer target: the trace reader simnic-viz uses (viz/model): JSON lines parsed into events
// (parse_event_line), ordered across NICs (TimelineMerge), replayed into the timeline and the
// NIC state the panels draw (Timeline, NicState), summarized and labelled as the panels do.
// The input is a trace file, or a live stream that may stop mid-line.
#include <string>
#include <vector>

#include "viz/model/event.h"
#include "viz/model/packet_class.h"
#include "viz/model/timeline.h"
#include "viz/model/timeline_merge.h"

using namespace simnic::viz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  TimelineMerge merge;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (auto e = parse_event_line(text.substr(start, end - start))) {
      (void)summarize(*e);
      if (e->kind == "pkt_tx" || e->kind == "pkt_rx") (void)packet_label(*e);
      (void)e->addr("va");
      merge.push(std::move(*e));
    }
    start = end + 1;
  }
  Timeline timeline;
  timeline.append(merge.drain(/*all_in=*/true));
  if (!timeline.empty()) {
    // What the timeline panel asks for while the user scrubs: states and flights at positions.
    (void)timeline.state_at(timeline.first_pos());
    (void)timeline.state_at(timeline.end_pos() - 1);
    (void)timeline.flights_at(double(timeline.end_pos()) / 2);
    for (const std::string& nic : timeline.nics()) (void)timeline.find(nic, 1);
    timeline.trim(timeline.end_pos() / 2 + 1);
  }
  return 0;
}
