// One-line explanations of every trace field and event kind, for the inspector: simnic-viz is
// a teaching tool, so each decoded header field says what it is for.
#pragma once
#include <string>

namespace simnic::viz {

// `kind` gives context where one name means different things (e.g. "index" of a WQE vs a CQE);
// `key` may be dotted for nested headers ("aeth.msn"). Returns "" when there is nothing to say.
std::string explain_field(const std::string& kind, const std::string& key);
std::string explain_kind(const std::string& kind);
// What an AETH syndrome means, e.g. "ACK, credits 31" or "NAK: PSN sequence error".
std::string explain_syndrome(unsigned syndrome);

}  // namespace simnic::viz
