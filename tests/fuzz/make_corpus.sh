#!/usr/bin/env bash
# Regenerates the checked-in seed corpora of the fuzzers from real traffic:
#   tests/fuzz/make_corpus.sh BUILD_DIR FUZZ_BUILD_DIR
# BUILD_DIR has simnic, simnicd, the shim and simnic-verbs-check (the normal build);
# FUZZ_BUILD_DIR has fuzz_seed_gen (the SIMNIC_FUZZ=ON build).
#
# Two private NICs (own SIMNIC_DIR, addresses 127.61.0.x) with a little loss and duplication
# run simnic-verbs-check (every RC operation) and ibv_uc_pingpong/ibv_ud_pingpong with a pcap
# and a trace on. packet_parser gets one datagram per (opcode, size class) from the pcaps;
# trace_reader gets slices of the traces; control_dispatch gets the request sequences of
# fuzz_seed_gen; rx_path, whose input is a script of choices rather than a datagram, gets a
# few fixed pseudo-random inputs.
set -euo pipefail
build=$(cd "$1" && pwd) fuzz_build=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/simnic-corpus.XXXXXX")
export SIMNIC_DIR=$work/state
cleanup() { "$build/bin/simnic" down >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT

"$build/bin/simnic" up 2 --addr 127.61.0.1 --pcap-dir "$work/pcap" --trace "$work/trace" \
  --loss 0.02 --dup 0.01 --seed 7 >/dev/null
timeout 120 "$build/bin/simnic" run -- "$build/bin/simnic-verbs-check" -a simnic0 -b simnic1 -s 3000 -n 3 -L >/dev/null
"$build/bin/simnic" fault off >/dev/null  # UC and UD have no retransmission: pingpong would stall
port=$((20000 + $$ % 10000))
for pp in ibv_uc_pingpong ibv_ud_pingpong; do
  timeout 60 "$build/bin/simnic" run -- $pp -d simnic0 -g 0 -n 20 -s 1000 -p $port >/dev/null 2>&1 &
  server=$!
  sleep 1
  timeout 60 "$build/bin/simnic" run -- $pp -d simnic1 -g 0 -n 20 -s 1000 -p $port 127.0.0.1 >/dev/null 2>&1 || true
  wait "$server" || true
done
"$build/bin/simnic" down >/dev/null

rm -rf "$here/corpus"/{packet_parser,trace_reader,control_dispatch,rx_path}
mkdir -p "$here/corpus"/{packet_parser,trace_reader,control_dispatch,rx_path}
python3 - "$work/pcap" "$here/corpus/packet_parser" <<'PY'
# Classic pcap: 24-byte file header, 16-byte record headers; Ethernet(14) + IPv4(20) + UDP(8).
import glob, os, struct, sys
src, out = sys.argv[1], sys.argv[2]
seen = set()
for path in sorted(glob.glob(os.path.join(src, "*.pcap"))):
    data = open(path, "rb").read()
    pos = 24
    while pos + 16 <= len(data):
        incl = struct.unpack_from("<I", data, pos + 8)[0]
        frame = data[pos + 16 : pos + 16 + incl]
        pos += 16 + incl
        udp = frame[14 + 20 + 8 :]
        if len(udp) < 16:
            continue
        key = (udp[0], min(len(udp) // 512, 3))
        if key in seen or len(seen) >= 40:
            continue
        seen.add(key)
        open(os.path.join(out, "op%02x-%d" % (udp[0], len(udp))), "wb").write(udp)
PY
n=0
for trace in "$work"/trace/*; do
  lines=$(wc -l <"$trace")
  for start in 1 $((lines / 3)) $((2 * lines / 3)); do
    sed -n "${start},$((start + 40))p" "$trace" >"$here/corpus/trace_reader/$(basename "$trace")-$start"
    n=$((n + 1))
  done
done
"$fuzz_build/fuzz/fuzz_seed_gen" "$here/corpus/control_dispatch"
python3 - "$here/corpus/rx_path" <<'PY'
import random, sys
r = random.Random(12)
for i, n in enumerate([64, 128, 256, 512, 1024, 1500, 2048, 3000, 4096]):
    open(f"{sys.argv[1]}/random-{i:02d}-{n}", "wb").write(bytes(r.getrandbits(8) for _ in range(n)))
PY
for d in "$here"/corpus/*; do echo "$(basename "$d"): $(ls "$d" | wc -l) files"; done
