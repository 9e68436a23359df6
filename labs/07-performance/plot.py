#!/usr/bin/env python3
"""plot.py: draws lab 7's measurements (the CSV perf_lab writes) as one SVG file.

    python3 plot.py results.csv plot.svg

Three panels: the four variants side by side (messages per second), throughput against
message size, and messages per second against queue depth. Standard library only: the SVG is
written by hand, so it opens in any web browser.
"""
import csv
import math
import sys

W, H, PAD = 360, 260, 48  # one panel


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("msg_size", "queue_depth", "messages"):
            r[k] = int(r[k])
        for k in ("seconds", "msgs_per_sec", "mbytes_per_sec"):
            r[k] = float(r[k])
    return rows


def text(x, y, s, anchor="middle", size=11, extra=""):
    return '<text x="%.1f" y="%.1f" font-size="%d" text-anchor="%s" font-family="sans-serif" %s>%s</text>' % (
        x, y, size, anchor, extra, s)


def axes(ox, title, xlabel, ylabel, ymax):
    out = ['<rect x="%d" y="0" width="%d" height="%d" fill="white" stroke="#ccc"/>' % (ox, W, H),
           text(ox + W / 2, 18, title, size=13, extra='font-weight="bold"'),
           '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (ox + PAD, H - PAD, ox + W - 12, H - PAD),
           '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (ox + PAD, 30, ox + PAD, H - PAD),
           text(ox + W / 2, H - 10, xlabel),
           text(ox + 12, H / 2, ylabel, extra='transform="rotate(-90 %d %d)"' % (ox + 12, H / 2))]
    for i in range(5):  # y ticks
        v = ymax * i / 4
        y = H - PAD - (H - PAD - 30) * i / 4
        out.append(text(ox + PAD - 4, y + 4, "%.3g" % v, anchor="end", size=9))
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>' % (ox + PAD, y, ox + W - 12, y))
    return out


def ypix(v, ymax):
    return H - PAD - (H - PAD - 30) * (v / ymax if ymax else 0)


def bars(ox, rows):
    names = ["baseline", "inline", "selective", "batched"]
    vals = [next((r["msgs_per_sec"] for r in rows if r["experiment"] == n), 0) for n in names]
    ymax = max(vals + [1]) * 1.15
    out = axes(ox, "Four variants (64 B, depth 16)", "variant", "messages / s", ymax)
    step = (W - PAD - 12) / len(names)
    for i, (n, v) in enumerate(zip(names, vals)):
        x = ox + PAD + step * i + step * 0.15
        out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#4a78c2"/>' % (
            x, ypix(v, ymax), step * 0.7, H - PAD - ypix(v, ymax)))
        out.append(text(x + step * 0.35, H - PAD + 14, n, size=10))
    return out


def line(ox, rows, experiment, xkey, ykey, title, xlabel, ylabel):
    pts = sorted((r[xkey], r[ykey]) for r in rows if r["experiment"] == experiment)
    if not pts:
        return axes(ox, title + " (no data)", xlabel, ylabel, 1)
    ymax = max(p[1] for p in pts) * 1.15 or 1
    lx = [math.log2(p[0]) for p in pts]
    lo, hi = min(lx), max(lx) if max(lx) > min(lx) else min(lx) + 1
    out = axes(ox, title, xlabel, ylabel, ymax)
    xy = [(ox + PAD + (W - PAD - 24) * (l - lo) / (hi - lo), ypix(p[1], ymax)) for l, p in zip(lx, pts)]
    out.append('<polyline fill="none" stroke="#c2412d" stroke-width="2" points="%s"/>' % " ".join(
        "%.1f,%.1f" % q for q in xy))
    for (x, y), p in zip(xy, pts):
        out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="#c2412d"/>' % (x, y))
        out.append(text(x, H - PAD + 14, str(p[0]), size=9))
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py RESULTS.csv OUT.svg")
    rows = load(sys.argv[1])
    parts = bars(0, rows)
    parts += line(W + 10, rows, "size_sweep", "msg_size", "mbytes_per_sec", "Message size (depth 16)",
                  "message size (bytes)", "MB / s")
    parts += line(2 * (W + 10), rows, "depth_sweep", "queue_depth", "msgs_per_sec", "Queue depth (4 KB)",
                  "WRs in flight", "messages / s")
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">' % (3 * W + 20, H)] + parts + ["</svg>"]
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(svg) + "\n")
    print("wrote %s (%d measurements)" % (sys.argv[2], len(rows)))


if __name__ == "__main__":
    main()
