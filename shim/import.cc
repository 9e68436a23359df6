// ibv_import_device, ibv_import_pd, ibv_import_mr and their unimport. A process that was given
// another's cmd_fd (dup, SCM_RIGHTS) opens a context of its own on the same NIC (the socket's
// peer address names it) and passes that descriptor to simnicd, which recognizes the exporter's
// socket in it and lets the new context share the exporter's PDs and MRs. The descriptor is
// the importer's to close, as rdma-core's ibv_close_device may: it is closed once imported.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "shim/verbs_ext.h"

using namespace simnic::shim;
using namespace simnic::abi;

namespace {

// The device whose control socket `fd` is connected to, or nullptr.
ibv_device* device_of_socket(int fd) {
  sockaddr_un peer{};
  socklen_t len = sizeof peer;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0 || peer.sun_family != AF_UNIX) return nullptr;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_device* found = nullptr;
  for (int i = 0; list && i < n && !found; ++i)
    if (std::strncmp(to_shim(list[i])->socket_path, peer.sun_path, sizeof peer.sun_path) == 0) found = list[i];
  if (list) ibv_free_device_list(list);  // the devices themselves stay valid (device_list.cc)
  return found;
}

}  // namespace

extern "C" {

struct ibv_context* ibv_import_device(int cmd_fd) {
  ibv_device* dev = device_of_socket(cmd_fd);
  if (!dev) return fail_null<ibv_context>(errno == ENOTSOCK || errno == EBADF ? errno : EINVAL);
  ibv_context* ctx = ibv_open_device(dev);
  if (!ctx) return nullptr;
  int st = rpc(to_shim(ctx), Op::JoinContext, HandleReq{}, static_cast<HandleReply*>(nullptr), nullptr, {cmd_fd});
  if (st != 0) {
    explain_refusal("ibv_import_device", st, last_refusal());
    ibv_close_device(ctx);
    return fail_null<ibv_context>(st);
  }
  ::close(cmd_fd);
  return ctx;
}

struct ibv_pd* ibv_import_pd(struct ibv_context* context, uint32_t pd_handle) {
  HandleReply rep{};
  if (int st = rpc(to_shim(context), Op::ImportPd, HandleReq{pd_handle, 0}, &rep)) return fail_null<ibv_pd>(st);
  auto* pd = new ibv_pd{};
  pd->context = context;
  pd->handle = rep.handle;
  return pd;
}

// Only this process' object goes; the PD lives on for the others (rdma-core's unimport).
void ibv_unimport_pd(struct ibv_pd* pd) { delete pd; }

// As rdma-core's ibv_cmd_query_mr: keys and length from the NIC, addr NULL (the memory is in
// the exporter's address space).
struct ibv_mr* ibv_import_mr(struct ibv_pd* pd, uint32_t mr_handle) {
  ImportMrReply rep{};
  if (int st = rpc(to_shim(pd->context), Op::ImportMr, HandleReq{mr_handle, 0}, &rep)) return fail_null<ibv_mr>(st);
  ibv_mr* mr = new_ibv_mr(pd, nullptr, rep.length, rep.handle, rep.lkey, rep.rkey);
  set_imported_mr(mr, true);
  return mr;
}

void ibv_unimport_mr(struct ibv_mr* mr) {
  set_imported_mr(mr, false);
  delete mr;
}

}  // extern "C"
