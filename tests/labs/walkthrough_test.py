#!/usr/bin/env python3
"""A student's path through lab 2 (ctest label "labs"): `simnic lab start 2 DIR` gives a folder
that fails `simnic lab check 2 DIR` with hints; after the student's edits (here: the solution's
files copied over the starter's) `simnic lab check 2 DIR` passes, `simnic lab list` reports it,
`simnic lab start` refuses to overwrite the folder, and `simnic lab grade` puts it in a CSV.

    walkthrough_test.py --simnic build/bin/simnic --labs labs
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile


def run(argv, cwd, timeout=150):
    p = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    out = p.stdout.decode("utf-8", "replace")
    print("$ %s  (exit %d)\n%s" % (" ".join(argv), p.returncode, out))
    return p.returncode, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--simnic", required=True)
    ap.add_argument("--labs", required=True)
    a = ap.parse_args()
    simnic = os.path.abspath(a.simnic)
    lab = os.path.join(os.path.abspath(a.labs), "02-rc-send-recv")
    failures = []
    home = tempfile.mkdtemp(prefix="simnic-walk-")
    try:
        rc, out = run([simnic, "lab", "start", "2"], home)
        copy = os.path.join(home, "lab02")
        for f in ("conn.c", "server.c", "client.c", "CMakeLists.txt", "labutil.h", "README.md"):
            if not os.path.exists(os.path.join(copy, f)):
                failures.append("lab start 2 did not create lab02/" + f)
        if rc != 0:
            failures.append("lab start 2 exited %d" % rc)

        rc, out = run([simnic, "lab", "check", "2"], home)
        if rc == 0 or "FAIL" not in out or "TODO(lab 2, step 1)" not in out:
            failures.append("the untouched starter should fail with a hint naming step 1")

        for name in os.listdir(os.path.join(lab, "solution")):  # the student's edits
            shutil.copy(os.path.join(lab, "solution", name), os.path.join(copy, name))
        rc, out = run([simnic, "lab", "check", "2"], home)
        if rc != 0 or " 0 failed" not in out:
            failures.append("lab check 2 does not pass after the edits")
        if not os.path.exists(os.path.join(copy, "trace", "simnic0.jsonl")):
            failures.append("lab check 2 did not leave the trace in lab02/trace/")

        rc, out = run([simnic, "lab", "list"], home)
        if not any(l.split()[:1] == ["2"] and "PASS" in l for l in out.splitlines()):
            failures.append("lab list does not show lab 2 as passed")
        rc, out = run([simnic, "lab", "start", "2"], home)
        if rc == 0:
            failures.append("lab start 2 overwrote a non-empty lab02/")

        # The teacher's view: lab02 and a missing student, graded into a CSV.
        rc, out = run([simnic, "lab", "grade", "2", "lab02", "nobody", "--csv", "class.csv"], home)
        csv_path = os.path.join(home, "class.csv")
        rows = open(csv_path).read().splitlines() if os.path.exists(csv_path) else []
        if rc != 0 or len(rows) != 3 or not rows[0].startswith("student,builds,"):
            failures.append("lab grade did not write a CSV with a header and one row per student")
        elif not (rows[1].startswith("lab02,PASS,") and "FAIL" not in rows[1]
                  and len(set(rows[1].rsplit(",", 1)[1].split("/"))) == 1):
            failures.append("lab grade: lab02's row should be all PASS with a full score: " + rows[1])
        elif not rows[2].startswith("nobody,-"):
            failures.append("lab grade: the missing student's row should have no results: " + rows[2])
    finally:
        shutil.rmtree(home, ignore_errors=True)
    for f in failures:
        print("TEST FAILURE: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
