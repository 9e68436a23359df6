// `simnic run --netns`: an unprivileged user + network namespace with one veth per NIC,
// made over rtnetlink directly (no `ip` binary needed). See netns.h.
#include "simnic/cli/netns.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "simnic/abi/control.h"
#include "simnic/cli/cli.h"

namespace simnic::cli {
namespace {

// One rtnetlink request: header, the fixed message (ifinfomsg, ifaddrmsg) and attributes,
// nested ones closed by end_nest. Everything 4-byte aligned as NLMSG_ALIGN and RTA_ALIGN want.
class NlRequest {
 public:
  NlRequest(uint16_t type, uint16_t flags) : buf_(NLMSG_HDRLEN, 0) {
    header()->nlmsg_type = type;
    header()->nlmsg_flags = uint16_t(NLM_F_REQUEST | NLM_F_ACK | flags);
  }
  template <class T>
  void put(const T& fixed) {
    append(&fixed, sizeof fixed);
  }
  void attr(uint16_t type, const void* data, size_t len) {
    rtattr a{};
    a.rta_len = uint16_t(RTA_LENGTH(len));
    a.rta_type = type;
    append(&a, sizeof a);
    append(data, len);
  }
  void attr(uint16_t type, const std::string& text) { attr(type, text.c_str(), text.size() + 1); }
  size_t begin_nest(uint16_t type) {
    const size_t at = buf_.size();
    attr(type, nullptr, 0);
    return at;
  }
  void end_nest(size_t at) { reinterpret_cast<rtattr*>(&buf_[at])->rta_len = uint16_t(buf_.size() - at); }
  nlmsghdr* finish(uint32_t seq) {
    header()->nlmsg_len = uint32_t(buf_.size());
    header()->nlmsg_seq = seq;
    return header();
  }

 private:
  nlmsghdr* header() { return reinterpret_cast<nlmsghdr*>(buf_.data()); }
  void append(const void* p, size_t len) {
    const size_t at = buf_.size();
    buf_.resize(at + NLMSG_ALIGN(len), 0);
    if (len) std::memcpy(&buf_[at], p, len);
  }
  std::vector<uint8_t> buf_;
};

// A NETLINK_ROUTE socket sending one request at a time and reading its acknowledgement.
class Rtnetlink {
 public:
  Rtnetlink() : fd_(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE)) {}
  ~Rtnetlink() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  // 0, or the errno the kernel answered with.
  int request(NlRequest& req) {
    nlmsghdr* msg = req.finish(++seq_);
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (::sendto(fd_, msg, msg->nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) return errno;
    return read_ack();
  }

 private:
  int read_ack() {
    alignas(nlmsghdr) char buf[8192];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0) return errno == EINTR ? read_ack() : errno;
      int len = int(n);
      for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
        if (h->nlmsg_seq != seq_ || h->nlmsg_type != NLMSG_ERROR) continue;
        return -static_cast<const nlmsgerr*>(NLMSG_DATA(h))->error;
      }
    }
  }
  int fd_;
  uint32_t seq_ = 0;
};

int set_up(Rtnetlink& nl, const std::string& ifname) {
  const unsigned index = ::if_nametoindex(ifname.c_str());
  if (!index) return errno;
  NlRequest req(RTM_NEWLINK, 0);
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = int(index);
  ifi.ifi_flags = IFF_UP;
  ifi.ifi_change = IFF_UP;
  req.put(ifi);
  return nl.request(req);
}

// `ip link add NAME type veth peer name PEER`.
int add_veth(Rtnetlink& nl, const std::string& name, const std::string& peer) {
  NlRequest req(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  req.put(ifi);
  req.attr(IFLA_IFNAME, name);
  const size_t linkinfo = req.begin_nest(IFLA_LINKINFO);
  req.attr(IFLA_INFO_KIND, std::string("veth"));
  const size_t data = req.begin_nest(IFLA_INFO_DATA);
  const size_t peer_info = req.begin_nest(VETH_INFO_PEER);
  req.put(ifi);
  req.attr(IFLA_IFNAME, peer);
  req.end_nest(peer_info);
  req.end_nest(data);
  req.end_nest(linkinfo);
  return nl.request(req);
}

// `ip addr add IP/32 dev IFNAME`; a 127/8 address gets host scope, as `ip` gives it.
int add_address(Rtnetlink& nl, const std::string& ifname, in_addr ip) {
  const unsigned index = ::if_nametoindex(ifname.c_str());
  if (!index) return errno;
  NlRequest req(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
  ifaddrmsg ifa{};
  ifa.ifa_family = AF_INET;
  ifa.ifa_prefixlen = 32;
  ifa.ifa_scope = (ntohl(ip.s_addr) >> 24) == 127 ? RT_SCOPE_HOST : RT_SCOPE_UNIVERSE;
  ifa.ifa_index = index;
  req.put(ifa);
  req.attr(IFA_LOCAL, &ip, sizeof ip);
  req.attr(IFA_ADDRESS, &ip, sizeof ip);
  return nl.request(req);
}

bool write_file(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
  ::close(fd);
  return ok;
}

std::string errno_text(int e) {
  const char* name = strerrorname_np(e);
  return std::string(name ? name : "?") + " (" + std::strerror(e) + ")";
}

// Why unshare(CLONE_NEWUSER) fails where it does, and what the user can do.
std::string unshare_refused(int e) {
  std::string why = "simnic run --netns: cannot create a user and network namespace: unshare: " + errno_text(e) + ".\n";
  if (e == EPERM || e == EACCES)
    why +=
        "  Unprivileged user namespaces are forbidden here (kernel.unprivileged_userns_clone=0, AppArmor's\n"
        "  kernel.apparmor_restrict_unprivileged_userns=1, a seccomp filter, or a container that blocks them).\n";
  else if (e == ENOSPC || e == EUSERS)
    why += "  The limit of user namespaces is reached (user.max_user_namespaces is 0 or used up).\n";
  else if (e == EINVAL) why += "  The kernel has no user namespaces (CONFIG_USER_NS).\n";
  return why + "  Run without --netns (see docs/cli.md for what then differs).";
}

struct NicAddress {
  std::string name;
  in_addr ip{};
};

std::vector<NicAddress> nic_addresses(const std::string& dir) {
  std::vector<NicAddress> out;
  for (const std::string& name : list_nics(dir)) {
    std::string text;
    if (query_nic(dir, name, unsigned(abi::Op::Status), "", &text)) continue;  // not answering: no interface
    NicAddress n{name, {}};
    if (inet_pton(AF_INET, parse_kv(text)["addr"].c_str(), &n.ip) == 1 && n.ip.s_addr) out.push_back(n);
  }
  return out;
}

// The interface of NIC number `i`: the NIC's own name where it is a valid interface name.
std::string interface_name(const std::string& nic, size_t i) {
  const bool fits = !nic.empty() && nic.size() < IFNAMSIZ && nic.find_first_of("/: \t\n") == std::string::npos &&
                    nic != "." && nic != "..";
  return fits ? nic : "snic" + std::to_string(i);
}

std::string make_interfaces(const std::vector<NicAddress>& nics) {
  Rtnetlink nl;
  if (!nl.ok()) return "simnic run --netns: cannot open rtnetlink: " + errno_text(errno);
  if (int e = set_up(nl, "lo")) return "simnic run --netns: cannot bring lo up: " + errno_text(e);
  for (size_t i = 0; i < nics.size(); ++i) {
    const std::string name = interface_name(nics[i].name, i), peer = "snp" + std::to_string(i);
    auto refused = [&](const char* step, int e) {
      return "simnic run --netns: NIC " + nics[i].name + ": cannot " + step + " " + name + ": " + errno_text(e);
    };
    if (int e = add_veth(nl, name, peer)) return refused("create the veth pair", e);
    if (int e = add_address(nl, name, nics[i].ip)) return refused("give its address to", e);
    if (int e = set_up(nl, peer)) return refused("bring up the peer of", e);
    if (int e = set_up(nl, name)) return refused("bring up", e);
  }
  return "";
}

}  // namespace

std::string enter_netns(const std::string& dir) {
  const std::vector<NicAddress> nics = nic_addresses(dir);  // asked before: the sockets work from anywhere
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) return unshare_refused(errno);
  // Mapped to ourselves, not to root: the program keeps its uid (mpirun refuses to run as root)
  // and loses the namespace's capabilities at exec; until then they let us make the links.
  // setgroups must be denied before an unprivileged process may write gid_map.
  if (!write_file("/proc/self/setgroups", "deny") ||
      !write_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1\n") ||
      !write_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1\n"))
    return "simnic run --netns: cannot map uid " + std::to_string(uid) + " and gid " + std::to_string(gid) +
           " in the new user namespace: " + errno_text(errno);
  return make_interfaces(nics);
}

}  // namespace simnic::cli
