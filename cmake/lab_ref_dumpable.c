/* Linked into every reference peer of the labs (cmake/labs_install.cmake). The peers are
 * installed execute-only (0711) so that students cannot read them; the kernel then makes their
 * processes non-dumpable, and simnicd, which moves their RDMA data with process_vm_readv and
 * process_vm_writev as the student's user, could not reach their memory ("not all mapped
 * readable and writable"). Dumpable again, they work as the student's own programs do. */
#include <sys/prctl.h>

__attribute__((constructor)) static void simnic_lab_ref_dumpable(void) { prctl(PR_SET_DUMPABLE, 1, 0, 0, 0); }
