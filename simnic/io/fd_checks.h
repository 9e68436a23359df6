// What simnicd checks about the descriptors a client hands it, and how it reads them, so that
// no client can block the NIC or tie a context's life to something other than its process.
#pragma once
#include <sys/types.h>
#include <cstdint>

namespace simnic::io {

// 0 when `fd` is a plain (non-semaphore) eventfd, else EINVAL. A doorbell must be one: any
// other file could block a read or refuse epoll.
int check_doorbell_fd(int fd);

// 0 when `fd` is an AF_UNIX SOCK_SEQPACKET socket created by the client process itself (its
// peer credentials name `client_pid`), else EINVAL. This refuses the client's control
// connection (its peer is simnicd) and any socket connected to another daemon: holding those
// would keep a control connection open after the client is gone.
int check_event_socket(int fd, pid_t client_pid);
// The same for an rdma_cm event channel: the client's own AF_UNIX SOCK_STREAM socket.
int check_cm_channel_socket(int fd, pid_t client_pid);

// Empties a doorbell eventfd without ever blocking, whatever O_NONBLOCK the client set on the
// file description it shares with us: preadv2(RWF_NOWAIT) makes this one read non-blocking.
// Returns how many times it had been rung since the last drain (the eventfd adds up the
// client's writes), 0 when it had not.
uint64_t drain_doorbell(int fd);

// A pidfd for the process at the other end of a control socket (SO_PEERPIDFD, else
// pidfd_open(pid)), readable once that process has exited; -1 if the kernel has neither.
int peer_pidfd(int sock, pid_t pid);

}  // namespace simnic::io
