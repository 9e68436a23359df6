#!/usr/bin/env bash
# Where simnic's time goes (issue 14): one perftest run through two private NICs, profiled.
#
#   scripts/profile.sh [--build DIR] [--test ib_write_bw] [--size BYTES] [--iters N] [-- simnic up options]
#
# Three passes of the same run, because a tracer changes what a sampler sees:
#   1. `perf record -g` on both simnicd processes: the hottest functions of each, in % of its samples;
#   2. `strace -c -f` on both: the system calls each NIC makes, per message;
#   3. `perf sched record` of the whole machine: for each NIC and each perftest process, the share
#      of a CPU it used, how often it was woken, how long it then waited for a CPU, and how long
#      it ran each time (where a small message's latency goes: hand-offs between four processes).
# Also prints perftest's own figure for each pass (pass 2 runs slower: strace stops every call).
# Extra `simnic up` options (e.g. --gso) go after `--`. Needs perf and strace (linux-perf, strace).
set -euo pipefail
build=build test=ib_write_bw size=65536 iters=5000
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --test) test=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "unknown option $1 (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
for tool in perf strace "$test"; do
  command -v "$tool" >/dev/null || { echo "profile.sh: $tool is not installed" >&2; exit 1; }
done
simnic=$build/bin/simnic
dir=$(mktemp -d /tmp/simnic-profile.XXXXXX)
export SIMNIC_DIR=$dir
addr=127.254.$(( ($$ % 200) + 20 )).1
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  "$simnic" down >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

up_out=$("$simnic" up 2 --addr "$addr" --no-history "$@")
nic_pids=$(sed -n 's/.*(pid \([0-9]*\),.*/\1/p' <<<"$up_out" | tr '\n' ' ')
read -r pid0 pid1 <<<"$nic_pids"
echo "NICs: simnic0 pid $pid0 (server side), simnic1 pid $pid1 (client side); $*"

# One perftest run, server on simnic0, client on simnic1; prints the client's result row.
run_perftest() {
  local port=$1
  local common=(-x 0 -p "$port" -s "$size" -n "$iters" -F)
  "$simnic" run -- "$test" -d simnic0 "${common[@]}" >"$dir/server.out" 2>&1 &
  local server=$!
  pids+=("$server")
  sleep 1
  date +%s.%N >"$dir/client.start"
  timeout 300 "$simnic" run -- "$test" -d simnic1 "${common[@]}" "$addr" >"$dir/client.out" 2>&1 || true
  date +%s.%N >"$dir/client.end"
  wait "$server" || true
  grep -A1 '#bytes' "$dir/client.out" | tail -1
}

echo
echo "== pass 1: perf record -g on both simnicd ($test, $size B x $iters)"
perf record -q -g -F 2000 -o "$dir/perf.data" -p "$pid0,$pid1" >/dev/null 2>&1 &
perf_pid=$!
pids+=("$perf_pid")
sleep 0.5
echo "perftest: $(run_perftest 18515)"
kill -INT "$perf_pid"
wait "$perf_pid" || true
for pid in $pid0 $pid1; do
  echo "-- simnicd $pid: where its samples fall (kernel, simnicd, libc, ISA-L ...)"
  perf report -q -i "$dir/perf.data" --pid "$pid" --no-children --sort dso --stdio 2>/dev/null |
    grep -E '^ +[0-9.]+%' | head -6
  echo "-- simnicd $pid: functions with 1 % of its samples or more (self time)"
  perf report -q -i "$dir/perf.data" --pid "$pid" --no-children --sort dso,sym --percent-limit 1 --stdio 2>/dev/null |
    grep -E '^ +[0-9.]+%' | head -25
done

echo
echo "== pass 2: strace -c -f on both simnicd"
for pid in $pid0 $pid1; do
  strace -c -f -q -p "$pid" -o "$dir/strace.$pid" &
  pids+=("$!")
done
sleep 0.5
echo "perftest (slowed by strace): $(run_perftest 18516)"
for p in $(jobs -p); do kill -INT "$p" 2>/dev/null || true; done
sleep 1
for pid in $pid0 $pid1; do
  echo "-- simnicd $pid: system calls per message ($iters messages)"
  awk -v n="$iters" '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" {
      printf "  %-18s %8.2f per message  (%s%% of its system time)\n", $NF, $4 / n, $1 }' "$dir/strace.$pid" |
    sort -k2 -nr | head -12
done

echo
echo "== pass 3: perf sched record, the whole machine ($test, $size B x $iters)"
if perf sched record -q -o "$dir/sched.data" -- sleep 0.01 >/dev/null 2>&1; then
  perf sched record -q -o "$dir/sched.data" >/dev/null 2>&1 &
  sched_pid=$!
  pids+=("$sched_pid")
  sleep 0.5
  echo "perftest: $(run_perftest 18517)"
  wall=$(echo "$(cat "$dir/client.end") - $(cat "$dir/client.start")" | bc)
  kill -INT "$sched_pid"
  wait "$sched_pid" || true
  echo "-- per process, over the client's ${wall%??????} s: CPU used, times switched in, wait for a CPU after a"
  echo "   wake-up (median, 90th percentile) and time run per switch-in (median), in microseconds"
  # timehist columns: time, [cpu], task[tid], wait time, sch delay, run time (ms)
  perf sched timehist -i "$dir/sched.data" 2>/dev/null | python3 -c '
import sys, collections
wall = float(sys.argv[1]); rows = collections.defaultdict(list)
for line in sys.stdin:
    f = line.split()
    if len(f) >= 6 and f[2].startswith(("simnicd", "ib_", "qperf")):
        try: rows[f[2]].append((float(f[4]) * 1000, float(f[5]) * 1000))
        except ValueError: pass
pick = lambda v, q: sorted(v)[int(len(v) * q)]
for task, v in sorted(rows.items()):
    waits, runs = [w for w, _ in v], [r for _, r in v]
    print("  %-22s CPU %5.1f%%  switch-ins %7d  wait p50 %5.1f p90 %6.1f  run p50 %6.1f" % (
        task, sum(runs) / 10000 / wall, len(v), pick(waits, .5), pick(waits, .9), pick(runs, .5)))
' "$wall"
else
  echo "(perf sched record is not available here: no scheduler tracepoints; pass skipped)"
fi
