#!/usr/bin/env python3
"""CI for one lab (ctest label "labs"): its solution passes its grader with full marks; its
starter compiles and fails with the hints labs/NN-topic/expect.txt lists; each broken variant
(broken/NAME/ or broken/NAME.patch) fails with the hints listed for it. Every variant needs at
least one expected line, so a broken variant nobody wrote a hint for cannot pass unnoticed.
Grades must mean something (issue 24): every lab has broken/does-nothing and broken/hangs,
and they and the starter score 0 on every core check (read from the grader's --results
JSON); the README's "## How this lab is graded" names every check and the total.

    lab_test.py --lab labs/02-rc-send-recv --simnic build/bin/simnic

The gradings run side by side (SIMNIC_LAB_TEST_JOBS, default 3): each grader leases NICs of its
own, and the hangs variants spend most of their time waiting at their time limits.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

MUST_SCORE_ZERO = ("starter", "broken/does-nothing", "broken/hangs")  # on every core check


def grade(lab, simnic, args, timeout=240):
    """Runs the grader; returns (exit status, output, its --results JSON or None)."""
    fd, results = tempfile.mkstemp(prefix="simnic-lab-results-", suffix=".json")
    os.close(fd)
    cmd = [sys.executable, os.path.join(lab, "grader.py")] + args + ["--simnic", simnic, "--results", results]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        rc, out = p.returncode, p.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        rc, out = -1, (e.output or b"").decode("utf-8", "replace") + "\n(timed out)"
    try:
        with open(results) as f:
            data = json.load(f)
    except (OSError, ValueError):
        data = None
    os.unlink(results)
    return rc, out, data


def args_of(variant):
    """The grader's arguments for "solution", "starter" or "broken/NAME"."""
    if variant in ("solution", "starter"):
        return ["--" + variant]
    return ["--broken", variant.split("/", 1)[1]]


def broken_variants(lab):
    """broken/NAME/ folders and broken/NAME.patch files, as "broken/NAME"."""
    d = os.path.join(lab, "broken")
    names = set()
    for v in os.listdir(d) if os.path.isdir(d) else []:
        if os.path.isdir(os.path.join(d, v)):
            names.add(v)
        elif v.endswith(".patch"):
            names.add(v[:-len(".patch")])
    return ["broken/" + v for v in sorted(names)]


def core_passes(data):
    """The core checks a grading passed (none may pass for MUST_SCORE_ZERO)."""
    return [c["name"] for c in data["checks"] if c["core"] and c["status"] == "PASS"]


def graded_section(lab):
    """The README's "## How this lab is graded" section ("" when it has none)."""
    with open(os.path.join(lab, "README.md"), encoding="utf-8") as f:
        text = f.read()
    start = text.find("\n## How this lab is graded")
    if start < 0:
        return ""
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def readme_failures(lab, solution):
    """The README's grading table must name every check the solution run made, and the total."""
    section = graded_section(lab)
    if not section:
        return ["README.md has no '## How this lab is graded' section"]
    out = ["README.md's grading table lacks the check %r" % c["name"] for c in solution["checks"]
           if c["name"] not in section]
    if "%s" % solution["total"] not in section:
        out.append("README.md's grading section does not state the total %s" % solution["total"])
    return out


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

    expect = expectations(lab)
    variants = ["starter"] + broken_variants(lab)
    jobs = max(1, int(os.environ.get("SIMNIC_LAB_TEST_JOBS", "3")))
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        graded = {v: pool.submit(grade, lab, a.simnic, args_of(v)) for v in ["solution"] + variants}
        results = {v: f.result() for v, f in graded.items()}

    rc, out, solution = results["solution"]
    print("== solution (exit %d)\n%s" % (rc, out))
    if rc != 0 or "FAIL" in out or " 0 failed" not in out:
        failures.append("the solution does not pass its grader")
    if not solution or solution["score"] != solution["total"]:
        failures.append("the solution does not score full marks (%s)" % (
            solution and "%s/%s" % (solution["score"], solution["total"])))
    elif not any(c["core"] for c in solution["checks"]):
        failures.append("the grader marks no check core=True")
    else:
        failures += readme_failures(lab, solution)

    if len(variants) < 2:
        failures.append("the lab has no broken variant")
    for v in MUST_SCORE_ZERO:
        if v not in variants:
            failures.append("the lab has no %s variant (a patch: %s.patch)" % (v, v))
    for v in variants:
        rc, out, data = results[v]
        print("== %s (exit %d)\n%s" % (v, rc, out))
        if data is None:
            failures.append("%s: the grader wrote no --results" % v)
        elif v in MUST_SCORE_ZERO and core_passes(data):
            failures.append("%s passes core checks it must fail: %s" % (v, "; ".join(core_passes(data))))
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
