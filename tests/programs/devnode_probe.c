// simnic-devnode-probe PATH: calls every stat/access/open entry point libsimnic_devnode.so
// interposes on PATH, each found by name in the global scope as a dlopen()ed library's calls
// are (the executable, LD_PRELOAD, then libc), and prints one line per entry point:
// "<name> chr" (a character device, or an access or a read-write open that succeeded) or
// "<name> <errno name>". Exit status 0 when every one said chr.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int (*stat_fn)(const char*, struct stat*);
typedef int (*fstatat_fn)(int, const char*, struct stat*, int);
typedef int (*xstat_fn)(int, const char*, struct stat*);
typedef int (*fxstatat_fn)(int, int, const char*, struct stat*, int);
typedef int (*statx_fn)(int, const char*, int, unsigned, struct statx*);
typedef int (*access_fn)(const char*, int);
typedef int (*faccessat_fn)(int, const char*, int, int);
typedef int (*open_fn)(const char*, int, ...);
typedef int (*openat_fn)(int, const char*, int, ...);
typedef int (*open2_fn)(const char*, int);

enum { kStatVer = 1 };  // _STAT_VER_LINUX of x86_64's __xstat: the kernel's struct stat

static int report(const char* name, int ok) {
  printf("%s %s\n", name, ok ? "chr" : strerrorname_np(errno) ? strerrorname_np(errno) : "?");
  return ok;
}

static int chr(int rc, const struct stat* st) { return rc == 0 && S_ISCHR(st->st_mode); }

static int opened(int fd) {
  if (fd < 0) return 0;
  int w = write(fd, "x", 1) == 1;
  close(fd);
  return w;
}

// Exits 3 when this libc has no such entry point at all (e.g. __xstat on a new port).
static void* fn(const char* name) {
  void* f = dlsym(RTLD_DEFAULT, name);
  if (!f) {
    fprintf(stderr, "simnic-devnode-probe: no %s in this libc\n", name);
    _exit(3);
  }
  return f;
}

static int probe_stats(const char* p) {
  struct stat st;
  struct statx sx;
  int all = 1;
  const char* plain[] = {"stat", "stat64", "lstat", "lstat64"};
  for (int i = 0; i < 4; ++i) all &= report(plain[i], chr(((stat_fn)fn(plain[i]))(p, &st), &st));
  all &= report("fstatat", chr(((fstatat_fn)fn("fstatat"))(AT_FDCWD, p, &st, 0), &st));
  all &= report("fstatat64", chr(((fstatat_fn)fn("fstatat64"))(AT_FDCWD, p, &st, 0), &st));
  int rc = ((statx_fn)fn("statx"))(AT_FDCWD, p, 0, STATX_TYPE, &sx);
  all &= report("statx", rc == 0 && S_ISCHR(sx.stx_mode));
  const char* old[] = {"__xstat", "__xstat64", "__lxstat", "__lxstat64"};
  for (int i = 0; i < 4; ++i) all &= report(old[i], chr(((xstat_fn)fn(old[i]))(kStatVer, p, &st), &st));
  all &= report("__fxstatat", chr(((fxstatat_fn)fn("__fxstatat"))(kStatVer, AT_FDCWD, p, &st, 0), &st));
  all &= report("__fxstatat64", chr(((fxstatat_fn)fn("__fxstatat64"))(kStatVer, AT_FDCWD, p, &st, 0), &st));
  return all;
}

static int probe_access_and_open(const char* p) {
  int all = 1;
  const char* acc[] = {"access", "euidaccess", "eaccess"};
  for (int i = 0; i < 3; ++i) all &= report(acc[i], ((access_fn)fn(acc[i]))(p, R_OK | W_OK) == 0);
  all &= report("faccessat", ((faccessat_fn)fn("faccessat"))(AT_FDCWD, p, R_OK | W_OK, 0) == 0);
  all &= report("open", opened(((open_fn)fn("open"))(p, O_RDWR)));
  all &= report("open64", opened(((open_fn)fn("open64"))(p, O_RDWR)));
  all &= report("openat", opened(((openat_fn)fn("openat"))(AT_FDCWD, p, O_RDWR)));
  all &= report("openat64", opened(((openat_fn)fn("openat64"))(AT_FDCWD, p, O_RDWR)));
  all &= report("__open_2", opened(((open2_fn)fn("__open_2"))(p, O_RDWR)));
  all &= report("__open64_2", opened(((open2_fn)fn("__open64_2"))(p, O_RDWR)));
  return all;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: simnic-devnode-probe PATH\n");
    return 2;
  }
  int stats = probe_stats(argv[1]);
  int rest = probe_access_and_open(argv[1]);
  return stats && rest ? 0 : 1;
}
