#!/usr/bin/env bash
# Configures and builds simnic into build/ (programs in build/bin, the shim in build/lib).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
cmake --build build -j"$(nproc)"
