// The uverbs device nodes a program under `simnic run` (or `simnic env`) sees: UCX keeps an RDMA
// device only if /dev/infiniband/<dev_name> is a character device it can read and write, which a
// host without RDMA hardware lacks. libsimnic_devnode.so (shim/devnode.c), put first on
// LD_PRELOAD, makes those of simnic's NICs look like /dev/null (docs/shim.md).
#pragma once
#include <string>
#include <vector>

namespace simnic::cli {

constexpr const char* kDevnodeLibrary = "libsimnic_devnode.so";

// Whether the device nodes are wanted: not with the --no-devnodes option nor SIMNIC_DEVNODES=0.
bool devnodes_wanted(bool no_devnodes_option);

// `preload` (an LD_PRELOAD value) with `lib` first when `on`, every other entry kept; without
// `lib` anywhere when not `on` (an outer `simnic env` may have put it there).
std::string preload_with_devnodes(const std::string& preload, const std::string& lib, bool on);

// For `simnic run`: sets LD_PRELOAD as above with the interposer next to the shim in `shim_dir`
// (warns once when it is wanted but missing).
void set_devnode_preload(const std::string& shim_dir, bool on);

// For `simnic env`: the export line for LD_PRELOAD ("" when nothing is to be set).
std::string devnode_env_line(const std::string& shim_dir, bool on);

}  // namespace simnic::cli
