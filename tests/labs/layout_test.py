#!/usr/bin/env python3
"""The labs' layout without copies (issue 27): a file starter/ and solution/ share lives once
(labs/common/ or the lab's common/, named by shared_files in simnic_lab.py), yet

- `simnic lab start N` gives the student exactly the files it always gave (RECORDED below),
  byte for byte the lab's starter and shared files, and a CMakeLists.txt that stands alone
  (labs/common/lab.cmake's text in place of its include line) and builds;
- the graded builds of starter/ and solution/ see the shared files: both build every program
  from the same source names as the student's copy has;
- the graders use only simnic_lab.py's public names (none starting with `_`).

    layout_test.py --simnic build/bin/simnic --labs labs
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

# What `simnic lab start N` copied before the labs shared their files (recorded from it).
RECORDED = {
    1: "CMakeLists.txt README.md devinfo.c img/viz-devices.png labutil.h",
    2: "CMakeLists.txt README.md client.c conn.c conn.h img/viz-rts.png img/viz-send.png labutil.h message.h "
       "server.c",
    3: "CMakeLists.txt README.md client.c conn.c conn.h img/viz-read.png img/viz-write.png kv.h labutil.h "
       "server.c",
    4: "CMakeLists.txt README.md client.c conn.c conn.h img/viz-atomics.png labutil.h server.c shared.h",
    5: "CMakeLists.txt README.md errors_lab.c img/viz-bad-rkey.png img/viz-rnr.png labutil.h util.c util.h",
    6: "CMakeLists.txt README.md img/viz-ud-request.png labutil.h ud_common.c ud_common.h ud_lab.c",
    7: "CMakeLists.txt README.md img/viz-batched.png labutil.h perf_lab.c plot.py util.c util.h",
    8: "CMakeLists.txt README.md answers.txt img/viz-go-back-n.png labutil.h reliable_lab.c util.c util.h",
    9: "CMakeLists.txt README.md client.c cm.c cm.h labutil.h message.h server.c",
}
MARKER = ".simnic-lab"  # written by lab start for `lab check` inside the folder
TOP_LEVEL_EXTRAS = {"README.md", "img", "plot.py", MARKER}  # a student's, never built

failures = []


def expect(ok, what):
    print("%s %s" % ("ok  " if ok else "FAIL", what), flush=True)
    if not ok:
        failures.append(what)


def files_under(d):
    out = []
    for root, dirs, files in os.walk(d):
        dirs[:] = [x for x in dirs if x != "build"]
        out += [os.path.relpath(os.path.join(root, f), d) for f in files]
    return sorted(out)


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def lab_folder(labs, n):
    return next(os.path.join(labs, d) for d in sorted(os.listdir(labs)) if d.startswith("%02d-" % n))


def programs(lab):
    with open(os.path.join(lab, "CMakeLists.txt")) as f:
        return re.findall(r"^lab_program\((\w+)", f.read(), re.M)


def check_start(simnic, labs, n, work, lab_mod):
    lab = lab_folder(labs, n)
    dest = os.path.join(work, "lab%02d" % n)
    r = subprocess.run([simnic, "lab", "start", str(n), dest], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       env=dict(os.environ, SIMNIC_LABS_DIR=labs), timeout=30)
    expect(r.returncode == 0, "lab %d: simnic lab start exits 0" % n)
    got = [f for f in files_under(dest) if f != MARKER]
    expect(got == RECORDED[n].split(), "lab %d: the student gets the recorded files (got %s)" % (n, " ".join(got)))
    sources = dict(lab_mod.shared_files(lab))
    sources.update({f: os.path.join(lab, "starter", f) for f in os.listdir(os.path.join(lab, "starter"))})
    differ = [f for f, path in sources.items() if not same_bytes(path, os.path.join(dest, f))]
    expect(not differ, "lab %d: starter and shared files copied byte for byte (differ: %s)" % (n, differ))
    with open(os.path.join(dest, "CMakeLists.txt")) as f:
        text = f.read()
    expect(lab_mod.LAB_CMAKE_INCLUDE not in text and "function(lab_program" in text,
           "lab %d: the student's CMakeLists.txt has lab.cmake's text, not its include" % n)
    build = os.path.join(dest, "build")
    ok = all(subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=240).returncode == 0
             for cmd in (["cmake", "-S", dest, "-B", build], ["cmake", "--build", build, "-j2"]))
    expect(ok and all(os.access(os.path.join(build, p), os.X_OK) for p in programs(lab)),
           "lab %d: the student's copy builds %s on its own" % (n, ", ".join(programs(lab))))
    return set(got) - TOP_LEVEL_EXTRAS - {f for f in got if "/" in f}


def check_graded_build(simnic, labs, n, which, student_sources, lab_mod):
    """Builds starter/ or solution/ as the grader does; the sources it assembled must be the
    student's source names (one set of files, wherever the lab keeps them)."""
    lab = lab_folder(labs, n)
    g = lab_mod.Lab(os.path.join(lab, "grader.py"), "layout", argv=["--" + which, "--simnic", simnic])
    try:
        g.build(programs(lab))
        built = g.failed == 0
    except lab_mod.LabAbort:
        built = False
    assembled = set(os.listdir(os.path.join(g.tmp, "src")))
    g._cleanup()
    expect(built, "lab %d: %s/ builds with the lab's shared files" % (n, which))
    expect(assembled == student_sources, "lab %d: %s/ is built from the student's source names (%s)"
           % (n, which, " ".join(sorted(assembled ^ student_sources)) or "same"))


def check_public_helpers(labs):
    private = re.compile(r"\b(lab|simnic_lab|mc|more_checks)\._\w+")
    for path in sorted(os.path.join(labs, d, "grader.py") for d in os.listdir(labs)
                       if os.path.isfile(os.path.join(labs, d, "grader.py"))):
        with open(path) as f:
            used = sorted(set(m.group(0) for m in private.finditer(f.read())))
        expect(not used, "%s uses only public helpers (private: %s)" % (os.path.relpath(path, labs), used))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--simnic", required=True)
    ap.add_argument("--labs", required=True)
    a = ap.parse_args()
    labs, simnic = os.path.abspath(a.labs), os.path.abspath(a.simnic)
    sys.path.insert(0, os.path.join(labs, "common"))
    import simnic_lab as lab_mod
    check_public_helpers(labs)
    work = tempfile.mkdtemp(prefix="simnic-layout-test-")
    try:
        for n in sorted(RECORDED):
            student_sources = check_start(simnic, labs, n, work, lab_mod)
            for which in ("starter", "solution"):
                check_graded_build(simnic, labs, n, which, student_sources, lab_mod)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
