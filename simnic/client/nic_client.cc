#include "simnic/client/nic_client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <sstream>

#include "simnic/abi/paths.h"
#include "simnic/abi/seqpacket.h"
#include "simnic/abi/state_dir.h"

namespace simnic::client {

std::vector<std::string> list_nics(const std::string& dir) { return abi::nic_names_in(dir); }

int query_nic(const std::string& dir, const std::string& name, unsigned op, const std::string& body,
              std::string* text) {
  std::string why;
  int fd = abi::connect_nic(abi::control_socket_path(dir, name), &why);
  if (fd < 0) {
    int e = errno;
    if (!why.empty()) std::fprintf(stderr, "simnic: %s\n", why.c_str());
    return e;
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  abi::HelloReply hello{};
  int st = abi::call_fixed(fd, abi::Op::Hello, abi::HelloReq{abi::kAbiVersion, 0}, &hello);
  if (st == 0 && op != unsigned(abi::Op::Hello)) {
    std::vector<uint8_t> reply;
    st = abi::call(fd, abi::Op(op), body.data(), body.size(), reply);
    if (text) text->assign(reply.begin(), reply.end());
  }
  ::close(fd);
  return st;
}

std::map<std::string, std::string> parse_kv(const std::string& text) {
  std::map<std::string, std::string> kv;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto sp = line.find(' ');
    if (sp != std::string::npos) kv[line.substr(0, sp)] = line.substr(sp + 1);
  }
  return kv;
}

}  // namespace simnic::client
