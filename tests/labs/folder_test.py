#!/usr/bin/env python3
"""The `cd labNN` trap (ctest label "labs", issue 24 point 5): the READMEs say `cd lab02`, so
`simnic lab check 2` must work from inside lab02/ (and grade that folder), and `simnic lab
start` run inside a lab folder must refuse, with advice, instead of nesting a fresh starter
(lab02/lab02) that `check` would then grade instead of the student's code.

    folder_test.py --simnic build/bin/simnic --labs labs
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
    print("$ (in %s) %s  (exit %d)\n%s" % (cwd, " ".join(argv), p.returncode, out))
    return p.returncode, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--simnic", required=True)
    ap.add_argument("--labs", required=True)
    a = ap.parse_args()
    simnic = os.path.abspath(a.simnic)
    solution = os.path.join(os.path.abspath(a.labs), "02-rc-send-recv", "solution")
    failures = []
    home = tempfile.mkdtemp(prefix="simnic-labdir-")
    lab02 = os.path.join(home, "lab02")
    try:
        rc, _ = run([simnic, "lab", "start", "2"], home)
        if rc != 0 or not os.path.isdir(lab02):
            failures.append("lab start 2 did not make lab02/")
            raise SystemExit
        before = sorted(os.listdir(lab02))
        with open(os.path.join(lab02, ".simnic-lab")) if os.path.exists(os.path.join(lab02, ".simnic-lab")) \
                else open(os.devnull) as f:
            if f.read().strip() != "2":
                failures.append("lab02/.simnic-lab does not hold the lab number 2")

        for n in ("2", "3"):  # the trap: following "start the lab first" from inside lab02
            rc, out = run([simnic, "lab", "start", n], lab02)
            nested = os.path.join(lab02, "lab0" + n)
            if rc == 0 or os.path.exists(nested):
                failures.append("lab start %s inside lab02/ nested a starter (exit %d)" % (n, rc))
            if "inside the lab folder" not in out or "cd %s" % home not in out:
                failures.append("lab start %s inside lab02/ does not say to start it from %s" % (n, home))

        rc, out = run([simnic, "lab", "check", "3"], lab02)
        if rc == 0 or "lab 2's folder" not in out:
            failures.append("lab check 3 inside lab02/ should say this is lab 2's folder")

        for name in os.listdir(solution):  # the student's finished work
            shutil.copy(os.path.join(solution, name), os.path.join(lab02, name))
        rc, out = run([simnic, "lab", "check", "2"], lab02)
        if rc != 0 or " 0 failed" not in out:
            failures.append("lab check 2 inside a finished lab02/ did not pass (exit %d)" % rc)
        if not os.path.exists(os.path.join(lab02, "trace", "simnic0.jsonl")):
            failures.append("lab check 2 inside lab02/ did not leave the trace in lab02/trace/")
        if not os.path.exists(os.path.join(lab02, ".simnic-lab-status")):
            failures.append("lab check 2 inside lab02/ did not record its status in lab02/")

        # A folder started before the marker existed is still recognised (labNN with a README).
        marker = os.path.join(lab02, ".simnic-lab")
        if not os.path.exists(marker):
            failures.append("lab start 2 did not write lab02/.simnic-lab (the lab number)")
        else:
            os.remove(marker)
        rc, out = run([simnic, "lab", "start", "2", "again"], lab02)
        if rc == 0 or os.path.exists(os.path.join(lab02, "again")):
            failures.append("lab start inside an unmarked lab02/ nested a starter")
        extra = sorted(set(os.listdir(lab02)) - set(before) - {"trace", ".simnic-lab-status", ".simnic-lab"})
        if any(e.startswith("lab") or e == "again" for e in extra):
            failures.append("a lab folder was nested: %s" % extra)
    except SystemExit:
        pass
    finally:
        shutil.rmtree(home, ignore_errors=True)
    for f in failures:
        print("FAILED: " + f)
    print("folder_test: %s" % ("ok" if not failures else "%d failure(s)" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
