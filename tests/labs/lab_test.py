#!/usr/bin/env python3
"""CI for one lab (ctest label "labs"): its solution passes its grader; its starter compiles
and fails with the hints labs/NN-topic/expect.txt lists; each broken/NAME variant fails with
the hints listed for it. Every variant needs at least one expected line, so a broken variant
nobody wrote a hint for cannot pass unnoticed.

    lab_test.py --lab labs/02-rc-send-recv --simnic build/bin/simnic
"""
import argparse
import os
import subprocess
import sys


def grade(lab, simnic, args, timeout=150):
    cmd = [sys.executable, os.path.join(lab, "grader.py")] + args + ["--simnic", simnic]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        return p.returncode, p.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        return -1, (e.output or b"").decode("utf-8", "replace") + "\n(timed out)"


def expectations(lab):
    """{variant: [text...]} from expect.txt."""
    out = {}
    with open(os.path.join(lab, "expect.txt")) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                variant, text = line.split(":", 1)
                out.setdefault(variant.strip(), []).append(text.strip())
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lab", required=True)
    ap.add_argument("--simnic", required=True)
    a = ap.parse_args()
    lab = os.path.abspath(a.lab)
    failures = []

    rc, out = grade(lab, a.simnic, ["--solution"])
    print("== solution (exit %d)\n%s" % (rc, out))
    if rc != 0 or "FAIL" in out or " 0 failed" not in out:
        failures.append("the solution does not pass its grader")

    expect = expectations(lab)
    broken_dir = os.path.join(lab, "broken")
    found = sorted(os.listdir(broken_dir)) if os.path.isdir(broken_dir) else []
    variants = ["starter"] + ["broken/" + v for v in found if os.path.isdir(os.path.join(broken_dir, v))]
    if len(variants) < 2:
        failures.append("the lab has no broken variant")
    for v in variants:
        args = ["--starter"] if v == "starter" else ["--broken", v.split("/", 1)[1]]
        rc, out = grade(lab, a.simnic, args)
        print("== %s (exit %d)\n%s" % (v, rc, out))
        if "PASS builds" not in out:
            failures.append("%s does not compile" % v)
        if rc != 1:
            failures.append("%s: the grader exited %d, expected 1 (a failed grading)" % (v, rc))
        if not expect.get(v):
            failures.append("%s: expect.txt names no hint for it" % v)
        for text in expect.get(v, []):
            if text not in out:
                failures.append("%s: the grader's output lacks %r" % (v, text))

    for f in failures:
        print("TEST FAILURE: " + f)
    print("%s: %s" % (os.path.basename(lab), "ok" if not failures else "%d failures" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
