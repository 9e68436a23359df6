// `simnic restart`: simnicd executes itself anew, same pid and command line, each NIC's bound
// UDP socket handed to the new image, so no NIC's address is ever free for another local user
// to bind (issue 29 point 3; docs/security.md).
#pragma once
#include <string>
#include <vector>

namespace simnic::io {

// Executes this process' binary again with its command line, giving the i-th NIC on it (the
// parts between --next) the option --udp-fd fds[i] in place of any it had. Returns only when
// the exec failed: its errno, with every fd's close-on-exec flag as it was.
int exec_in_place(const std::vector<int>& fds);

}  // namespace simnic::io
