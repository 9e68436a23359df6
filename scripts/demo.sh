#!/usr/bin/env bash
# The demo: two simulated hosts (simnic0 on 127.0.0.1, simnic1 on 127.0.0.2) run the
# unmodified ibv_rc_pingpong from Debian's ibverbs-utils, then an RDMA exchange (SEND, WRITE,
# READ, atomics) with every byte checked, tshark shows the RoCEv2 packets on the wire, and
# simnic-viz replays the NICs' trace (a window when there is a display, else a PNG via Xvfb).
#
#   bash scripts/demo.sh [--addr A.B.C.D]     (or SIMNIC_ADDR=A.B.C.D): the first NIC's address,
#                                             when 127.0.0.1/127.0.0.2 are taken (shared machines)
set -euo pipefail
ADDR="${SIMNIC_ADDR:-127.0.0.1}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --addr) ADDR="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "demo.sh: unknown argument $1 (try --addr 127.0.N.1)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
scripts/setup.sh
# Only what the demo runs (the `demo` target), not the test suites: a few minutes, not ten.
cmake -S . -B build -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" >/dev/null
cmake --build build -j"$(nproc)" --target demo

export SIMNIC_DIR="${SIMNIC_DIR:-$(mktemp -d /tmp/simnic-demo.XXXXXX)}"
SIMNIC=build/bin/simnic
PCAPS="$SIMNIC_DIR/pcap"
TRACES="$SIMNIC_DIR/trace"
mkdir -p "$PCAPS" "$TRACES"
server=""
cleanup() {
  [[ -n "$server" ]] && kill "$server" 2>/dev/null || true
  "$SIMNIC" down >/dev/null 2>&1 || true
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Start two simulated RDMA NICs (two hosts), capturing packets and trace events"
"$SIMNIC" up 2 --addr "$ADDR" --pcap-dir "$PCAPS"
"$SIMNIC" run -- ibv_devices

step "ibv_rc_pingpong, unmodified: server on simnic0, client on simnic1 (4 KiB x 1000)"
"$SIMNIC" run -- ibv_rc_pingpong -d simnic0 -g 0 -s 4096 -n 1000 > "$SIMNIC_DIR/server.txt" 2>&1 &
server=$!
sleep 0.5
echo "-- client (simnic1):"
timeout 120 "$SIMNIC" run -- ibv_rc_pingpong -d simnic1 -g 0 -s 4096 -n 1000 "$ADDR"
wait "$server"; server=""
echo "-- server (simnic0):"
cat "$SIMNIC_DIR/server.txt"

step "An RDMA exchange between the hosts: SEND, WRITE, READ, atomics; every byte compared"
# Traced from here on (the ping-pong above would fill the trace with 2000 round trips).
"$SIMNIC" down >/dev/null
"$SIMNIC" up 2 --addr "$ADDR" --pcap-dir "$PCAPS" --trace "$TRACES" >/dev/null
timeout 120 "$SIMNIC" run -- build/bin/simnic-verbs-check -a simnic0 -b simnic1 -n 1

step "A lossy wire (10% of packets dropped): go-back-N retransmission recovers every message"
"$SIMNIC" fault loss=0.1 seed=1
"$SIMNIC" run -- ibv_rc_pingpong -d simnic0 -g 0 -s 4096 -n 50 > "$SIMNIC_DIR/server.txt" 2>&1 &
server=$!
sleep 0.5
timeout 120 "$SIMNIC" run -- ibv_rc_pingpong -d simnic1 -g 0 -s 4096 -n 50 "$ADDR"
wait "$server"; server=""
"$SIMNIC" fault off >/dev/null

step "What the NICs counted"
"$SIMNIC" status

step "The wire, as tshark decodes it (first packets of the exchange)"
"$SIMNIC" down >/dev/null   # flushes the pcap files
if command -v tshark >/dev/null; then
  tshark -r "$PCAPS/simnic1.pcap" --disable-protocol rpcordma -c 12 2>/dev/null || true
  echo "(full captures: $PCAPS/simnic0.pcap and $PCAPS/simnic1.pcap; open them in Wireshark)"
fi

step "Inside the NICs: simnic-viz replays what happened, event by event"
VIZ=(build/bin/simnic-viz --replay "$TRACES/simnic0.jsonl" "$TRACES/simnic1.jsonl")
if [[ ! -x build/bin/simnic-viz ]]; then
  echo "(simnic-viz was not built: it needs libimgui-dev, libglfw3-dev, libstb-dev)"
elif [[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]]; then
  echo "opening simnic-viz: press play, or step with the buttons; close the window to finish"
  "${VIZ[@]}" || true
elif command -v xvfb-run >/dev/null; then
  xvfb-run -a -s '-screen 0 1280x800x24' "${VIZ[@]}" --screenshot "$SIMNIC_DIR/viz.png" --at @60 || true
  echo "(no display here: rendered $SIMNIC_DIR/viz.png; with a display run: ${VIZ[*]})"
fi
echo "trace files: $TRACES/simnic0.jsonl $TRACES/simnic1.jsonl (docs/trace-format.md)"
