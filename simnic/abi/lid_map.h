// The LID registry of InfiniBand link-layer mode: which NIC address each LID names.
//
// On a real InfiniBand subnet the subnet manager (OpenSM) gives every port a LID and the
// switches forward by it. simnic simulates that fabric: `simnic up --link-layer ib` assigns
// LIDs and writes them to <dir>/lids, and each simnicd reads that file to turn the DLID of an
// address vector into the peer NIC's UDP address (the packets themselves stay RoCEv2). Across
// machines the same file format, given with `simnic up --lid-map FILE`, lists the whole
// fabric, much as OpenSM's guid2lid file pins LIDs.
//
// Format: one "LID ADDRESS [NAME]" per line; LID decimal or 0x-hex, ADDRESS dotted IPv4;
// '#' starts a comment. Shared by the `simnic` tool (writer) and simnicd (reader).
#pragma once
#include <arpa/inet.h>

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace simnic::abi {

inline std::string lid_map_path(const std::string& dir) { return dir + "/lids"; }

struct LidEntry {
  uint16_t lid = 0;
  uint32_t ipv4 = 0;  // host order
  std::string name;   // the NIC's device name, when known
};

// Unicast LIDs are 0x0001..0xBFFF; 0 is reserved, 0xC000..0xFFFE are multicast and 0xFFFF is
// the permissive LID (IBA 4.1.3).
constexpr uint32_t kMaxUnicastLid = 0xbfff;
inline bool is_unicast_lid(uint32_t lid) { return lid >= 1 && lid <= kMaxUnicastLid; }

namespace detail {

inline bool parse_lid_line(const std::string& line, LidEntry* out, std::string* why) {
  std::istringstream in(line);
  std::string lid, addr, name, extra;
  in >> lid >> addr >> name >> extra;
  if (!extra.empty()) return *why = "more than LID, ADDRESS and NAME", false;
  char* end = nullptr;
  const unsigned long v = std::strtoul(lid.c_str(), &end, 0);
  if (lid.empty() || *end || !is_unicast_lid(uint32_t(v)))
    return *why = "'" + lid + "' is not a unicast LID (1 to 0xbfff)", false;
  in_addr a{};
  if (::inet_pton(AF_INET, addr.c_str(), &a) != 1) return *why = "'" + addr + "' is not an IPv4 address", false;
  *out = LidEntry{uint16_t(v), ntohl(a.s_addr), name};
  return true;
}

}  // namespace detail

// Parses a registry. Bad lines are skipped, each named in *errors ("line 3: ..."), as are
// lines repeating a LID or an address already listed (the first one wins).
inline std::vector<LidEntry> parse_lid_map(std::string_view text, std::vector<std::string>* errors = nullptr) {
  std::vector<LidEntry> out;
  std::istringstream in{std::string(text)};
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    LidEntry e;
    std::string why;
    bool ok = detail::parse_lid_line(line, &e, &why);
    for (const LidEntry& seen : out)
      if (ok && (seen.lid == e.lid || seen.ipv4 == e.ipv4)) ok = false, why = "LID or address listed twice";
    if (ok) out.push_back(e);
    else if (errors) errors->push_back("line " + std::to_string(number) + ": " + why);
  }
  return out;
}

inline std::string format_lid_map(const std::vector<LidEntry>& entries) {
  std::string out = "# LID ADDRESS NAME: the simulated InfiniBand fabric (written by `simnic up`)\n";
  for (const LidEntry& e : entries) {
    in_addr a{htonl(e.ipv4)};
    char addr[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &a, addr, sizeof addr);
    out += std::to_string(e.lid) + " " + addr + (e.name.empty() ? "" : " " + e.name) + "\n";
  }
  return out;
}

// The LID of `ipv4` in `entries`, or 0.
inline uint16_t lid_of_address(const std::vector<LidEntry>& entries, uint32_t ipv4) {
  for (const LidEntry& e : entries)
    if (e.ipv4 == ipv4) return e.lid;
  return 0;
}

// The smallest unicast LID no entry uses (0 if all are taken), as OpenSM hands out LIDs from 1.
inline uint16_t lowest_free_lid(const std::vector<LidEntry>& entries) {
  for (uint32_t lid = 1; lid <= kMaxUnicastLid; ++lid) {
    bool used = false;
    for (const LidEntry& e : entries) used = used || e.lid == lid;
    if (!used) return uint16_t(lid);
  }
  return 0;
}

}  // namespace simnic::abi
