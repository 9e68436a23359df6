// `simnic run --netns`: the program runs in a network namespace of its own where every NIC
// has a network interface carrying its address, as an RDMA NIC has its netdev on a real host.
// Software that pairs RDMA devices with IP interfaces (libfabric's verbs provider keeps a
// device for FI_EP_MSG only if some UP, non-loopback interface holds an address that
// rdma_bind_addr maps to it) then finds them. No root needed: an unprivileged user namespace.
#pragma once
#include <string>

namespace simnic::cli {

// Moves this process into a new user and network namespace (its uid and gid mapped to
// themselves, so the program runs as the same user, without capabilities once it execs), with
// `lo` up and, for each NIC running in `dir`, a veth pair: one end named after the NIC holding
// the NIC's address /32, the other "snpN", both UP. simnicd stays where it is: the shim and
// librdmacm reach it through the socket files in `dir`, which a network namespace does not hide.
// Returns "" or why it could not (the caller says so and stops).
std::string enter_netns(const std::string& dir);

}  // namespace simnic::cli
