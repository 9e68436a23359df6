#!/usr/bin/env bash
# Runs one fuzzer over its checked-in corpus: run.sh BIN_DIR NAME [libFuzzer flags...]
# New inputs go to a scratch copy (the checked-in corpus stays as it is); a crash is written to
# tests/fuzz/crashes/ under the fuzzer's name, and the run fails.
set -euo pipefail
bin_dir=$1 name=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
corpus=$here/corpus/${name%_fuzz}
work=$(mktemp -d "${TMPDIR:-/tmp}/simnic-fuzz-$name.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$here/crashes"
# -max_len: room for a receive-path script of several datagrams, or an MTU-sized packet.
max_len=4096
# ASan's leak check runs once at exit; the fuzzers free everything per input anyway.
"$bin_dir/$name" -max_len=$max_len -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$here/crashes/$name-" "$@" "$work" "$corpus"
