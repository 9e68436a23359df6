// A listening Unix socket only this user can reach: the control socket (SOCK_SEQPACKET) and
// the trace socket (SOCK_STREAM) are both made here.
#pragma once
#include <string>

namespace simnic::io {

// Binds a non-blocking, close-on-exec socket of `type` at `path` (an existing file there is
// removed first) with umask 0077, and listens. Returns the descriptor, or -1 with *error set;
// `what` names the socket in the error ("control", "telemetry").
int listen_private_unix(const std::string& path, int type, int backlog, const char* what, std::string* error);

}  // namespace simnic::io
