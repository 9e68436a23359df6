// Opening the files simnicd writes (pcap, trace) without following a symlink someone planted
// where the file should be: a shared output directory must not let another user point our
// writes at a file of theirs or of root's.
#pragma once
#include <cstdio>
#include <string>

namespace simnic::io {

// fopen(path, "w") with O_NOFOLLOW|O_CLOEXEC and mode 0600 for a new file. On failure returns
// nullptr and says why in *error (a symlink is named as such).
std::FILE* open_output_file(const std::string& path, const char* what, std::string* error);

}  // namespace simnic::io
