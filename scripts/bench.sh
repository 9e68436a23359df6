#!/usr/bin/env bash
# Measures simnic against the kernel's TCP on this machine: builds what `simnic bench` needs
# (simnic, simnicd, the shim) if they are missing or stale, then runs it. Results go to
# bench-results/<UTC timestamp>/ in the source tree unless --out says otherwise.
#
#   scripts/bench.sh [--build DIR] [simnic bench options: --quick, --no-spin, --out DIR, ...]
#
# See docs/performance.md for what the figures mean.
set -euo pipefail
build=build
if [[ ${1:-} == --build ]]; then
  build=$2
  shift 2
fi
cd "$(dirname "$0")/.."
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target simnic simnicd simnic_shim >/dev/null
exec "$build/bin/simnic" bench "$@"
