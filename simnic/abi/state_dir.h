// Trust checks on the simnic directory and on the NICs that answer in it. Shared by the
// `simnic` tool, simnicd and the shim, so all three refuse the same things with the same words.
//
// The directory holds each NIC's control socket; whoever controls it can plant symlinks
// (simnicd would write its log through them) or a fake NIC (the shim would hand it the
// application's doorbell and event descriptors). So before anything is opened there, the
// directory must be ours: a real directory (not a symlink), owned by our uid, mode no wider
// than 0700, in a parent nobody else can rename it out of.
#pragma once
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "simnic/abi/seqpacket.h"

namespace simnic::abi {

namespace detail {

inline std::string octal_mode(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", unsigned(m & 07777));
  return buf;
}

inline std::string parent_of(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  auto slash = d.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : d.substr(0, slash);
}

inline unsigned read_number(const char* path, unsigned fallback) {
  unsigned v = fallback;
  if (FILE* f = std::fopen(path, "re")) {
    if (std::fscanf(f, "%u", &v) != 1) v = fallback;
    std::fclose(f);
  }
  return v;
}

// In a user namespace that maps only some uids (`simnic run --netns` maps the user to itself),
// files of every unmapped owner, root's included, show as the overflow uid (65534). There a
// parent owned by the overflow uid is taken as root's: /tmp and / would otherwise be refused.
// (It may be another unmapped user's: that namespace cannot tell, so the mode check remains.)
inline bool owned_by_root(uid_t owner) {
  if (owner == 0) return true;
  static const bool partial_map = [] {
    unsigned inside = 0, outside = 0, count = 0;
    FILE* f = std::fopen("/proc/self/uid_map", "re");
    if (!f) return false;
    const int n = std::fscanf(f, "%u %u %u", &inside, &outside, &count);
    std::fclose(f);
    return n == 3 && !(inside == 0 && outside == 0 && count == 4294967295u);
  }();
  return partial_map && owner == read_number("/proc/sys/kernel/overflowuid", 65534);
}

// Someone other than us (or root) who may rename entries of `parent` could swap our directory
// for theirs after we checked it. A sticky directory (/tmp) forbids renaming others' entries.
inline std::string check_parent(const std::string& dir) {
  const std::string parent = parent_of(dir);
  struct stat st {};
  if (::stat(parent.c_str(), &st) != 0) return "";  // mkdir/lstat of dir itself will say why
  const uid_t me = ::geteuid();
  if (st.st_uid != me && !owned_by_root(st.st_uid))
    return dir + ": its parent " + parent + " is owned by uid " + std::to_string(st.st_uid) + ", not you (uid " +
           std::to_string(me) + ") or root, who could replace it; use a directory of your own (set SIMNIC_DIR)";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
    return dir + ": its parent " + parent + " has mode " + octal_mode(st.st_mode) +
           " (others may rename what is in it, and it is not sticky like /tmp); use a directory of your own "
           "(set SIMNIC_DIR)";
  return "";
}

}  // namespace detail

// Checks an existing simnic directory. Returns "" when it is safe, else a sentence naming the
// directory, what is wrong and what to do. *missing (if given) tells a directory that does not
// exist yet, which is no danger for commands that only look.
inline std::string check_private_dir(const std::string& dir, bool* missing = nullptr) {
  if (missing) *missing = false;
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT && missing) *missing = true;
    return dir + ": " + std::strerror(errno);
  }
  const uid_t me = ::geteuid();
  if (S_ISLNK(st.st_mode))
    return dir +
           " is a symbolic link: simnic only uses a real directory of its own; remove the link or set "
           "SIMNIC_DIR";
  if (!S_ISDIR(st.st_mode)) return dir + " is not a directory; remove it or set SIMNIC_DIR";
  if (st.st_uid != me)
    return dir + " is owned by uid " + std::to_string(st.st_uid) + ", not you (uid " + std::to_string(me) +
           "): someone else created it; remove it or set SIMNIC_DIR";
  if (st.st_mode & 077)
    return dir + " has mode " + detail::octal_mode(st.st_mode) +
           ", so other users can reach the NICs' sockets in it; run `chmod 700 " + dir + "` or set SIMNIC_DIR";
  return detail::check_parent(dir);
}

// Creates the simnic directory (mode 0700) if needed, then checks it as above.
inline std::string make_private_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return "cannot create " + dir + ": " + std::strerror(errno);
  return check_private_dir(dir);
}

// The peer of a connected control socket must be a NIC we may trust with our descriptors:
// one running as our uid, or root's. Returns "" or why not.
inline std::string check_nic_peer(int fd, const std::string& path) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return path + ": cannot tell who serves it (" + std::strerror(errno) + ")";
  const uid_t me = ::geteuid();
  if (cred.uid == me || cred.uid == 0) return "";
  return path + " is served by uid " + std::to_string(cred.uid) + " (pid " + std::to_string(cred.pid) +
         "), not you (uid " + std::to_string(me) + ") or root: not your NIC, refused";
}

// connect_control() plus check_nic_peer(). On a foreign peer returns -1 with errno EACCES and
// the reason in *why.
inline int connect_nic(const std::string& path, std::string* why) {
  int fd = connect_control(path);
  if (fd < 0) return -1;
  std::string bad = check_nic_peer(fd, path);
  if (bad.empty()) return fd;
  ::close(fd);
  if (why) *why = bad;
  errno = EACCES;
  return -1;
}

// Creates `path` in the (checked) simnic directory for writing: whatever was there, a
// symlink included, is removed first, and the new file is created exclusively, never followed.
inline int create_private_file(const std::string& path, int extra_flags = 0) {
  ::unlink(path.c_str());
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | extra_flags, 0600);
}

}  // namespace simnic::abi
