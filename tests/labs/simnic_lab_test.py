#!/usr/bin/env python3
"""The grading mechanism of labs/common/simnic_lab.py on a tiny fake lab (ctest label "labs"),
without NICs: weights and the `; score P/T` summary, the --results JSON, a failed build
scoring 0/T, an interrupted grading scoring 0/T, weights that do not add up to the declared points (exit 2), broken/NAME.patch
variants (applied with patch -p1 to a copy of solution/) next to broken/NAME/ folders, and
`simnic lab check N --broken` listing and grading both kinds.

    simnic_lab_test.py --simnic build/bin/simnic --labs labs
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

GRADER = r'''
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from simnic_lab import Lab
with Lab(__file__, "Fake lab", points=int(os.environ.get("FAKE_POINTS", "5"))) as lab:
    lab.build(["prog"])
    r = lab.run_tool([lab.bin("prog")], 10, "prog")
    lab.check("prog says ok", r.out.strip() == "ok", "it said " + r.out.strip(), weight=3, core=True)
    if os.environ.get("FAKE_SIGNAL"):
        import signal
        os.kill(os.getpid(), signal.SIGTERM)
    lab.check("prog exits 0", r.rc == 0, r.tail(), weight=1)
'''
CMAKE = "cmake_minimum_required(VERSION 3.16)\nproject(fake C)\nadd_executable(prog prog.c)\n"
PROG = '#include <stdio.h>\nint main(void) {\n  puts("%s");\n  return %d;\n}\n'
PATCH = """--- a/prog.c
+++ b/prog.c
@@ -1,4 +1,4 @@
 #include <stdio.h>
 int main(void) {
-  puts("ok");
+  puts("no");
   return 0;
"""


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def make_labs(root, labs_src):
    """root/common (the real simnic_lab.py), root/01-fake with solution/, starter/ (does not
    compile), broken/exit-1/ (a folder variant) and broken/says-no.patch (a patch variant)."""
    shutil.copytree(os.path.join(labs_src, "common"), os.path.join(root, "common"))
    lab = os.path.join(root, "01-fake")
    write(os.path.join(lab, "grader.py"), GRADER)
    write(os.path.join(lab, "CMakeLists.txt"), CMAKE)
    write(os.path.join(lab, "README.md"), "# Lab 1: fake\n")
    write(os.path.join(lab, "solution", "prog.c"), PROG % ("ok", 0))
    write(os.path.join(lab, "starter", "prog.c"), "int main(void) { TODO }\n")
    write(os.path.join(lab, "broken", "exit-1", "prog.c"), PROG % ("ok", 1))
    write(os.path.join(lab, "broken", "says-no.patch"), PATCH)
    return lab


def grade(lab, args, env=None):
    res = os.path.join(tempfile.mkdtemp(prefix="simnic-lab-test-"), "results.json")
    p = subprocess.run([sys.executable, os.path.join(lab, "grader.py")] + args + ["--results", res],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120,
                       env=dict(os.environ, **(env or {})))
    out = p.stdout.decode("utf-8", "replace")
    print("== %s (exit %d)\n%s" % (" ".join(args), p.returncode, out))
    data = None
    if os.path.exists(res):
        with open(res) as f:
            data = json.load(f)
    shutil.rmtree(os.path.dirname(res), ignore_errors=True)
    return p.returncode, out, data


def expect(failures, what, cond):
    if not cond:
        failures.append(what)


def statuses(data):
    return {c["name"]: (c["status"], c["weight"], c["core"]) for c in (data or {}).get("checks", [])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--simnic", required=True)
    ap.add_argument("--labs", required=True)
    a = ap.parse_args()
    if not shutil.which("patch"):
        print("SKIP: no `patch` program (apt-get install patch)")
        return 0
    root = tempfile.mkdtemp(prefix="simnic-fake-labs-")
    failures = []
    try:
        lab = make_labs(root, os.path.abspath(a.labs))

        rc, out, data = grade(lab, ["--solution"])
        expect(failures, "solution: exit 0", rc == 0)
        expect(failures, "solution: summary '3 passed, 0 failed; score 5/5'", "3 passed, 0 failed; score 5/5" in out)
        expect(failures, "solution: results JSON score 5 of 5", data and data["score"] == 5 and data["total"] == 5)
        expect(failures, "solution: results JSON weights and core flags",
               statuses(data) == {"builds": ("PASS", 1, False), "prog says ok": ("PASS", 3, True),
                                  "prog exits 0": ("PASS", 1, False)})

        rc, out, data = grade(lab, ["--broken", "says-no"])
        expect(failures, "says-no.patch: applied and graded (exit 1, score 2/5)",
               rc == 1 and "FAIL prog says ok" in out and "score 2/5" in out)
        expect(failures, "says-no.patch: the core check fails in the JSON",
               statuses(data).get("prog says ok") == ("FAIL", 3, True) and data["score"] == 2)

        rc, out, data = grade(lab, ["--broken", "exit-1"])
        expect(failures, "broken/exit-1/ folder variant: exit 1, score 4/5",
               rc == 1 and "FAIL prog exits 0" in out and "score 4/5" in out)

        rc, out, data = grade(lab, ["--starter"])
        expect(failures, "starter (does not compile): exit 1, FAIL builds, score 0/5",
               rc == 1 and "FAIL builds" in out and "; score 0/5" in out)
        expect(failures, "starter: results JSON 0 of 5", data and data["score"] == 0 and data["total"] == 5)

        rc, out, data = grade(lab, ["--solution"], {"FAKE_POINTS": "6"})
        expect(failures, "weights 5 != points 6: the grader broke (exit 2), score 0/6",
               rc == 2 and "grader error" in out and "; score 0/6" in out)

        rc, out, data = grade(lab, ["--solution"], {"FAKE_SIGNAL": "1"})
        expect(failures, "a grading interrupted by a signal: exit 1, score 0/5 though checks passed",
               rc == 1 and "PASS prog says ok" in out and "; score 0/5" in out and data and data["score"] == 0)

        p = subprocess.run([a.simnic, "lab", "check", "1", "--broken"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=240, env=dict(os.environ, SIMNIC_LABS_DIR=root))
        out = p.stdout.decode("utf-8", "replace")
        print("== simnic lab check 1 --broken (exit %d)\n%s" % (p.returncode, out))
        expect(failures, "simnic lab check --broken grades the .patch variant",
               "=> broken/says-no: caught" in out)
        expect(failures, "simnic lab check --broken grades the folder variant", "=> broken/exit-1: caught" in out)
        expect(failures, "simnic lab check --broken: exit 0 (every variant caught)", p.returncode == 0)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for f in failures:
        print("TEST FAILURE: " + f)
    print("simnic_lab mechanism: %s" % ("ok" if not failures else "%d failures" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
