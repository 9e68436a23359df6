#!/usr/bin/env python3
"""CI for `simnic lab grade` (ctest label "labs"): a class of lab-3 submissions made from the
lab's own code (two correct ones, the starter, each broken variant, one that does not compile,
one whose client hangs) and a missing folder, graded with -j 2. Asserts that:
  - every row's score is the same in the table, the CSV, report.md and report.html, with one
    total T for the whole class (a submission that does not compile or is missing included);
  - the correct submissions get full marks, every other one less;
  - the hanging one is stopped at --timeout, shown as "timed out", and its program is gone;
  - each student has feedback.txt (with the compiler error, the hints), and the trace;
  - the submissions are byte-identical afterwards (nothing written into them; lab 7's plot
    and measurements go to the feedback folder too);
  - `simnic lab grade|check|start --help` print usage;
  - with a (fake) grader printing weighted scores (`...; score P/T`), the rows carry its P/T,
    and one that ignores SIGTERM is killed with its process group at the limit.

    grade_test.py --simnic build/bin/simnic --labs labs [--class-size 30] [--keep]

--class-size N repeats the mix up to N submissions, and -j/--timeout set grade's (to time a
whole class by hand).
"""
import argparse
import csv
import hashlib
import html
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import lab_test  # tests/labs/lab_test.py: the same broken variants CI grades

LAB = "03-one-sided"
TIMEOUT = 20  # --timeout per student: the hanging one is stopped by it (it would take ~60 s)


def copy_variant(labs, dest, variant):
    """solution/ with broken/NAME/ copied over it, or broken/NAME.patch applied to it."""
    lab = os.path.join(labs, LAB)
    shutil.copytree(os.path.join(lab, "solution"), dest)
    over = os.path.join(lab, "broken", variant)
    if os.path.isdir(over):
        for name in os.listdir(over):
            shutil.copy(os.path.join(over, name), os.path.join(dest, name))
    else:
        with open(over + ".patch", "rb") as f:
            subprocess.run(["patch", "-s", "-p1", "-d", dest], input=f.read(), check=True)


def broken_variants(labs):
    """The lab's broken variants' names (folders and patches), as lab_test.py finds them."""
    return [v.split("/", 1)[1] for v in lab_test.broken_variants(os.path.join(labs, LAB))]


def patch_file(path, old, new):
    with open(path) as f:
        text = f.read()
    assert old in text, "%s lacks %r" % (path, old)
    with open(path, "w") as f:
        f.write(text.replace(old, new, 1))


def make_class(labs, subs, work, size):
    """{student: kind} for the submissions made in `subs`."""
    lab = os.path.join(labs, LAB)
    kinds = ["correct", "starter"] + ["broken:" + v for v in broken_variants(labs)] + \
            ["no-compile", "hangs", "correct"]
    made = {}
    for i in range(max(size, len(kinds))):
        kind = kinds[i % len(kinds)]
        student = "s%02d-%s" % (i, kind.replace(":", "-"))
        dest = os.path.join(subs, student)
        if kind == "starter":
            shutil.copytree(os.path.join(lab, "starter"), dest)
        elif kind.startswith("broken:"):
            copy_variant(labs, dest, kind.split(":", 1)[1])
        else:
            shutil.copytree(os.path.join(lab, "solution"), dest)
        if kind == "no-compile":
            patch_file(os.path.join(dest, "client.c"), "int main(", "int this_is_not_c = ;\nint main(")
        if kind == "hangs":
            # After connecting, the client notes its pid (so the test can see it is gone) and
            # waits forever, like a student's client spinning on a completion never signalled.
            pidfile = os.path.join(work, "hang-%s.pid" % student)
            patch_file(os.path.join(dest, "client.c"), "int fd = lab_tcp_connect(o.server, o.port);",
                       "int fd = lab_tcp_connect(o.server, o.port);\n"
                       "  { FILE *pf = fopen(\"%s\", \"w\"); fprintf(pf, \"%%d\\n\", (int)getpid()); fclose(pf); }\n"
                       "  for (;;) pause();" % pidfile)
        made[student] = kind
    return made


def tree_digest(root):
    """Every path under `root` with its mode and content hash: any write shows."""
    h = hashlib.sha256()
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            p = os.path.join(d, name)
            st = os.lstat(p)
            h.update(("%s %o\n" % (os.path.relpath(p, root), st.st_mode)).encode())
            if os.path.isfile(p):
                with open(p, "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def table_scores(out):
    """{student: "P/T"} from the printed table."""
    rows, in_table = {}, False
    for line in out.splitlines():
        if line.startswith("student") and "score" in line:
            in_table = True
            continue
        if in_table and line.startswith("CSV:"):
            break
        if in_table and line.strip():
            cols = line.split()
            rows[cols[0]] = cols[1]
    return rows


def csv_rows(path):
    with open(path, newline="") as f:
        return {r["student"]: r for r in csv.DictReader(f)}


def report_md_scores(path):
    rows = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"^\| (\S+) \| (\d+(?:\.\d+)?/\d+(?:\.\d+)?) \|", line)
            if m:
                rows[m.group(1)] = m.group(2)
    return rows


def report_html_scores(path):
    with open(path) as f:
        text = f.read()
    return {html.unescape(s): p for s, p in re.findall(r"<tr><td>([^<]*)</td><td class=\"n\">([^<]*)</td>", text)
            if "/" in p}


def fraction(score):
    p, t = score.split("/")
    return float(p), float(t)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with open("/proc/%d/stat" % pid) as f:
        return f.read().split(") ", 1)[1][0] != "Z"


def check_help(simnic, failures):
    for sub in ("grade", "check", "start"):
        p = subprocess.run([simnic, "lab", sub, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        out = p.stdout.decode("utf-8", "replace")
        if p.returncode != 0 or "usage: " not in out or "not a lab number" in out:
            failures.append("simnic lab %s --help: exit %d, %r" % (sub, p.returncode, out[:200]))
    p = subprocess.run([simnic, "lab", "grade", "--help"], stdout=subprocess.PIPE, timeout=30)
    if b"-j N" not in p.stdout or b"--timeout" not in p.stdout or b"--out" not in p.stdout:
        failures.append("simnic lab grade --help does not describe -j, --out and --timeout")


def check_rows(made, out, odir, csv_path, failures, short_limit):
    table = table_scores(out)
    rows = csv_rows(csv_path) if os.path.exists(csv_path) else {}
    md = report_md_scores(os.path.join(odir, "report.md")) if os.path.exists(os.path.join(odir, "report.md")) else {}
    ht = report_html_scores(os.path.join(odir, "report.html")) if os.path.exists(os.path.join(odir, "report.html")) else {}
    students = sorted(made) + ["ghost"]
    totals = set()
    for s in students:
        score = table.get(s)
        got = {"table": score, "csv": rows.get(s, {}).get("score"), "report.md": md.get(s), "report.html": ht.get(s)}
        if score is None or len(set(got.values())) != 1:
            failures.append("%s: the scores disagree: %s" % (s, got))
            continue
        p, t = fraction(score)
        totals.add(t)
        kind = made.get(s, "missing")
        if kind == "correct" and p != t:
            failures.append("%s (correct) should have full marks, has %s" % (s, score))
        if kind != "correct" and p >= t:
            failures.append("%s (%s) should score below full marks, has %s" % (s, kind, score))
        if kind in ("missing", "no-compile") and p != 0:
            failures.append("%s (%s) should score 0, has %s" % (s, kind, score))
    if len(totals) > 1:
        failures.append("the rows have different totals: %s" % sorted(totals))
    for s, kind in made.items():
        note = rows.get(s, {}).get("note", "")
        # broken:hangs (the lab's own hangs.patch) hangs too: under a short --timeout both are cut.
        hangs = kind in ("hangs", "broken:hangs")
        want = "timed out" if hangs else {"no-compile": "does not compile"}.get(kind, "")
        if note != want and (not hangs or short_limit):
            failures.append("%s (%s): the CSV's note is %r, expected %r" % (s, kind, note, want))
    if rows.get("ghost", {}).get("note") != "no such folder":
        failures.append("the missing submission's note is not 'no such folder': %s" % rows.get("ghost"))


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def check_feedback(made, odir, work, failures, short_limit):
    for s, kind in made.items():
        fb = read(os.path.join(odir, s, "feedback.txt"))
        if "PASS builds" not in fb and "FAIL builds" not in fb:
            failures.append("%s: feedback.txt lacks the grader's checks: %r" % (s, fb[:300]))
        if kind == "no-compile":
            if not re.search(r"client\.c:\d+:\d+: error", fb):
                failures.append("%s: feedback.txt lacks the compiler error: %r" % (s, fb[:600]))
            if "this_is_not_c" not in read(os.path.join(odir, s, "build.log")):
                failures.append("%s: build.log lacks the compiler error" % s)
            if "this_is_not_c" not in fb:
                failures.append("%s: feedback.txt lacks the whole build log" % s)
        elif not os.path.isfile(os.path.join(odir, s, "trace", "simnic0.jsonl")):
            failures.append("%s: no trace in %s/trace/" % (s, os.path.join(odir, s)))
        if kind == "starter" and "hint: " not in fb:
            failures.append("%s: feedback.txt lacks the hints" % s)
        if kind == "hangs":
            if short_limit and "stopped after" not in fb:
                failures.append("%s: feedback.txt does not say the grading was stopped" % s)
            pidfile = os.path.join(work, "hang-%s.pid" % s)
            try:
                pid = int(read(pidfile).split()[0])
            except (IndexError, ValueError):
                failures.append("%s: the hanging client never ran (no %s)" % (s, pidfile))
                continue
            if pid_alive(pid):
                failures.append("%s: its hanging client (pid %d) is still running after grading" % (s, pid))
                os.kill(pid, signal.SIGKILL)


FAKE_GRADER = r"""
import os, signal, subprocess, sys, time
src = sys.argv[sys.argv.index("--src") + 1]
kind = open(os.path.join(src, "kind")).read().strip()
print("Fake lab -- grading " + src, flush=True)
if kind == "nobuild":
    print("FAIL builds\n  hint: the compiler said: x.c:1:1: error: nope\n0 passed, 1 failed; score 0/7", flush=True)
    sys.exit(1)
print("PASS builds\nPASS first", flush=True)
if kind == "stubborn":  # ignores SIGTERM: its group must be killed, a child of it included
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen(["sleep", "1000"])
    open(os.path.join(os.environ["FAKE_PIDS"], os.path.basename(src)), "w").write(str(child.pid))
    time.sleep(1000)
if kind == "half":
    print("FAIL second\n  hint: do the second thing\n2 passed, 1 failed; score 3/7", flush=True)
    sys.exit(1)
print("PASS second\n3 passed, 0 failed; score 7/7", flush=True)
"""


def check_weighted(simnic, work, failures):
    """A grader printing weighted scores (`score P/T`): the rows take its P/T; one that
    ignores the stop signal is killed with its group at the limit and scores 0/T."""
    root = os.path.join(work, "fake-labs")
    os.makedirs(os.path.join(root, "common"))
    os.makedirs(os.path.join(root, "99-fake"))
    open(os.path.join(root, "common", "simnic_lab.py"), "w").close()
    with open(os.path.join(root, "99-fake", "README.md"), "w") as f:
        f.write("# Lab 99: fake\n")
    with open(os.path.join(root, "99-fake", "grader.py"), "w") as f:
        f.write(FAKE_GRADER)
    pids = os.path.join(work, "fake-pids")
    os.makedirs(pids)
    kinds = {"full": "7/7", "half": "3/7", "nobuild": "0/7", "stubborn": "0/7"}
    for k in kinds:
        os.makedirs(os.path.join(work, "fake-subs", k))
        with open(os.path.join(work, "fake-subs", k, "kind"), "w") as f:
            f.write(k)
    env = dict(os.environ, SIMNIC_LABS_DIR=root, FAKE_PIDS=pids)
    out_dir = os.path.join(work, "fake-out")
    t0 = time.monotonic()
    p = subprocess.run([simnic, "lab", "grade", "99"] + [os.path.join(work, "fake-subs", k) for k in sorted(kinds)] +
                       ["--out", out_dir, "--timeout", "3", "-j", "4"], env=env, cwd=work,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    took = time.monotonic() - t0
    out = p.stdout.decode("utf-8", "replace")
    print(out)
    table = table_scores(out)
    rows = csv_rows(os.path.join(out_dir, "grades.csv")) if os.path.exists(os.path.join(out_dir, "grades.csv")) else {}
    for k, want in kinds.items():
        if table.get(k) != want or rows.get(k, {}).get("score") != want:
            failures.append("weighted: %s scores %s in the table, %s in the CSV; expected %s"
                            % (k, table.get(k), rows.get(k, {}).get("score"), want))
    if rows.get("stubborn", {}).get("note") != "timed out" or rows.get("stubborn", {}).get("first") != "PASS":
        failures.append("weighted: the stubborn grader's row should be 'timed out' with its first check: %s"
                        % rows.get("stubborn"))
    if took > 30:
        failures.append("weighted: a grader ignoring SIGTERM held the class for %.0f s (limit 3 s + grace)" % took)
    try:
        child = int(read(os.path.join(pids, "stubborn")))
        if pid_alive(child):
            failures.append("weighted: the stubborn grader's child (pid %d) survived" % child)
            os.kill(child, signal.SIGKILL)
    except ValueError:
        failures.append("weighted: the stubborn grader never started its child")


def check_lab7_output(simnic, labs, work, failures):
    """Lab 7's grader makes a plot and a CSV for the student: graded as a class, they go to the
    feedback folder, and the submission stays as it was."""
    sub = os.path.join(work, "subs7", "eve")
    shutil.copytree(os.path.join(labs, "07-performance", "solution"), sub)
    before = tree_digest(os.path.dirname(sub))
    out_dir = os.path.join(work, "out7")
    p = subprocess.run([simnic, "lab", "grade", "7", sub, "--out", out_dir], cwd=work, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=120)
    print(p.stdout.decode("utf-8", "replace"))
    if tree_digest(os.path.dirname(sub)) != before:
        failures.append("lab 7: grading wrote into the submission")
    for name in ("plot.svg", "results.csv", "feedback.txt"):
        if not os.path.isfile(os.path.join(out_dir, "eve", name)):
            failures.append("lab 7: no %s in the student's feedback folder" % name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--simnic", required=True)
    ap.add_argument("--labs", required=True)
    ap.add_argument("--class-size", type=int, default=0)
    ap.add_argument("-j", default="2")
    ap.add_argument("--timeout", default=str(TIMEOUT), help="simnic lab grade --timeout (seconds)")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    simnic, labs = os.path.abspath(a.simnic), os.path.abspath(a.labs)
    failures = []
    check_help(simnic, failures)
    work = tempfile.mkdtemp(prefix="simnic-grade-test-")
    try:
        subs = os.path.join(work, "subs")
        os.makedirs(subs)
        check_weighted(simnic, work, failures)
        check_lab7_output(simnic, labs, work, failures)
        made = make_class(labs, subs, work, a.class_size)
        before = tree_digest(subs)
        odir, csv_path = os.path.join(work, "O"), os.path.join(work, "C.csv")
        dirs = [os.path.join(subs, s) for s in sorted(made)] + [os.path.join(subs, "ghost")]
        t0 = time.monotonic()
        p = subprocess.run([simnic, "lab", "grade", "3"] + dirs + ["-j", a.j, "--out", odir, "--csv", csv_path,
                                                                   "--timeout", a.timeout],
                           cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=280)
        took = time.monotonic() - t0
        out = p.stdout.decode("utf-8", "replace")
        print(out)
        print("graded %d submissions with -j %s in %.1f s" % (len(dirs), a.j, took))
        if p.returncode != 0:
            failures.append("simnic lab grade exited %d" % p.returncode)
        # The hanging client costs lab 3's grader about a minute of its own time limits: a
        # --timeout below that stops the grading (a longer one, given by hand, may not).
        short_limit = int(a.timeout) < 50
        check_rows(made, out, odir, csv_path, failures, short_limit)
        check_feedback(made, odir, work, failures, short_limit)
        if tree_digest(subs) != before:
            failures.append("the submissions changed during grading (something was written into them)")
        if os.path.exists(os.path.join(work, "lab03-grading")):
            failures.append("lab grade wrote its default folder although --out was given")
    finally:
        if a.keep:
            print("kept: " + work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print("TEST FAILURE: " + f)
    print("grade_test: %s" % ("ok" if not failures else "%d failures" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
