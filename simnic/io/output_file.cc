#include "simnic/io/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace simnic::io {

std::FILE* open_output_file(const std::string& path, const char* what, std::string* error) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    int e = errno;
    *error = std::string("cannot write ") + what + " " + path + ": " +
             (e == ELOOP ? "it is a symbolic link, which simnicd never writes through; remove it"
                         : std::strerror(e));
    return nullptr;
  }
  std::FILE* f = ::fdopen(fd, "w");
  if (!f) {
    *error = std::string("cannot write ") + what + " " + path + ": " + std::strerror(errno);
    ::close(fd);
  }
  return f;
}

}  // namespace simnic::io
