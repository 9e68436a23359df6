// The LID registry file (<dir>/lids, simnic/abi/lid_map.h) as the NIC core's LidDirectory.
// Read when first needed and again whenever a LID or address is not found and the file has
// changed since (a NIC started later, or a --lid-map rewritten), so lookups of known LIDs cost
// no system call.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

#include "simnic/abi/lid_map.h"
#include "simnic/core/env.h"

namespace simnic::io {

class LidFile final : public core::LidDirectory {
 public:
  LidFile(std::string path, core::Logger& logger) : path_(std::move(path)), logger_(logger) {}
  bool address_of(uint16_t lid, uint32_t* ipv4) override;
  uint16_t lid_of(uint32_t ipv4) override;
  const std::string& path() const { return path_; }

 private:
  bool reload_if_changed();  // true when the entries were read again

  std::string path_;
  core::Logger& logger_;
  std::vector<abi::LidEntry> entries_;
  struct Stamp {
    ino_t ino = 0;
    off_t size = -1;
    long long mtime_ns = -1;
    bool operator==(const Stamp&) const = default;
  } stamp_;
};

}  // namespace simnic::io
