// `simnic up`'s link-layer options (--link-layer, --gid-table, --lid-map) and the simulated
// subnet manager: in InfiniBand mode it gives each NIC a LID and keeps the LID registry,
// <dir>/lids, that the NICs route DLIDs by (simnic/abi/lid_map.h, docs/link-layer.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "simnic/abi/lid_map.h"

namespace simnic::cli {

class LinkLayerSetup {
 public:
  // If args[i] is one of the link-layer options, consumes it (and its value, moving i) and
  // returns 1; returns 0 if it is not ours and -1 (a message printed) if it is malformed.
  int parse(const std::vector<std::string>& args, size_t& i);
  static const char* usage();  // the lines `simnic up --help` shows for them

  // Once the directory is known: reads the registry (or the --lid-map file). False with a
  // message printed if the options or the file are unusable.
  bool begin(const std::string& dir);
  // The simnicd flags of NIC `name` at `ipv4` (host order); in IB mode it gets its LID here.
  // False (a message printed) when the --lid-map gives that address no LID.
  bool nic_args(const std::string& name, uint32_t ipv4, std::vector<std::string>* argv);
  // Writes the registry (IB mode), before the NICs need it. False with a message on failure.
  bool commit();

 private:
  bool infiniband_ = false;
  std::string gid_table_;  // "" = simnicd's default (simple)
  std::string lid_map_;    // --lid-map FILE
  std::string dir_;
  std::vector<abi::LidEntry> entries_;
};

}  // namespace simnic::cli
