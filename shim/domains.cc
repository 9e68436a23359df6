// Thread domains (ibv_alloc_td) and parent domains (ibv_alloc_parent_domain), as mlx5 has
// them. A TD promises that one thread uses the objects of its parent domain; simnic's shim
// keeps its locks anyway (the promise lets a provider drop them; keeping them is always
// right). A parent domain is a PD to every verb (its handle is its protection domain's, as
// rdma-core's ibv_initialize_parent_domain sets it), plus optional allocators: the rings of the
// QPs, SRQs and CQs created on it live in memory the application's alloc() returned (simnic
// maps the NIC's shared memory over it) and go back through its free().
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <mutex>

#include "shim/verbs_ext.h"

using namespace simnic::shim;

namespace {

struct ShimTd {
  ibv_td td;      // first
  int users = 0;  // parent domains on it: ibv_dealloc_td is EBUSY while > 0
};

struct ParentDomain {
  ibv_pd pd;  // first: what the application holds
  ibv_pd* protection = nullptr;
  ShimTd* td = nullptr;
  void* (*alloc)(ibv_pd*, void*, size_t, size_t, uint64_t) = nullptr;
  void (*free)(ibv_pd*, void*, void*, uint64_t) = nullptr;
  void* pd_context = nullptr;
  int rings = 0;  // objects created on it: ibv_dealloc_pd is EBUSY while > 0
};

// A ring placed in an allocation of a parent domain's allocator.
struct CustomRing {
  ParentDomain* domain = nullptr;
  uint64_t resource_type = 0;
};

std::mutex mu;  // guards everything below and the counters in the objects
std::map<ibv_pd*, ParentDomain*> domains;
std::map<ibv_pd*, int> contained;  // protection domain -> parent domains containing it
std::map<void*, CustomRing> custom_rings;
std::map<void*, ParentDomain*> default_rings;  // rings of a parent domain without allocators

ParentDomain* domain_of(ibv_pd* pd) {
  auto it = domains.find(pd);
  return it == domains.end() ? nullptr : it->second;
}

ibv_td* alloc_td(ibv_context* context, ibv_td_init_attr* attr) {
  if (!attr || attr->comp_mask) return fail_null<ibv_td>(EINVAL);
  auto* td = new ShimTd{};
  td->td.context = context;
  return &td->td;
}

int dealloc_td(ibv_td* ibtd) {
  auto* td = reinterpret_cast<ShimTd*>(ibtd);
  std::lock_guard lock(mu);
  if (td->users) return fail_errno(EBUSY);  // a parent domain uses it
  delete td;
  return 0;
}

// rdma-core: a PD is required (ibv_check_alloc_parent_domain), comp_mask bits beyond
// ALLOCATORS and PD_CONTEXT are EINVAL (mlx5_alloc_parent_domain).
ibv_pd* alloc_parent_domain(ibv_context* context, ibv_parent_domain_init_attr* attr) {
  if (!attr || !attr->pd) return fail_null<ibv_pd>(EINVAL);
  constexpr uint32_t kKnown = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  if (attr->comp_mask & ~kKnown) return fail_null<ibv_pd>(EINVAL);
  if (attr->pd->context != context || (attr->td && attr->td->context != context)) return fail_null<ibv_pd>(EINVAL);
  std::lock_guard lock(mu);
  if (domain_of(attr->pd)) return fail_null<ibv_pd>(EINVAL);  // a parent domain contains a PD, not another one
  auto* d = new ParentDomain{};
  d->pd.context = context;
  d->pd.handle = attr->pd->handle;
  d->protection = attr->pd;
  d->td = reinterpret_cast<ShimTd*>(attr->td);
  if (d->td) d->td->users++;
  if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) d->alloc = attr->alloc, d->free = attr->free;
  if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT) d->pd_context = attr->pd_context;
  domains[&d->pd] = d;
  contained[attr->pd]++;
  return &d->pd;
}

// The application's allocation for a ring, or nullptr (errno set); IBV_ALLOCATOR_USE_DEFAULT
// passes through. Page aligned and sized, since the NIC's memory is mapped over it.
void* custom_alloc(ParentDomain* d, uint64_t type, size_t bytes) {
  void* p = d->alloc(&d->pd, d->pd_context, bytes, size_t(::getpagesize()), type);
  if (p == IBV_ALLOCATOR_USE_DEFAULT) return p;
  if (!p) return fail_null(ENOMEM);
  if (reinterpret_cast<uintptr_t>(p) % size_t(::getpagesize())) {
    d->free(&d->pd, d->pd_context, p, type);
    return fail_null(EINVAL);  // the allocator ignored the alignment asked for
  }
  return p;
}

void* map_over(void* at, int fd, size_t bytes) {
  void* p = ::mmap(at, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

namespace simnic::shim {

void fill_domain_ops(ShimContext* c) {
  c->vctx.alloc_td = alloc_td;
  c->vctx.dealloc_td = dealloc_td;
  c->vctx.alloc_parent_domain = alloc_parent_domain;
}

ibv_pd* parent_domain_protection(ibv_pd* pd) {
  std::lock_guard lock(mu);
  ParentDomain* d = domain_of(pd);
  return d ? d->protection : nullptr;
}

// The application's allocator runs without our lock held (it may call verbs itself).
void* map_ring(ibv_pd* pd, uint64_t type, std::vector<int>& fds, size_t bytes) {
  ParentDomain* d = nullptr;
  {
    std::lock_guard lock(mu);
    d = pd ? domain_of(pd) : nullptr;
    if (d) d->rings++;  // held from here: the domain cannot be deallocated under us
  }
  if (!d) return map_shared(fds, bytes);
  const size_t page = size_t(::getpagesize());
  const size_t size = (bytes + page - 1) / page * page;
  void* p = d->alloc ? custom_alloc(d, type, size) : IBV_ALLOCATOR_USE_DEFAULT;
  bool custom = p != IBV_ALLOCATOR_USE_DEFAULT;
  if (!custom) {
    p = map_shared(fds, bytes);
  } else if (p && fds.size() == 1) {
    void* at = map_over(p, fds[0], size);
    if (!at) d->free(&d->pd, d->pd_context, p, type), errno = ENOMEM;
    p = at;
  }
  for (int fd : fds) ::close(fd);
  fds.clear();
  std::lock_guard lock(mu);
  if (!p) d->rings--;
  else if (custom) custom_rings[p] = CustomRing{d, type};
  else default_rings[p] = d;
  return p;
}

void unmap_ring(void* mem, size_t bytes) {
  CustomRing custom{};
  {
    std::lock_guard lock(mu);
    if (auto it = default_rings.find(mem); it != default_rings.end()) {
      it->second->rings--;
      default_rings.erase(it);
    }
    if (auto it = custom_rings.find(mem); it != custom_rings.end()) {
      custom = it->second;
      custom_rings.erase(it);
    }
  }
  if (!custom.domain) {
    ::munmap(mem, bytes);
    return;
  }
  const size_t page = size_t(::getpagesize());
  const size_t size = (bytes + page - 1) / page * page;
  // Private memory again where the NIC's was, so the allocator gets back what it gave.
  ::mmap(mem, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  ParentDomain* d = custom.domain;
  d->free(&d->pd, d->pd_context, mem, custom.resource_type);
  std::lock_guard lock(mu);
  d->rings--;  // last: the domain may be deallocated from now on
}

int dealloc_domain_pd(ibv_pd* pd) {
  std::lock_guard lock(mu);
  if (ParentDomain* d = domain_of(pd)) {
    if (d->rings) return EBUSY;  // QPs, SRQs or CQs on it remain (mlx5's refcount)
    if (d->td) d->td->users--;
    if (--contained[d->protection] == 0) contained.erase(d->protection);
    domains.erase(pd);
    delete d;
    return 0;
  }
  auto it = contained.find(pd);
  return it != contained.end() && it->second > 0 ? EBUSY : -1;
}

}  // namespace simnic::shim
