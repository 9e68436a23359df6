/* IBVERBS_PRIVATE_34 and the historical kernel-marshalling names: the interface between
 * libibverbs and its provider libraries (libmlx5, libefa, ...). simnic loads no provider, but
 * binaries such as Debian's perftest link libmlx5.so.1 and libefa.so.1 directly, so their
 * start-up code (verbs_register_driver_34) and their symbol references must resolve. None of
 * these is reached through simnic's devices; each is harmless if called anyway.
 *
 * Plain C without rdma-core's private headers: the signatures only need to agree on the
 * return type, and providers never run their verbs here. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#define SIMNIC_EXPORT

/* Read by providers when a device disappears; a data object in the real library too. */
SIMNIC_EXPORT bool verbs_allow_disassociate_destroy;

SIMNIC_EXPORT void verbs_register_driver_34(const void* ops) { (void)ops; }
SIMNIC_EXPORT void verbs_set_ops(void* vctx, const void* ops) {
  (void)vctx;
  (void)ops;
}
SIMNIC_EXPORT void verbs_uninit_context(void* vctx) { (void)vctx; }
SIMNIC_EXPORT void verbs_init_cq(void* cq, void* context, void* channel, void* cq_context) {
  (void)cq;
  (void)context;
  (void)channel;
  (void)cq_context;
}
SIMNIC_EXPORT void* verbs_open_device(void* device, void* private_data) {
  (void)device;
  (void)private_data;
  errno = EOPNOTSUPP;
  return NULL;
}
SIMNIC_EXPORT void* _verbs_init_and_alloc_context(void* device, int cmd_fd, size_t alloc_size, void* context_offset,
                                                  unsigned driver_id) {
  (void)device;
  (void)cmd_fd;
  (void)alloc_size;
  (void)context_offset;
  (void)driver_id;
  errno = EOPNOTSUPP;
  return NULL;
}
SIMNIC_EXPORT void __verbs_log(void* ctx, unsigned level, const char* fmt, ...) {
  (void)ctx;
  (void)level;
  (void)fmt;
}
SIMNIC_EXPORT int execute_ioctl(void* context, void* cmd) {
  (void)context;
  (void)cmd;
  return EOPNOTSUPP;
}
SIMNIC_EXPORT unsigned __ioctl_final_num_attrs(unsigned num_attrs, void* link) {
  (void)link;
  return num_attrs;
}

/* The kernel command wrappers providers call: simnic has no kernel behind it. */
#define CMD(name) \
  SIMNIC_EXPORT int name(void) { return EOPNOTSUPP; }
CMD(ibv_cmd_advise_mr)
CMD(ibv_cmd_alloc_dm)
CMD(ibv_cmd_alloc_mw)
CMD(ibv_cmd_alloc_pd)
CMD(ibv_cmd_attach_mcast)
CMD(ibv_cmd_close_xrcd)
CMD(ibv_cmd_create_ah)
CMD(ibv_cmd_create_counters)
CMD(ibv_cmd_create_cq)
CMD(ibv_cmd_create_cq_ex)
CMD(ibv_cmd_create_flow)
CMD(ibv_cmd_create_flow_action_esp)
CMD(ibv_cmd_create_qp)
CMD(ibv_cmd_create_qp_ex)
CMD(ibv_cmd_create_qp_ex2)
CMD(ibv_cmd_create_rwq_ind_table)
CMD(ibv_cmd_create_srq)
CMD(ibv_cmd_create_srq_ex)
CMD(ibv_cmd_create_wq)
CMD(ibv_cmd_dealloc_mw)
CMD(ibv_cmd_dealloc_pd)
CMD(ibv_cmd_dereg_mr)
CMD(ibv_cmd_destroy_ah)
CMD(ibv_cmd_destroy_counters)
CMD(ibv_cmd_destroy_cq)
CMD(ibv_cmd_destroy_flow)
CMD(ibv_cmd_destroy_flow_action)
CMD(ibv_cmd_destroy_qp)
CMD(ibv_cmd_destroy_rwq_ind_table)
CMD(ibv_cmd_destroy_srq)
CMD(ibv_cmd_destroy_wq)
CMD(ibv_cmd_detach_mcast)
CMD(ibv_cmd_free_dm)
CMD(ibv_cmd_get_context)
CMD(ibv_cmd_modify_cq)
CMD(ibv_cmd_modify_flow_action_esp)
CMD(ibv_cmd_modify_qp)
CMD(ibv_cmd_modify_qp_ex)
CMD(ibv_cmd_modify_srq)
CMD(ibv_cmd_modify_wq)
CMD(ibv_cmd_open_qp)
CMD(ibv_cmd_open_xrcd)
CMD(ibv_cmd_poll_cq)
CMD(ibv_cmd_post_recv)
CMD(ibv_cmd_post_send)
CMD(ibv_cmd_post_srq_recv)
CMD(ibv_cmd_query_context)
CMD(ibv_cmd_query_device_any)
CMD(ibv_cmd_query_mr)
CMD(ibv_cmd_query_port)
CMD(ibv_cmd_query_qp)
CMD(ibv_cmd_query_srq)
CMD(ibv_cmd_read_counters)
CMD(ibv_cmd_reg_dm_mr)
CMD(ibv_cmd_reg_dmabuf_mr)
CMD(ibv_cmd_reg_mr)
CMD(ibv_cmd_req_notify_cq)
CMD(ibv_cmd_rereg_mr)
CMD(ibv_cmd_resize_cq)
#undef CMD

/* IBVERBS_1.0 names kept for rdma-core's other libraries: converters from kernel structs. */
SIMNIC_EXPORT void ibv_copy_qp_attr_from_kern(void* dst, const void* src) {
  (void)dst;
  (void)src;
}
SIMNIC_EXPORT void ibv_copy_ah_attr_from_kern(void* dst, const void* src) {
  (void)dst;
  (void)src;
}
SIMNIC_EXPORT void ibv_copy_path_rec_from_kern(void* dst, const void* src) {
  (void)dst;
  (void)src;
}
SIMNIC_EXPORT void ibv_copy_path_rec_to_kern(void* dst, const void* src) {
  (void)dst;
  (void)src;
}

/* The pre-1.2 provider registration (ibv_register_driver@IBVERBS_1.1, no default version). */
void simnic_register_driver_1_1(const char* name, void* init_func) {
  (void)name;
  (void)init_func;
}
__asm__(".symver simnic_register_driver_1_1, ibv_register_driver@IBVERBS_1.1");
