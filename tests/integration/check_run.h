// Running a check program from tests/programs on fresh NICs and reading what it said: the
// steps every test of such a program repeats (the NICs came up, the program exited 0, these
// lines are in its output).
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "harness.h"

namespace simnic::it {

// `simnic run -- <bin_dir>/program args...` on `nics`, which must have come up; the program must
// exit 0 within `limit`. Call as ASSERT_NO_FATAL_FAILURE(run_check(...)) so a failure ends the test.
inline void run_check(const Nics& nics, const std::string& program, const std::vector<std::string>& args, Result* out,
                      std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  std::vector<std::string> argv = {bin_dir() + "/" + program};
  argv.insert(argv.end(), args.begin(), args.end());
  *out = nics.run(argv, limit);
  ASSERT_EQ(out->exit_code, 0) << out->output;
}

inline bool says(const Result& r, const std::string& text) { return r.output.find(text) != std::string::npos; }

// Every one of `lines` in the run's output; each missing line is a failure of its own.
inline void expect_says(const Result& r, const std::vector<std::string>& lines) {
  for (const std::string& line : lines) EXPECT_TRUE(says(r, line)) << line << "\n" << r.output;
}

}  // namespace simnic::it
