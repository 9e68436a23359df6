#!/usr/bin/env bash
# Remakes the simnic-viz screenshots of the labs' READMEs (labs/NN-*/img/viz-*.png) from real
# runs of each lab's solution, so they show what simnic-viz shows today.
#
#   bash scripts/lab_screenshots.sh [--keep] [--from DIR] [LAB...]   (LAB: 1..8; default: all)
#
# Each lab runs as its grader runs it: `simnic lab check N --solution --trace-out DIR` (the
# grader builds the solution, starts private NICs on 127.216-253.x.x in a private SIMNIC_DIR,
# with lab 8's loss, runs the programs, stops the NICs by pid and must pass). The moment of each
# picture is found by searching that trace for the event its README caption describes (the
# `pick` program below, one function per picture), never by a sequence number, PSN or key
# of one run. The picture is then rendered as docs/viz.md says:
#   xvfb-run -a -s '-screen 0 1280x800x24' simnic-viz --replay DIR/*.jsonl \
#       --screenshot OUT.png --at NIC:SEQ --select NIC:SEQ
# Where the moment depends on timing (lab 2: the server's QP reaching RTS first; lab 4: both
# client NICs' atomics in flight at once; lab 8: which packets the loss hits), the lab runs
# again until it happens (10 runs at most). For each picture the script prints what the chosen
# moment shows (PSNs, states): look at the PNGs and keep the READMEs' captions true to them.
#
# Needs build/bin/simnic, simnicd, simnic-viz and build/lib (bash scripts/build.sh), xvfb-run,
# python3. --keep keeps the traces (their folder is printed); --from DIR renders again from
# traces kept that way (DIR/labN) instead of running the labs.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$ROOT/build/bin"
KEEP=0
FROM=""
LABS=()
while [[ $# -gt 0 ]]; do
  a="$1"; shift
  case "$a" in
    --keep) KEEP=1 ;;
    --from) FROM="$(cd "$1" && pwd)"; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    [1-8]) LABS+=("$a") ;;
    *) echo "lab_screenshots.sh: unknown argument $a (labs 1..8, --keep, --from DIR)" >&2; exit 2 ;;
  esac
done
[[ ${#LABS[@]} -gt 0 ]] || LABS=(1 2 3 4 5 6 7 8)
for b in simnic simnicd simnic-viz; do
  [[ -x "$BIN/$b" ]] || { echo "lab_screenshots.sh: $BIN/$b missing: build it (bash scripts/build.sh)" >&2; exit 1; }
done
command -v xvfb-run >/dev/null || { echo "lab_screenshots.sh: xvfb-run missing (scripts/setup.sh)" >&2; exit 1; }

WORK="$(mktemp -d /tmp/simnic-lab-shots.XXXXXX)"
export SIMNIC_DIR="$WORK/nics"          # private: nothing here touches the user's NICs
export SIMNIC_LABS_DIR="$ROOT/labs"
cleanup() { if [[ $KEEP == 1 ]]; then echo "traces kept in $WORK"; else rm -rf "$WORK"; fi; }
trap cleanup EXIT

# pick SHOT TRACE_DIR: prints "AT SELECT" (NIC:SEQ each) and, on a second line, what that
# moment shows. The events are put in simnic-viz's replay order first (viz/model/
# timeline_merge.cc: wall-clock time, a reception never before its transmission), so "in
# flight" and "state at that moment" mean what the picture shows.
PICK=$(cat <<'PY'
import glob, json, os, sys


def load(trace_dir):
    streams = {}
    for path in sorted(glob.glob(os.path.join(trace_dir, "*.jsonl"))):
        events = []
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass  # a line cut short when a NIC was killed
        if events:
            streams[events[0]["nic"]] = events
    return merge(streams)


def packet_key(e):
    return (e.get("src"), e.get("dst"), e.get("opcode_num"), e.get("psn"), e.get("dest_qp"))


def merge(streams):
    offset, addrs = {}, set()
    for nic, events in streams.items():
        up = next((e for e in events if e["kind"] == "nic_up"), None)
        if up:
            offset[nic] = up.get("wall_ns", up["t_ns"]) - up["t_ns"]
            addrs.add(up.get("addr"))
    heads, credits, out = {n: 0 for n in streams}, {}, []
    while True:
        best = blocked_best = None
        for nic in sorted(streams):
            if heads[nic] >= len(streams[nic]):
                continue
            e = streams[nic][heads[nic]]
            t = offset.get(nic, 0) + e["t_ns"]
            if e["kind"] == "pkt_rx" and e.get("src") in addrs and credits.get(packet_key(e), 0) <= 0:
                if blocked_best is None or t < blocked_best[0]:
                    blocked_best = (t, nic)
            elif best is None or t < best[0]:
                best = (t, nic)
        best = best or blocked_best
        if best is None:
            return out
        e = streams[best[1]][heads[best[1]]]
        heads[best[1]] += 1
        k = packet_key(e)
        if e["kind"] == "pkt_tx":
            copies = {"drop": 0, "dup": 2}.get(e.get("fault"), 1)
            if copies:
                credits[k] = credits.get(k, 0) + copies
        elif e["kind"] == "pkt_rx" and k in credits:
            credits[k] -= 1
            if credits[k] <= 0:
                del credits[k]
        e["pos"] = len(out) + 1
        out.append(e)


def ref(e):
    return "%s:%d" % (e["nic"], e["seq"])


def not_this_run(why):
    """The moment the caption describes did not happen in this run: the lab runs again."""
    print("pick: " + why, file=sys.stderr)
    sys.exit(3)


def first(events, what, **fields):
    for e in events:
        if all(e.get(k) == v for k, v in fields.items()) and what(e):
            return e
    sys.exit("pick: no event for this picture in the trace (%s)" % fields)


def kind(k):
    return lambda e: e["kind"] == k


def opcode(text):
    return lambda e: e["kind"] == "pkt_tx" and text in e.get("opcode", "")


def aeth_class(cls):
    return lambda e: e["kind"] == "pkt_tx" and (e.get("aeth") or {}).get("class") == cls


def qp_state_at(events, nic, pos):
    """{qpn: state} of `nic`'s QPs after the events before position `pos`."""
    states = {}
    for e in events[:pos]:
        if e["nic"] == nic and e["kind"] == "qp_state":
            states[e["qp"]] = e["to"]
    return states


def after(events, e):
    return events[e["pos"]:]


def in_flight(events, pos):
    """pkt_tx events before `pos` whose reception comes at or after `pos` (or never: dropped)."""
    waiting = {}
    for e in events[:pos]:
        if e["kind"] == "pkt_tx" and e.get("fault") != "drop":
            waiting.setdefault(packet_key(e), []).append(e)
        elif e["kind"] == "pkt_rx" and waiting.get(packet_key(e)):
            waiting[packet_key(e)].pop(0)
    return [e for v in waiting.values() for e in v]


# ---- one function per picture: (at, select, what it shows) --------------------------------

def devices(ev):  # lab 1: the end of the run; the inspector on devinfo's ctx_open on simnic0
    # (the grader runs `ibv_devinfo -v` first, for the truth, then the lab's devinfo)
    opens = [e for e in ev if e["kind"] == "ctx_open" and e["nic"] == "simnic0"]
    if not opens:
        sys.exit("pick: no ctx_open on simnic0")
    pids = [e["pid"] for e in opens]
    return ev[-1], opens[-1], "%d programs opened simnic0 (pids %s); the last one is devinfo" % (
        len(opens), ", ".join(map(str, pids)))


def rts(ev):  # lab 2: the server's QP reaches RTS while the client's is still behind (the
    # README's caption; which side gets there first depends on timing: else the lab runs again)
    e = first(ev, lambda e: e["kind"] == "qp_state" and e["to"] == "RTS")
    if e["nic"] != "simnic0":
        not_this_run("the client's QP reached RTS first")
    states = list(qp_state_at(ev, "simnic1", e["pos"]).values()) or ["RESET"]
    return e, e, "simnic0 (server) reached RTS first; simnic1 (client) is in %s" % states[-1]


def send(ev):  # lab 2: the client's first 4000-byte SEND, at its LAST packet
    f = first(ev, opcode("RC_SEND_FIRST"), nic="simnic1")
    last = first(after(ev, f), opcode("RC_SEND_LAST"), nic="simnic1", qp=f["qp"])
    return last, f, "SEND FIRST psn %#x .. LAST psn %#x" % (f["psn"], last["psn"])


def write(ev):  # lab 3: the client's first RDMA WRITE ONLY; the inspector on the server's table MR
    w = first(ev, opcode("RDMA_WRITE_ONLY"), nic="simnic1")
    mr = first(ev, lambda e: e["kind"] == "mr_create" and "REMOTE_WRITE" in e.get("access", ""), nic="simnic0")
    return w, mr, "WRITE %d B; the server's MR: %d B, %s" % (w.get("payload", 0), mr["length"], mr["access"])


def read(ev):  # lab 3: the server's NIC answering the first RDMA READ
    r = first(ev, opcode("RDMA_READ_RESPONSE"), nic="simnic0")
    return r, r, "%s %d B" % (r["opcode"], r.get("payload", 0))


def atomics(ev):  # lab 4: FETCH_ADDs of both client NICs on the wire at once, the moment
    # with the most clients in flight (the NICs answer so fast that a run may have none)
    is_atomic = opcode("FETCH_ADD")
    best = None
    for e in ev:
        if not is_atomic(e) or e["nic"] == "simnic0":
            continue
        flying = [p for p in in_flight(ev, e["pos"] + 1) if is_atomic(p)]
        score = (len({p["nic"] for p in flying}), len({(p["nic"], p["qp"]) for p in flying}))
        if best is None or score > best[0]:
            best = (score, e, flying)
    if best is None or best[0][0] < 2:
        not_this_run("the client NICs' atomics were never in flight at the same time")
    (nics, qps), e, flying = best
    other = next((p for p in flying if p["nic"] != e["nic"]), flying[0])
    return e, other, "%d FETCH_ADD in flight from %d QPs on %d NICs" % (len(flying), qps, nics)


def forced_err(ev, cqe):
    """The requester's QP going to ERR just after the error completion `cqe` (else the cqe)."""
    for e in after(ev, cqe):
        if e["nic"] == cqe["nic"] and e["kind"] == "qp_state" and e.get("qp") == cqe["qp"]:
            return e if e["to"] == "ERR" else cqe
    return cqe


def bad_rkey(ev):  # lab 5, scenario 1: the responder's NAK and the requester's error completion
    nak = first(ev, kind("nak"), code="REMOTE_ACCESS_ERR")
    cqe = first(after(ev, nak), kind("cqe"), status="remote access error")
    return forced_err(ev, cqe), nak, "NAK by %s: %s" % (nak["nic"], nak.get("rule", ""))


def rnr(ev):  # lab 5, scenario 3: the RNR NAK and the SEND's RNR_RETRY_EXC_ERR completion
    nak = first(ev, kind("nak"), code="RNR")
    pkt = first(after(ev, nak), aeth_class("RNR_NAK"), nic=nak["nic"])
    cqe = first(after(ev, pkt), kind("cqe"), status="RNR retry counter exceeded")
    return forced_err(ev, cqe), pkt, "RNR NAK by %s, completion on %s" % (pkt["nic"], cqe["nic"])


def ud_request(ev):  # lab 6: the client (simnic2) sends its REQUEST to the service (simnic1)
    service = first(ev, kind("nic_up"), nic="simnic1")["addr"]
    req = first(ev, opcode("UD_SEND_ONLY"), nic="simnic2", dst=service)
    return req, req, "UD SEND ONLY %d B, Q_Key %#x" % (req.get("payload", 0), (req.get("deth") or {}).get("qkey", 0))


def batched(ev):  # lab 7: the batched variant's first window: one doorbell, then its WQEs
    ctx_of_qp = {e["qp"]: e["ctx"] for e in ev if e["kind"] == "qp_create" and e["nic"] == "simnic0"}
    windows = {}  # ctx -> [(doorbell, [WQEs posted before the next doorbell])]
    for e in ev:
        if e["nic"] != "simnic0":
            continue
        if e["kind"] == "doorbell":
            windows.setdefault(e["ctx"], []).append((e, []))
        elif e["kind"] == "wqe_posted" and e["queue"] == "sq" and windows.get(ctx_of_qp.get(e["qp"])):
            windows[ctx_of_qp[e["qp"]]][-1][1].append(e)
    # perf_lab opens one context per variant: baseline, inline, selective, batched, then the sweeps
    opened = [e["ctx"] for e in ev if e["kind"] == "ctx_open" and e["nic"] == "simnic0"]
    ws = windows.get(opened[3] if len(opened) > 3 else None, [])
    widest = max((len(w) for _, w in ws), default=0)
    if widest < 2:
        not_this_run("no doorbell of the batched variant brought a window of WQEs")
    bell, wqes = next((b, w) for b, w in ws if len(w) == widest)
    writes = [p for p in after(ev, wqes[-1]) if opcode("RDMA_WRITE")(p) and p["nic"] == "simnic0"]
    return writes[min(3, len(writes) - 1)], bell, "context %d: %d doorbells, this one for %d WQEs" % (
        bell["ctx"], len(ws), len(wqes))


def go_back_n(ev):  # lab 8: go-back-N after a NAK "PSN sequence error": the first one whose
    # first resent packet arrived and one of the next three was dropped again (R and X on the
    # wire at once, and the retransmit event still in sight in the event log)
    chosen = None
    for rt in (e for e in ev if e["kind"] == "retransmit" and e["nic"] == "simnic0" and e["cause"] == "nak_seq"):
        resent = [e for e in after(ev, rt) if e["nic"] == "simnic0" and e["kind"] in ("pkt_tx", "retransmit")][:6]
        resent = resent[:next((i for i, e in enumerate(resent) if e["kind"] == "retransmit"), len(resent))]
        lost = [e for e in resent[1:4] if e.get("fault") == "drop"]
        if resent and resent[0].get("fault") != "drop" and lost:
            chosen = (rt, lost[0])
            break
    if chosen is None:
        not_this_run("no go-back-N with a resent packet dropped again")
    rt, at = chosen
    nak = [e for e in ev[:rt["pos"]] if e["kind"] == "nak" and e.get("code") == "PSN_SEQ_ERR"
           and e.get("psn") == rt["psn"]][-1]
    pkt = first(after(ev, nak), aeth_class("NAK"), nic=nak["nic"])
    return at, pkt, "NAK for PSN %#x by %s; %s resent from PSN %#x; at %s PSN %#x%s" % (
        nak["psn"], nak["nic"], rt["nic"], rt["psn"], at["opcode"], at["psn"],
        " (dropped)" if at.get("fault") == "drop" else "")


SHOTS = {f.__name__: f for f in (devices, rts, send, write, read, atomics, bad_rkey, rnr,
                                 ud_request, batched, go_back_n)}
at, sel, what = SHOTS[sys.argv[1]](load(sys.argv[2]))
print(ref(at), ref(sel))
print(what)
PY
)

# run_lab N DIR: the grader's run of lab N's solution; its first NICs' trace lands in DIR.
run_lab() {
  local out
  rm -rf "$2"
  if ! out=$(nice -n 19 "$BIN/simnic" lab check "$1" --solution --trace-out "$2" 2>&1); then
    echo "$out" >&2
    echo "lab_screenshots.sh: lab $1's solution did not pass its grader" >&2
    exit 1
  fi
  echo "lab $1: $(echo "$out" | grep -E '^[0-9]+ passed' | tail -1)"
}

# pick SHOT DIR: "AT SELECT" then what the moment shows; exit status 3: not in this run.
pick() { python3 -c "$PICK" "$1" "$2"; }

# shoot SHOT TRACE_DIR OUT.png: picks the moment, renders it.
shoot() {
  local shot="$1" dir="$2" png="$3"
  local picked at sel
  picked=$(pick "$shot" "$dir")
  read -r at sel <<<"$(head -1 <<<"$picked")"
  nice -n 19 xvfb-run -a -s '-screen 0 1280x800x24' "$BIN/simnic-viz" --replay "$dir"/simnic*.jsonl \
    --screenshot "$png" --at "$at" --select "$sel" >/dev/null
  echo "  ${png#"$ROOT"/}: --at $at --select $sel: $(tail -1 <<<"$picked")"
}

# The pictures of each lab: SHOT:FILE in labs/NN-*/img/.
shots_of() {
  case "$1" in
    1) echo devices:viz-devices.png ;;
    2) echo rts:viz-rts.png send:viz-send.png ;;
    3) echo write:viz-write.png read:viz-read.png ;;
    4) echo atomics:viz-atomics.png ;;
    5) echo bad_rkey:viz-bad-rkey.png rnr:viz-rnr.png ;;
    6) echo ud_request:viz-ud-request.png ;;
    7) echo batched:viz-batched.png ;;
    8) echo go_back_n:viz-go-back-n.png ;;
  esac
}

# all_found N DIR: every picture of lab N has its moment in this trace (else exit status 3).
all_found() {
  local s
  for s in $(shots_of "$1"); do pick "${s%%:*}" "$2" >/dev/null || return $?; done
}

for n in "${LABS[@]}"; do
  img="$ROOT/labs/$(cd "$ROOT/labs" && ls -d 0"$n"-*)/img"
  tr="$WORK/lab$n"
  if [[ -n "$FROM" ]]; then
    tr="$FROM/lab$n"
  else
    for attempt in $(seq 1 10); do  # a moment that depends on timing may need another run
      run_lab "$n" "$tr"
      rc=0; all_found "$n" "$tr" || rc=$?
      [[ $rc == 0 ]] && break
      [[ $rc == 3 && $attempt -lt 10 ]] || { echo "lab_screenshots.sh: lab $n: no picture" >&2; exit 1; }
    done
  fi
  for s in $(shots_of "$n"); do shoot "${s%%:*}" "$tr" "$img/${s#*:}"; done
done
