/* The IBVERBS_1.0 ABI (libibverbs before 2006, with different struct layouts). rdma-core keeps
 * translation wrappers for it; no binary on a current distribution uses them, so simnic binds
 * the names (every one of them, so such a binary still loads) and fails each call cleanly. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define OLD_PTR(name)               \
  void* simnic_##name##_1_0(void) { \
    errno = EOPNOTSUPP;             \
    return NULL;                    \
  }                                 \
  __asm__(".symver simnic_" #name "_1_0, " #name "@IBVERBS_1.0");
#define OLD_INT(name)                                  \
  int simnic_##name##_1_0(void) { return EOPNOTSUPP; } \
  __asm__(".symver simnic_" #name "_1_0, " #name "@IBVERBS_1.0");
#define OLD_VOID(name)              \
  void simnic_##name##_1_0(void) {} \
  __asm__(".symver simnic_" #name "_1_0, " #name "@IBVERBS_1.0");

OLD_PTR(ibv_get_device_list)
OLD_VOID(ibv_free_device_list)
OLD_PTR(ibv_get_device_name)
OLD_INT(ibv_get_device_guid)
OLD_PTR(ibv_open_device)
OLD_INT(ibv_close_device)
OLD_INT(ibv_get_async_event)
OLD_VOID(ibv_ack_async_event)
OLD_INT(ibv_query_device)
OLD_INT(ibv_query_port)
OLD_INT(ibv_query_gid)
OLD_INT(ibv_query_pkey)
OLD_PTR(ibv_alloc_pd)
OLD_INT(ibv_dealloc_pd)
OLD_PTR(ibv_reg_mr)
OLD_INT(ibv_dereg_mr)
OLD_PTR(ibv_create_cq)
OLD_INT(ibv_resize_cq)
OLD_INT(ibv_destroy_cq)
OLD_INT(ibv_get_cq_event)
OLD_VOID(ibv_ack_cq_events)
OLD_PTR(ibv_create_srq)
OLD_INT(ibv_modify_srq)
OLD_INT(ibv_query_srq)
OLD_INT(ibv_destroy_srq)
OLD_PTR(ibv_create_qp)
OLD_INT(ibv_query_qp)
OLD_INT(ibv_modify_qp)
OLD_INT(ibv_destroy_qp)
OLD_PTR(ibv_create_ah)
OLD_INT(ibv_destroy_ah)
OLD_INT(ibv_attach_mcast)
OLD_INT(ibv_detach_mcast)
