#!/usr/bin/env python3
"""Sealed solutions (issue 24, point 1; ctest label "labs"): from `cmake --install` into a
temporary prefix, an unprivileged user (nobody) runs the labs but cannot read their solutions.

As nobody: `cat` of every installed solution/broken/teacher file fails; a reference peer in
lib/simnic/labs/NN-topic/ref/ cannot be read but runs; `simnic lab start 3` + `simnic lab check 3`
of the untouched starter grade to the end against the installed reference peers (the solution
is unreadable, so a grader that built it would break); `simnic lab check 2 --solution` answers
that the solutions are sealed. As root (a teacher): `simnic lab check 3 --solution` passes.

    seal_test.py --build BUILD_DIR --labs labs

Needs root (to install, and to become nobody with runuser); otherwise it is skipped (exit 77).
"""
import argparse
import os
import shutil
import stat
import subprocess
import sys
import tempfile

SKIP = 77
SEALED_PARTS = ("solution", "broken", "teacher")
SEALED_MESSAGE = "the solutions are sealed: only teachers (group simnic-teachers) can"


class Failures(list):
    def expect(self, ok, what):
        print(("ok    " if ok else "FAIL  ") + what, flush=True)
        if not ok:
            self.append(what)


def run(argv, cwd=None, env=None, timeout=60, user=None):
    """Runs argv (as `user` through runuser, with a clean environment); (rc, output)."""
    if user:
        argv = ["runuser", "-u", user, "--", "env", "-i"] + ["%s=%s" % kv for kv in sorted(env.items())] + argv
    try:
        p = subprocess.run(argv, cwd=cwd, env=env if not user else None, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        rc, out = p.returncode, p.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        rc, out = -1, (e.output or b"").decode("utf-8", "replace") + "\n(timed out)"
    shown = out if len(out) < 4000 else out[:1500] + "\n...\n" + out[-2500:]
    print("$ %s%s  (exit %d)\n%s" % ("[%s] " % user if user else "", " ".join(argv[-6:]), rc, shown), flush=True)
    return rc, out


def skip_reason():
    if os.geteuid() != 0:
        return "needs root (to install and to run as nobody with runuser)"
    if not shutil.which("runuser"):
        return "runuser is not installed"
    try:
        import pwd
        pwd.getpwnam("nobody")
    except KeyError:
        return "there is no user nobody"
    if not os.path.exists("/usr/bin/python3"):
        return "nobody needs /usr/bin/python3 to run the graders"
    return None


def install(build, prefix):
    rc, out = run(["cmake", "--install", build, "--prefix", prefix], timeout=300)
    if rc != 0:
        raise SystemExit("cmake --install failed (build every target first)")


def sealed_files(labs_src):
    """(lab, part, relative path) of every file the source tree seals."""
    out = []
    for lab in sorted(os.listdir(labs_src)):
        for part in SEALED_PARTS:
            top = os.path.join(labs_src, lab, part)
            for d, _, files in os.walk(top):
                out += [(lab, part, os.path.relpath(os.path.join(d, f), top)) for f in files
                        if "__pycache__" not in d]
    return out


def check_layout(f, prefix, labs_src):
    student = os.path.join(prefix, "share", "simnic", "labs")
    teacher = os.path.join(prefix, "share", "simnic", "teacher")
    leaked = [os.path.join(l, p) for l in os.listdir(student) for p in SEALED_PARTS
              if os.path.exists(os.path.join(student, l, p))]
    f.expect(not leaked, "share/simnic/labs holds no solution/, broken/ or teacher/ (found: %s)" % leaked)
    f.expect(os.path.isfile(os.path.join(student, "03-one-sided", "starter", "server.c")),
             "the students' starter is installed in share/simnic/labs")
    bad = []
    for d, dirs, files in os.walk(teacher):
        bad += [p for p in [d] if stat.S_IMODE(os.stat(p).st_mode) != 0o700]
        bad += [os.path.join(d, x) for x in files if stat.S_IMODE(os.stat(os.path.join(d, x)).st_mode) != 0o600]
    f.expect(not bad, "every sealed folder is 0700 and every sealed file 0600 (wrong: %s)" % bad[:5])
    missing = [os.path.join(l, p, r) for l, p, r in sealed_files(labs_src)
               if not os.path.isfile(os.path.join(teacher, "labs", l, p, r))]
    f.expect(not missing, "every solution/broken/teacher file is in share/simnic/teacher (missing: %s)" % missing[:5])


def reference_peers(prefix):
    root = os.path.join(prefix, "lib", "simnic", "labs")
    return [os.path.join(root, l, "ref", p) for l in sorted(os.listdir(root))
            for p in sorted(os.listdir(os.path.join(root, l, "ref")))] if os.path.isdir(root) else []


def read_bytes(path):
    with open(path, "rb") as fh:
        return fh.read()


def secret_contents(labs_src):
    """The bytes of every sealed file that is not also public (a starter may ship a header
    unchanged from the solution)."""
    public = set()
    for lab in os.listdir(labs_src):
        for d, _, files in os.walk(os.path.join(labs_src, lab, "starter")):
            public.update(read_bytes(os.path.join(d, x)) for x in files)
    out = set()
    for lab, part, rel in sealed_files(labs_src):
        data = read_bytes(os.path.join(labs_src, lab, part, rel))
        if data not in public:
            out.add(data)
    return out


def nobody_can_cat(path):
    return subprocess.run(["runuser", "-u", "nobody", "--", "cat", path], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=10).returncode == 0


def check_as_nobody(f, prefix, labs_src, env):
    teacher = os.path.join(prefix, "share", "simnic", "teacher", "labs")
    sealed = [os.path.join(teacher, lab, part, rel) for lab, part, rel in sealed_files(labs_src)]
    readable = [p for p in sealed if nobody_can_cat(p)]
    f.expect(len(sealed) > 0 and not readable,
             "nobody cannot cat any of the %d sealed files (readable: %s)" % (len(sealed), readable[:5]))
    # Wherever the install put a copy of a solution's file, nobody cannot read it.
    secrets = secret_contents(labs_src)
    copies = [os.path.join(d, x) for d, _, files in os.walk(prefix) for x in files
              if read_bytes(os.path.join(d, x)) in secrets]
    leaked = [p for p in copies if nobody_can_cat(p)]
    f.expect(copies and not leaked, "nobody can read no copy of a solution's file anywhere in the install "
             "(%d copies; readable: %s)" % (len(copies), [os.path.relpath(p, prefix) for p in leaked[:5]]))

    peers = reference_peers(prefix)
    f.expect(len(peers) >= 9, "the reference peers of labs 2, 3, 4, 6 and 9 are installed (%d)" % len(peers))
    f.expect(all(stat.S_IMODE(os.stat(p).st_mode) == 0o711 for p in peers), "every reference peer is mode 0711")
    for p in peers:
        rc, _ = run(["cat", p], env=env, user="nobody", timeout=10)
        f.expect(rc != 0, "nobody cannot read %s" % os.path.relpath(p, prefix))
    server = os.path.join(prefix, "lib", "simnic", "labs", "03-one-sided", "ref", "server")
    rc, out = run([server, "-h"], env=env, user="nobody", timeout=10)
    f.expect(rc not in (126, 127) and "usage:" in out, "nobody can run the reference server (it prints its usage)")


def check_student_run(f, prefix, env, home):
    simnic = os.path.join(prefix, "bin", "simnic")
    rc, out = run([simnic, "lab", "start", "3"], cwd=home, env=env, user="nobody")
    f.expect(rc == 0 and os.path.isfile(os.path.join(home, "lab03", "server.c")), "nobody: simnic lab start 3")
    rc, out = run([simnic, "lab", "check", "3"], cwd=home, env=env, user="nobody", timeout=300)
    f.expect(rc == 1, "nobody: the untouched starter is graded and fails (exit 1, not 2: the grader did not break)")
    f.expect("grader error" not in out and "passed, " in out, "nobody: the grading runs to its summary line")
    f.expect("your client works with the reference server" in out,
             "nobody: the starter ran against the installed reference peers")
    rc, out = run([simnic, "lab", "check", "2", "--solution"], cwd=home, env=env, user="nobody")
    f.expect(rc != 0 and SEALED_MESSAGE in out, "nobody: simnic lab check 2 --solution says the solutions are sealed")
    rc, out = run([simnic, "lab", "check", "3", "--broken"], cwd=home, env=env, user="nobody")
    f.expect(rc != 0 and SEALED_MESSAGE in out, "nobody: simnic lab check 3 --broken says the solutions are sealed")


def check_correct_student(f, prefix, labs_src, env, home, lab):
    """A student whose lab is right (the solution's files, copied in by root) passes every
    check as nobody: the labs work from the install for a second user, and the execute-only
    reference peers work on simnic, not only start."""
    number = int(lab[:2])
    work = os.path.join(home, "done-" + lab)
    shutil.copytree(os.path.join(prefix, "share", "simnic", "labs", lab, "starter"), work)
    shutil.copytree(os.path.join(labs_src, lab, "solution"), work, dirs_exist_ok=True)
    for d, _, files in os.walk(work):
        for x in [d] + [os.path.join(d, y) for y in files]:
            shutil.chown(x, "nobody")
    rc, out = run([os.path.join(prefix, "bin", "simnic"), "lab", "check", str(number), work], cwd=home, env=env,
                  user="nobody", timeout=300)
    with_refs = number != 3 or ("PASS your client works with the reference server" in out
                                and "PASS your server works with the reference client" in out)
    f.expect(rc == 0 and " 0 failed" in out and with_refs,
             "nobody: a correct lab %d passes every check from the install" % number)


def check_teacher_run(f, prefix, env, home):
    rc, out = run([os.path.join(prefix, "bin", "simnic"), "lab", "check", "3", "--solution"], cwd=home,
                  env=env, timeout=300)
    f.expect(rc == 0 and SEALED_MESSAGE not in out, "root (a teacher): simnic lab check 3 --solution passes")


def clean_env(prefix, home):
    return {"PATH": os.path.join(prefix, "bin") + ":/usr/local/bin:/usr/bin:/bin", "HOME": home,
            "LANG": "C.UTF-8", "TMPDIR": "/tmp"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="the CMake build tree (every target built)")
    ap.add_argument("--labs", required=True, help="the source tree's labs/")
    a = ap.parse_args()
    reason = skip_reason()
    if reason:
        print("SKIP: " + reason)
        return SKIP
    base = tempfile.mkdtemp(prefix="simnic-seal-")
    os.chmod(base, 0o755)  # nobody must traverse the prefix
    prefix, home = os.path.join(base, "prefix"), os.path.join(base, "home")
    os.makedirs(home)
    shutil.chown(home, "nobody")
    f = Failures()
    try:
        install(os.path.abspath(a.build), prefix)
        labs_src = os.path.abspath(a.labs)
        check_layout(f, prefix, labs_src)
        env = clean_env(prefix, home)
        check_as_nobody(f, prefix, labs_src, env)
        check_student_run(f, prefix, env, home)
        for lab in sorted(x for x in os.listdir(labs_src) if os.path.isfile(os.path.join(labs_src, x, "grader.py"))):
            check_correct_student(f, prefix, labs_src, env, home, lab)
        check_teacher_run(f, prefix, dict(env, HOME=base), base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print("\n%d failed" % len(f) + "".join("\n  " + x for x in f))
    return 1 if f else 0


if __name__ == "__main__":
    sys.exit(main())
