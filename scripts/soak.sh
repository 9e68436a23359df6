#!/usr/bin/env bash
# Soak test: two private NICs with loss, duplication and reordering; several client processes
# (threads, many RC QP pairs each) run every opcode (SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM,
# READ, CMP_SWP, FETCH_ADD) with every byte and atomic result checked (tests/programs/soak.cc).
# simnicd's memory (VmRSS) is sampled after a warm-up and at the end of the load, and must not
# grow by more than 10% (+2 MiB); the NICs must still serve afterwards.
#
#   scripts/soak.sh [--minutes N | --seconds N] [--build DIR] [--loss P] [--dup P] [--reorder P]
#   (defaults: 30 minutes, build/, loss 0.01, dup 0.005, reorder 0.01; --seconds, at least 10,
#   is for a quick reproduction)
# Prints operations, bytes verified, errors, retransmissions and memory; exits non-zero on any
# error. CI runs a 2-minute version (ctest -L soak). Run it alone: beside a CPU-heavy loopback
# workload (qperf, simnic bench, other tests) its NICs can wait on the run queue for over a
# second, longer than its QPs' retries allow (docs/performance.md, the data path, step 2).
set -euo pipefail
minutes=30
seconds=
build=build
loss=0.01 dup=0.005 reorder=0.01
while (($#)); do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --loss) loss=$2; shift 2 ;;
    --dup) dup=$2; shift 2 ;;
    --reorder) reorder=$2; shift 2 ;;
    *) echo "usage: $0 [--minutes N | --seconds N] [--build DIR] [--loss P] [--dup P] [--reorder P]" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
build=$(cd "$build" && pwd)
simnic=$build/bin/simnic soak=$build/bin/simnic-soak
for f in "$simnic" "$soak" "$build/bin/simnicd"; do
  [[ -x $f ]] || { echo "soak: $f missing (cmake --build $build --target simnic simnicd simnic_shim simnic-soak)" >&2; exit 1; }
done

export SIMNIC_DIR
SIMNIC_DIR=$(mktemp -d "${TMPDIR:-/tmp}/simnic-soak.XXXXXX")
clients=()
cleanup() {
  for pid in "${clients[@]}"; do kill "$pid" 2>/dev/null || true; done
  "$simnic" down >/dev/null 2>&1 || true
  rm -rf "$SIMNIC_DIR"
}
trap cleanup EXIT
# A private address pair per run, so concurrent runs (and other tests) never share a NIC.
addr=127.255.$((RANDOM % 250 + 1)).1  # 127.255.x: no test or lab uses it (tests: 16-215, labs: 216-253, bench: 254)
"$simnic" up 2 --addr "$addr" --loss "$loss" --dup "$dup" --reorder "$reorder" --seed 11 >/dev/null

rss_kib() {  # VmRSS of a NIC's simnicd
  awk '/^VmRSS:/ {print $2}' "/proc/$(cat "$SIMNIC_DIR/$1.pid")/status"
}

seconds=${seconds:-$((minutes * 60))}
((seconds >= 10)) || { echo "soak: --seconds must be at least 10" >&2; exit 2; }
warmup=$((seconds / 10 < 20 ? seconds / 10 : 20))
# Three client processes: two share one context per NIC among their threads, one opens a
# context per thread. 3 x 2 threads x 8 pairs = 48 RC QP pairs, 96 QPs on each NIC.
for args in "-t 2 -q 8" "-t 2 -q 8" "-t 2 -q 8 -c"; do
  # shellcheck disable=SC2086
  "$simnic" run -- "$soak" -a simnic0 -b simnic1 $args -s 16384 -d "$seconds" -T 120 \
    >"$SIMNIC_DIR/client$((${#clients[@]})).out" 2>&1 &
  clients+=($!)
done
sleep "$warmup"
rss0_start=$(rss_kib simnic0) rss1_start=$(rss_kib simnic1)
sleep $((seconds - warmup - 2))
rss0_end=$(rss_kib simnic0) rss1_end=$(rss_kib simnic1)

status=0
for i in "${!clients[@]}"; do
  if ! wait "${clients[$i]}"; then
    echo "soak: client $i failed:" >&2
    tail -5 "$SIMNIC_DIR/client$i.out" >&2
    status=1
  fi
done
clients=()
ops=0 bytes=0 errors=0
for out in "$SIMNIC_DIR"/client*.out; do
  line=$(grep '^soak: .*operations' "$out" || true)
  [[ -n $line ]] || { errors=$((errors + 1)); continue; }
  ops=$((ops + $(sed -E 's/.*operations ([0-9]+).*/\1/' <<<"$line")))
  bytes=$((bytes + $(sed -E 's/.*bytes verified ([0-9]+).*/\1/' <<<"$line")))
  errors=$((errors + $(sed -E 's/.*errors ([0-9]+).*/\1/' <<<"$line")))
done
rss0_after=$(rss_kib simnic0) rss1_after=$(rss_kib simnic1)

# The NICs still serve: one more short client after the load.
if ! "$simnic" run -- "$soak" -a simnic0 -b simnic1 -t 1 -q 2 -n 14 >/dev/null 2>&1; then
  echo "soak: the NICs no longer serve a new client" >&2
  status=1
fi
stable() { (($2 <= $1 + $1 / 10 + 2048)); }
memory=stable
if ! stable "$rss0_start" "$rss0_end" || ! stable "$rss1_start" "$rss1_end"; then
  memory=GROWING
  status=1
fi

echo "soak: $seconds s, 3 processes x 2 threads x 8 RC QP pairs, loss $loss dup $dup reorder $reorder"
echo "soak: operations $ops, bytes verified $bytes, errors $errors"
grep -h '^soak: per opcode' "$SIMNIC_DIR"/client*.out | sed 's/^/  /'
"$simnic" status | sed 's/^/  /'
for n in simnic0 simnic1; do "$simnic" status "$n" --raw | grep -E "^(rx_drop|fault_drops|tx_socket_drops|retransmits|timeouts|naks)" | grep -v " 0$" | tr "\n" " " | sed "s/^/  $n: /"; echo; done
echo "soak: simnicd VmRSS KiB (after ${warmup}s / at the end / after the clients left):" \
  "simnic0 $rss0_start / $rss0_end / $rss0_after, simnic1 $rss1_start / $rss1_end / $rss1_after: $memory"
((errors == 0)) || status=1
exit $status
