#include "simnic/io/unix_listen.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace simnic::io {

int listen_private_unix(const std::string& path, int type, int backlog, const char* what, std::string* error) {
  ::unlink(path.c_str());
  int ls = ::socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    *error = std::string(what) + " socket path too long: " + path;
    ::close(ls);
    return -1;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  mode_t old = ::umask(0077);  // only this user may talk to the NIC
  int rc = ::bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::umask(old);
  if (rc != 0 || ::listen(ls, backlog) != 0) {
    *error = "cannot listen on " + path + ": " + std::strerror(errno);
    ::close(ls);
    return -1;
  }
  return ls;
}

}  // namespace simnic::io
