// libsimnic_devnode.so: an LD_PRELOAD interposer that makes /dev/infiniband/uverbs-<nic> of a
// running simnic NIC look like the character device a real RDMA host has (issue 25).
//
// Why: some middleware decides whether an RDMA device is usable by looking at its uverbs node,
// not by opening it through libibverbs. UCX (uct_ib_device_is_accessible in ib_md.c) keeps a
// device only if stat("/dev/infiniband/<ibv_device.dev_name>") is a character device and
// access(R_OK|W_OK) succeeds; it never opens the node (the shim's ibv_open_device does the work).
// A host without RDMA modules has no /dev/infiniband, and creating one needs root.
//
// Why LD_PRELOAD and not the shim: UCX's libuct_ib is dlopen()ed, so its `stat` binds in the
// global scope (the executable, libc, preloads) before its own dependency libibverbs.so.1 is
// searched; only a preloaded definition comes ahead of libc's.
//
// What it does: each stat/access/open entry point first calls libc's. Only when that fails with
// ENOENT and the path is exactly /dev/infiniband/uverbs-<nic>, with <nic>.sock present in the
// simnic directory (simnic/abi/paths.h), is the call answered for /dev/null instead: the same
// stat (a character device, mode 0666), the same access, and opens land on /dev/null. A real
// node, if one exists, always wins; everything else passes through untouched.
// Plain C with no C++ runtime: it is loaded into every program `simnic run` starts.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#undef _FORTIFY_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SIMNIC_EXPORT __attribute__((visibility("default")))

static const char kNodePrefix[] = "/dev/infiniband/uverbs-";
static const char kStandIn[] = "/dev/null";

// The simnic directory, as simnic_dir() in simnic/abi/paths.h: $SIMNIC_DIR, else
// $XDG_RUNTIME_DIR/simnic, else /tmp/simnic-$UID. False when it does not fit.
static int simnic_dir(char* out, size_t size) {
  const char* d = getenv("SIMNIC_DIR");
  if (d && *d) return snprintf(out, size, "%s", d) < (int)size;
  const char* x = getenv("XDG_RUNTIME_DIR");
  if (x && *x) return snprintf(out, size, "%s/simnic", x) < (int)size;
  return snprintf(out, size, "/tmp/simnic-%u", (unsigned)getuid()) < (int)size;
}

// The NIC name in `path` when it is exactly /dev/infiniband/uverbs-<nic> (one path component).
static const char* nic_of(const char* path) {
  if (!path || strncmp(path, kNodePrefix, sizeof kNodePrefix - 1) != 0) return NULL;
  const char* nic = path + sizeof kNodePrefix - 1;
  if (!*nic || strchr(nic, '/') || strcmp(nic, ".") == 0 || strcmp(nic, "..") == 0) return NULL;
  return nic;
}

// Whether `path` names the uverbs node of a NIC whose control socket is in the simnic directory.
// The socket is looked for with the raw system call, which no interposer (this one) sees.
static int is_simnic_node(const char* path) {
  const char* nic = nic_of(path);
  char dir[PATH_MAX], sock[PATH_MAX];
  if (!nic || !simnic_dir(dir, sizeof dir)) return 0;
  if (snprintf(sock, sizeof sock, "%s/%s.sock", dir, nic) >= (int)sizeof sock) return 0;
  return syscall(SYS_faccessat, AT_FDCWD, sock, F_OK) == 0;
}

// After libc's call failed: whether to answer for /dev/null instead. Only a missing node of a
// simnic NIC is stood in for; errno is kept for the caller when not.
static int stand_in(const char* path) {
  int saved = errno;
  int ours = saved == ENOENT && is_simnic_node(path);
  errno = saved;
  return ours;
}

// libc's definition of `name`, looked up once (a race only stores the same pointer twice).
static void* real(void** slot, const char* name) {
  void* f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (!f) {
    f = dlsym(RTLD_NEXT, name);
    __atomic_store_n(slot, f, __ATOMIC_RELEASE);
  }
  return f;
}

// Calls libc's `name` (type `type`) with `args`; if the path `p` was missing and is a simnic node,
// calls it again with /dev/null in the path's place (`args2`).
#define CALL_REAL(type, name, args) ((type)real(&real_##name, #name)) args
#define INTERPOSE(type, name, args, args2) \
  do {                                     \
    if (!real(&real_##name, #name)) {      \
      errno = ENOSYS;                      \
      return -1;                           \
    }                                      \
    int rc = CALL_REAL(type, name, args);  \
    if (rc == -1 && stand_in(p)) {         \
      int saved = errno;                   \
      rc = CALL_REAL(type, name, args2);   \
      if (rc != -1) errno = saved;         \
    }                                      \
    return rc;                             \
  } while (0)

static void *real_stat, *real_stat64, *real_lstat, *real_lstat64, *real_fstatat, *real_fstatat64, *real_statx;
static void *real___xstat, *real___xstat64, *real___lxstat, *real___lxstat64, *real___fxstatat, *real___fxstatat64;
static void *real_access, *real_faccessat, *real_euidaccess, *real_eaccess;
static void *real_open, *real_open64, *real_openat, *real_openat64, *real___open_2, *real___open64_2;

typedef int (*stat_fn)(const char*, void*);
typedef int (*fstatat_fn)(int, const char*, void*, int);
typedef int (*xstat_fn)(int, const char*, void*);
typedef int (*fxstatat_fn)(int, int, const char*, void*, int);
typedef int (*statx_fn)(int, const char*, int, unsigned, void*);
typedef int (*access_fn)(const char*, int);
typedef int (*faccessat_fn)(int, const char*, int, int);
typedef int (*open_fn)(const char*, int, ...);
typedef int (*openat_fn)(int, const char*, int, ...);
typedef int (*open2_fn)(const char*, int);

// --- stat family (struct stat and struct stat64 are passed through as opaque pointers) ---

SIMNIC_EXPORT int stat(const char* p, struct stat* st) { INTERPOSE(stat_fn, stat, (p, st), (kStandIn, st)); }
SIMNIC_EXPORT int stat64(const char* p, struct stat64* st) { INTERPOSE(stat_fn, stat64, (p, st), (kStandIn, st)); }
SIMNIC_EXPORT int lstat(const char* p, struct stat* st) { INTERPOSE(stat_fn, lstat, (p, st), (kStandIn, st)); }
SIMNIC_EXPORT int lstat64(const char* p, struct stat64* st) { INTERPOSE(stat_fn, lstat64, (p, st), (kStandIn, st)); }

SIMNIC_EXPORT int fstatat(int fd, const char* p, struct stat* st, int flags) {
  INTERPOSE(fstatat_fn, fstatat, (fd, p, st, flags), (fd, kStandIn, st, flags));
}
SIMNIC_EXPORT int fstatat64(int fd, const char* p, struct stat64* st, int flags) {
  INTERPOSE(fstatat_fn, fstatat64, (fd, p, st, flags), (fd, kStandIn, st, flags));
}
SIMNIC_EXPORT int statx(int fd, const char* p, int flags, unsigned mask, struct statx* st) {
  INTERPOSE(statx_fn, statx, (fd, p, flags, mask, st), (fd, kStandIn, flags, mask, st));
}

// Programs built against glibc before 2.33 call these (stat was an inline wrapper around them).
SIMNIC_EXPORT int __xstat(int ver, const char* p, void* st) {
  INTERPOSE(xstat_fn, __xstat, (ver, p, st), (ver, kStandIn, st));
}
SIMNIC_EXPORT int __xstat64(int ver, const char* p, void* st) {
  INTERPOSE(xstat_fn, __xstat64, (ver, p, st), (ver, kStandIn, st));
}
SIMNIC_EXPORT int __lxstat(int ver, const char* p, void* st) {
  INTERPOSE(xstat_fn, __lxstat, (ver, p, st), (ver, kStandIn, st));
}
SIMNIC_EXPORT int __lxstat64(int ver, const char* p, void* st) {
  INTERPOSE(xstat_fn, __lxstat64, (ver, p, st), (ver, kStandIn, st));
}
SIMNIC_EXPORT int __fxstatat(int ver, int fd, const char* p, void* st, int flags) {
  INTERPOSE(fxstatat_fn, __fxstatat, (ver, fd, p, st, flags), (ver, fd, kStandIn, st, flags));
}
SIMNIC_EXPORT int __fxstatat64(int ver, int fd, const char* p, void* st, int flags) {
  INTERPOSE(fxstatat_fn, __fxstatat64, (ver, fd, p, st, flags), (ver, fd, kStandIn, st, flags));
}

// --- access family ---

SIMNIC_EXPORT int access(const char* p, int mode) { INTERPOSE(access_fn, access, (p, mode), (kStandIn, mode)); }
SIMNIC_EXPORT int euidaccess(const char* p, int mode) { INTERPOSE(access_fn, euidaccess, (p, mode), (kStandIn, mode)); }
SIMNIC_EXPORT int eaccess(const char* p, int mode) { INTERPOSE(access_fn, eaccess, (p, mode), (kStandIn, mode)); }
SIMNIC_EXPORT int faccessat(int fd, const char* p, int mode, int flags) {
  INTERPOSE(faccessat_fn, faccessat, (fd, p, mode, flags), (fd, kStandIn, mode, flags));
}

// --- open family: a program that opens the node for reading and writing gets /dev/null ---

// The mode argument exists only with O_CREAT or O_TMPFILE (open(2)).
static mode_t mode_arg(int flags, va_list ap) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

SIMNIC_EXPORT int open(const char* p, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  INTERPOSE(open_fn, open, (p, flags, mode), (kStandIn, flags, mode));
}
SIMNIC_EXPORT int open64(const char* p, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  INTERPOSE(open_fn, open64, (p, flags, mode), (kStandIn, flags, mode));
}
SIMNIC_EXPORT int openat(int fd, const char* p, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  INTERPOSE(openat_fn, openat, (fd, p, flags, mode), (fd, kStandIn, flags, mode));
}
SIMNIC_EXPORT int openat64(int fd, const char* p, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  INTERPOSE(openat_fn, openat64, (fd, p, flags, mode), (fd, kStandIn, flags, mode));
}
// What open() becomes in a program built with _FORTIFY_SOURCE.
SIMNIC_EXPORT int __open_2(const char* p, int flags) { INTERPOSE(open2_fn, __open_2, (p, flags), (kStandIn, flags)); }
SIMNIC_EXPORT int __open64_2(const char* p, int flags) {
  INTERPOSE(open2_fn, __open64_2, (p, flags), (kStandIn, flags));
}
