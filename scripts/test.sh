#!/usr/bin/env bash
# Sets up, builds and runs every test: the README's test command, and what CI runs.
#   1. build/ (gcc, -Werror) and the whole ctest suite, the 2-minute soak included;
#   2. build-asan/ (clang, ASan + UBSan, -Werror): the unit tests, and a short run of each
#      fuzzer over its corpus (tests/fuzz);
#   3. build-tsan/ (gcc, TSan): several client processes, with several threads each, move
#      data with the TSan-built shim and simnic-soak; any ThreadSanitizer report fails the run.
# Each stage prints how long it took. Arguments go to the stage-1 ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

stage() {
  local name=$1 t0=$SECONDS
  shift
  echo "test.sh: stage $name"
  "$@"
  echo "test.sh: stage $name passed in $((SECONDS - t0)) s"
}

main_build_and_tests() {
  scripts/build.sh -DSIMNIC_WERROR=ON "${launcher[@]}"
  # One test at a time: integration tests run several processes each, and the machines have
  # two cores. Two at a time halves the time (229 s instead of 494 s) but starves the 2-minute
  # soak's RC QPs into "retry counter exceeded" (no flow control yet: issue 14, point 3).
  # Every test has its own timeout (tests/CMakeLists.txt).
  # The labs (ctest -L labs) run two at a time after the rest: each grader leases NICs of its own
  # and most of their time is spent waiting (the hangs variants wait at every time limit).
  if [[ $# -eq 0 ]]; then
    ctest --test-dir build --output-on-failure --timeout 600 -LE labs
    ctest --test-dir build --output-on-failure --timeout 900 -L labs -j2
  else
    ctest --test-dir build --output-on-failure --timeout 600 "$@"
  fi
}

# Stages 2 and 3 build as unity builds (CMAKE_UNITY_BUILD: a target's sources compiled a few
# per translation unit): on a clean two-core machine this cuts the ASan build from about 6 to
# about 2 minutes. Stage 1 stays an ordinary build, so a file that forgets an include still
# fails there.
asan_unit_and_fuzz() {
  cmake -S . -B build-asan -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DSIMNIC_FUZZ=ON \
    -DSIMNIC_WERROR=ON -DCMAKE_UNITY_BUILD=ON "${launcher[@]}" >/dev/null
  cmake --build build-asan -j"$jobs" --target unit_proto unit_core unit_viz packet_parser_fuzz rx_path_fuzz \
    control_dispatch_fuzz trace_reader_fuzz
  # In-process tests only (no NICs, no sockets): two at a time.
  ctest --test-dir build-asan -L 'unit|fuzz' -j"$jobs" --output-on-failure --timeout 600
}

# simnicd is single-threaded (one Asio loop, no threads): TSan would have nothing to check
# there, so stage 1's simnicd serves. What runs concurrently is the clients: threads sharing a
# context in the shim, and processes sharing a NIC. Those are TSan-built here: the shim
# (shim/CMakeLists.txt instruments it in a SIMNIC_TSAN tree) and simnic-soak.
tsan_multi_client() {
  cmake -S . -B build-tsan -DSIMNIC_TSAN=ON -DSIMNIC_WERROR=ON -DCMAKE_UNITY_BUILD=ON "${launcher[@]}" >/dev/null
  cmake --build build-tsan -j"$jobs" --target simnic_shim simnic-soak
  local dir rc=0 pids=()
  dir=$(mktemp -d "${TMPDIR:-/tmp}/simnic-tsan.XXXXXX")
  export SIMNIC_DIR=$dir/state SIMNIC_SHIM_DIR=$PWD/build-tsan/lib
  export TSAN_OPTIONS="log_path=$dir/tsan exitcode=66 second_deadlock_stack=1"
  build/bin/simnic up 2 --addr "127.$((100 + $$ % 100)).201.1" --loss 0.01 --seed 5 >/dev/null
  for args in "-t 4 -q 4" "-t 3 -q 4" "-t 3 -q 4 -c"; do
    # shellcheck disable=SC2086
    build/bin/simnic run -- build-tsan/bin/simnic-soak -a simnic0 -b simnic1 $args -n 60 -T 120 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  build/bin/simnic down >/dev/null || rc=1
  if compgen -G "$dir/tsan*" >/dev/null; then
    echo "test.sh: ThreadSanitizer reports:" >&2
    cat "$dir"/tsan* >&2
    rc=1
  fi
  rm -rf "$dir"
  return $rc
}

scripts/setup.sh
stage "build + ctest" main_build_and_tests "$@"
stage "ASan/UBSan unit + fuzz" asan_unit_and_fuzz
stage "TSan multi-client" tsan_multi_client
