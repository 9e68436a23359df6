// Shared pages (issue 26 point 4) end to end: an unmodified verbs program's registered memory
// is mapped by both NICs, which then move every byte with memcpy (none by process_vm_*), the
// bytes compared by the program; a fork keeps the child's writes apart; the views go with
// the program. Without them (SIMNIC_SHARED_PAGES=0, or a second thread at registration) the
// same program passes by pid as before.
#include <gtest/gtest.h>

#include "check_run.h"

namespace simnic::it {
namespace {

uint64_t stat_of(const Nics& nics, const std::string& nic, const std::string& key) {
  auto s = nics.status(nic);
  return s.count(key) ? std::stoull(s[key]) : ~0ull;
}

TEST(SharedPages, RegisteredMemoryIsMappedByTheNicsAndEveryByteArrives) {
  Nics nics(2);
  Result r;
  ASSERT_NO_FATAL_FAILURE(run_check(nics, "simnic-shared-pages-check", {"-a", "simnic0", "-b", "simnic1"}, &r));
  expect_says(r,
              {"heap 8 KiB: registered, bytes kept, pages shared", "malloc 1 MiB: registered, bytes kept, pages shared",
               "mmap 1 MiB + 100: registered, bytes kept, pages shared",
               "SEND, WRITE and READ of 64 B, 4 KiB and 200 KiB through every buffer: bytes compared",
               "fork: the child's writes stayed the child's; a WRITE after it reached the parent", "PASS"});
  for (const char* nic : {"simnic0", "simnic1"}) {
    // At least the payloads each NIC moved: SEND/WRITE/READ of 64 B + 4 KiB + 200 KiB, read
    // on one side and written on the other, for three buffers (the 8 KiB one without 200 KiB).
    EXPECT_GT(stat_of(nics, nic, "dma_bytes_shared"), 3u * (64 + 4096) + 2u * 200 * 1024) << nic;
    EXPECT_EQ(stat_of(nics, nic, "dma_bytes_by_pid"), 0u) << nic;
    EXPECT_EQ(stat_of(nics, nic, "shared_views"), 0u) << nic << ": the views outlived the program";
  }
}

TEST(SharedPages, TurnedOffTheSameProgramPassesByPid) {
  Nics nics(2);
  Result r;
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  r = nics.run({"/usr/bin/env", "SIMNIC_SHARED_PAGES=0", bin_dir() + "/simnic-shared-pages-check"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_says(r, {"heap 8 KiB: registered, bytes kept, pages not shared", "PASS"});
  for (const char* nic : {"simnic0", "simnic1"}) {
    EXPECT_EQ(stat_of(nics, nic, "dma_bytes_shared"), 0u) << nic;
    EXPECT_GT(stat_of(nics, nic, "dma_bytes_by_pid"), 200u * 1024) << nic;
  }
}

// Another thread could write the pages between the copy and the remap: they stay as they are.
TEST(SharedPages, AThreadedProgramKeepsItsPagesAsTheyAre) {
  Nics nics(2);
  Result r;
  ASSERT_NO_FATAL_FAILURE(run_check(nics, "simnic-shared-pages-check", {"-t"}, &r));
  expect_says(r, {"heap 8 KiB: registered, bytes kept, pages not shared",
                  "malloc 1 MiB: registered, bytes kept, pages not shared",
                  "mmap 1 MiB + 100: registered, bytes kept, pages not shared", "PASS"});
  EXPECT_EQ(stat_of(nics, "simnic0", "dma_bytes_shared"), 0u);
}

}  // namespace
}  // namespace simnic::it
