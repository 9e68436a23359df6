#!/usr/bin/env python3
"""Lab 7 grader: the tricks must show in what the NIC saw, and the sweep in the CSV.

perf_lab runs once. Each variant has its own device context, so the trace tells them apart:
its QPN (printed by the program) leads to its qp_create event and from there to its context's
doorbells. Checks: inline WQEs carry the INLINE flag, selective signalling made fewer CQEs
than WQEs, the batched variant rang at most one doorbell per window, the WRITEs reached the
wire, and the CSV holds both sweeps with as many messages as the NIC really carried. Speed is
never judged: simnic's figures say nothing about a real NIC.
"""
import csv
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from simnic_lab import Lab, Trace  # noqa: E402
import more_checks as mc  # noqa: E402

VARIANTS = ("baseline", "inline", "selective", "batched")
# Core (4 each): inline WQEs, no payload DMA, selective signalling, batched doorbells, one
# ibv_post_send per window, the two sweeps. The rest, 1 each (builds, runs, CSV, plot ...),
# is mostly what the starter already does, so it weighs little.
POINTS = 38
LINE = re.compile(r"experiment\s+(\S+)\s+qpn\s+0x([0-9a-f]+)\s+size\s+(\d+)\s+depth\s+(\d+)\s+messages\s+(\d+)"
                  r"(?:\s+posts\s+(\d+))?")


def experiments(out):
    """{experiment: [(qpn, size, depth, messages, ibv_post_send calls or None), ...]} from the
    program's output."""
    found = {}
    for m in LINE.finditer(out):
        posts = int(m.group(6)) if m.group(6) else None
        found.setdefault(m.group(1), []).append((int(m.group(2), 16), int(m.group(3)), int(m.group(4)),
                                                 int(m.group(5)), posts))
    return found


def read_csv(path):
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return None


class Variant:
    """What the NIC saw of one experiment's QP: WQEs, CQEs, doorbells of its context."""

    def __init__(self, t, qpn, nic="simnic0"):
        if qpn is None:  # the program never printed this variant: nothing of it can count
            t = Trace({})
        self.wqes = t.wqes(nic, queue="sq", qp=qpn)
        self.cqes = t.cqes(nic, qp=qpn)
        ctx = mc.qp_ctx(t).get((nic, qpn))
        self.doorbells = mc.doorbells_by_ctx(t).get((nic, ctx), 0)
        self.inline = sum("INLINE" in e.get("flags", "") for e in self.wqes)
        self.writes = len(t.packets("tx", nic, opcode="RDMA_WRITE", qp=qpn))
        self.dma_reads = len(t.events("dma", nic, qp=qpn, dir="read"))


def grade(lab):
    lab.build(["perf_lab"])
    lab.up(2)
    csv_path = os.path.join(lab.tmp, "results.csv")
    run = lab.run([lab.bin("perf_lab"), "-a", lab.device(0), "-b", lab.device(1), "-g", lab.gid_index,
                   "-o", csv_path], timeout=50, name="perf_lab")
    lab.down()
    exps = experiments(run.out)
    # Exit 0 alone proves nothing (a program that does nothing exits 0): it must have run the
    # four variants, and ended by itself.
    lab.check("perf_lab runs and exits 0", run.rc == 0 and not run.timed_out and all(n in exps for n in VARIANTS),
              lambda: run.tail(6), weight=1)
    rows = read_csv(csv_path)
    t = lab.trace  # empty with --device: the trace checks below are then SKIPs
    check_csv(lab, rows, sweep_lengths(lab, t, exps))
    v = {name: Variant(t, exps[name][0][0] if name in exps else None) for name in VARIANTS}
    check_post_calls(lab, exps, None if lab.device_mode else len(v["batched"].wqes))
    check_plot(lab, csv_path, bool(rows))
    missing = [n for n in VARIANTS if n not in exps]
    lab.check("the program printed its four variants", not missing,
              "no 'experiment NAME qpn ...' line for " + ", ".join(missing), weight=1)
    base, inl, sel, bat = (v[n] for n in VARIANTS)
    lab.trace_check("baseline: plain WQEs, one CQE each",
                    lambda: base.inline == 0 and len(base.cqes) == len(base.wqes) > 0,
                    "the baseline must post every WR signalled and without IBV_SEND_INLINE (%d WQEs, %d inline, "
                    "%d CQEs): it is what the other variants are compared with" % (len(base.wqes), base.inline, len(base.cqes)),
                    weight=1)
    lab.trace_check("inline: the WQEs carry their data inline",
                    lambda: inl.wqes and inl.inline == len(inl.wqes),
                    "%d of %d WQEs of the inline variant had the INLINE flag (step 2): set IBV_SEND_INLINE in "
                    "send_flags when the message fits in max_inline_data" % (inl.inline, len(inl.wqes)),
                    weight=4, core=True)
    lab.trace_check("inline: the NIC fetched no payload by DMA (the baseline did, once per WQE)",
                    # an absence check: it needs both variants' WQEs to have been posted
                    lambda: inl.wqes and base.wqes and inl.dma_reads == 0 and base.dma_reads >= len(base.wqes),
                    "DMA reads of the payload: inline variant %d, baseline %d for %d WQEs (step 2): an inline WQE "
                    "carries its payload, so the NIC never reads the buffer" % (inl.dma_reads, base.dma_reads,
                                                                                len(base.wqes)),
                    weight=4, core=True)
    lab.trace_check("selective signalling: fewer CQEs than WQEs",
                    lambda: 0 < len(sel.cqes) < len(sel.wqes) and 0 < len(bat.cqes) < len(bat.wqes),
                    "the selective variant made %d CQEs for %d WQEs (batched: %d for %d) (step 3): set "
                    "IBV_SEND_SIGNALED only on the last WR of each window" % (len(sel.cqes), len(sel.wqes),
                                                                             len(bat.cqes), len(bat.wqes)),
                    weight=4, core=True)
    depth, posts = (exps["batched"][0][2], exps["batched"][0][4] or 0) if "batched" in exps else (0, 0)
    windows = -(-len(bat.wqes) // depth) if depth else 0
    # simnicd reads a context's doorbell eventfd when it wakes up, and an eventfd adds up the
    # rings that came before: an unbatched loop that outruns the NIC can show few doorbells
    # too. A linked window is exactly one ring, so the batched variant never shows more than
    # one doorbell per window; that much the trace proves, and only together with the program's
    # own count of one ibv_post_send per window (an unbatched starter under load passed without).
    # The name stays the same whatever the depth, so that a class's grades share their columns.
    lab.trace_check("batched: fewer doorbells than WQEs, at most one per window",
                    lambda: 0 < bat.doorbells <= min(windows, posts) and windows < len(bat.wqes) and posts <= windows,
                    "the batched variant rang %d doorbells and made %d ibv_post_send calls for %d WQEs in %d windows "
                    "of %d WRs (step 4): link the window's WRs through wr.next and post them with ONE ibv_post_send; "
                    "each call rings the doorbell" % (bat.doorbells, posts, len(bat.wqes), windows, depth),
                    weight=4, core=True)
    lab.trace_check("the WRITEs really went out (one packet per 64-byte WRITE at least)",
                    lambda: all(x.writes >= len(x.wqes) > 0 for x in (base, inl, sel, bat)),
                    "fewer RDMA WRITE packets on the wire than WRITEs posted: did the variant run to the end?", weight=1)
    sweep_qpns = {e[0] for name in ("size_sweep", "depth_sweep") for e in exps.get(name, [])}
    claimed = sum(int(r.get("messages", 0) or 0) for r in rows or [] if r.get("experiment") in ("size_sweep", "depth_sweep"))
    posted = sum(len(t.wqes("simnic0", queue="sq", qp=q)) for q in sweep_qpns)
    lab.trace_check("the CSV's sweep rows match what the NIC carried",
                    lambda: claimed > 0 and claimed == posted,
                    "the sweep rows of the CSV add up to %d messages but the NIC saw %d WRITEs posted on the sweep's "
                    "QP: write one row per measured point, from the measurement itself" % (claimed, posted), weight=1)


def check_post_calls(lab, exps, posted_wqes):
    """From the program's own count of ibv_post_send calls (works on a real NIC too); on simnic
    the count counts only when the NIC saw the batched variant's WRs posted (posted_wqes)."""
    bat = (exps.get("batched") or [(0, 0, 0, 0, None)])[0]
    _, _, depth, messages, posts = bat
    windows = -(-messages // depth) if depth else 0
    lab.check("batched: one ibv_post_send per window (the program's count)",
              posts is not None and 0 < posts <= windows and (posted_wqes is None or posted_wqes >= messages),
              "the batched variant made %s ibv_post_send calls for %d WRs in %d windows (step 4): link the window's "
              "WRs through wr.next and post them with ONE ibv_post_send" % (posts, messages, windows),
              weight=4, core=True)


def sweep_lengths(lab, t, exps):
    """The WRITE lengths the NIC saw posted on the sweeps' QPs (None with --device: no trace)."""
    if lab.device_mode:
        return None
    qpns = {e[0] for name in ("size_sweep", "depth_sweep") for e in exps.get(name, [])}
    return {e.get("length") for q in qpns for e in t.wqes("simnic0", queue="sq", qp=q)}


def check_csv(lab, rows, seen_lengths):
    """The CSV's content; the sweeps count only as far as the NIC saw them (seen_lengths)."""
    # a header alone (the file opened, nothing measured) is not a result
    lab.check("results.csv was written", bool(rows),
              "perf_lab did not write the -o file (step 5)" if rows is None else "results.csv has no rows", weight=1)
    rows = rows or []
    names = {r.get("experiment") for r in rows}
    lab.check("results.csv has a row per variant", all(n in names for n in VARIANTS),
              "missing rows for: " + ", ".join(n for n in VARIANTS if n not in names), weight=1)
    sizes = {int(r["msg_size"]) for r in rows if r.get("experiment") == "size_sweep"}
    unseen = sorted(sizes - seen_lengths) if seen_lengths is not None else []
    lab.check("results.csv has a message-size sweep (5+ sizes from 64 B to 16 KB or more)",
              len(sizes) >= 5 and min(sizes or [0]) <= 64 and max(sizes or [0]) >= 16384 and not unseen,
              "size_sweep rows cover sizes %s (step 5): measure at least 64, 256, 1024, 4096, 16384" % sorted(sizes)
              + ("; the NIC saw no WRITE of %s bytes on the sweep's QP" % unseen if unseen else ""),
              weight=4, core=True)
    depths = {int(r["queue_depth"]) for r in rows if r.get("experiment") == "depth_sweep"}
    lab.check("results.csv has a queue-depth sweep (4+ depths from 1)",
              len(depths) >= 4 and 1 in depths and (seen_lengths is None or len(seen_lengths) > 0),
              "depth_sweep rows cover depths %s (step 6): measure depth 1, 2, 4, 8, 16, ..." % sorted(depths),
              weight=4, core=True)
    good = all(float(r.get("seconds") or 0) > 0 and float(r.get("msgs_per_sec") or 0) > 0 for r in rows)
    lab.check("every row has a measured time and rate", rows and good,
              "a row has a zero or missing time: time each point with clock_gettime(CLOCK_MONOTONIC)", weight=1)


def check_plot(lab, csv_path, has_rows):
    """plot.py on the CSV; a CSV without rows draws empty axes, which is not a plot of anything."""
    plot = os.path.join(lab.tmp, "src", "plot.py")
    if not os.path.exists(plot):
        plot = os.path.join(lab.lab_dir, "plot.py")
    svg = os.path.join(lab.tmp, "plot.svg")
    r = lab.run_tool([sys.executable, plot, csv_path, svg], 30, "plot.py") if has_rows else None
    ok = r is not None and r.rc == 0 and os.path.exists(svg) and os.path.getsize(svg) > 500
    lab.check("plot.py draws the measurements", ok, "plot.py failed on results.csv: " + (r.tail(4) if r else "no CSV rows to plot"),
              weight=1)
    out = lab.output_dir()  # the student's own plot, next to their code (or in their feedback)
    if out and ok:
        os.makedirs(out, exist_ok=True)
        for f in (csv_path, svg):
            shutil.copy(f, os.path.join(out, os.path.basename(f)))
        lab.note("your measurements: %s/results.csv, your plot: %s/plot.svg" % (out, out))


if __name__ == "__main__":
    with Lab(__file__, "Lab 7: performance engineering", points=POINTS) as lab:
        grade(lab)
