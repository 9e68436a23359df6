#!/usr/bin/env python3
"""The README's demo builds only what it runs (issue 24 point 2).

scripts/demo.sh builds the `demo` target. This test configures a scratch build tree (nothing is
compiled) and reads CMake's code model (the file API) for `demo` and every target it depends on:
  - the target exists;
  - every program and library the demo runs is built by it: simnic, simnicd, the shim, and each
    build/bin/NAME scripts/demo.sh names (simnic-viz only when this machine can build it);
  - no test suite is compiled: the only source from tests/ is tests/programs/verbs_check.cc;
  - scripts/demo.sh builds with `--target demo`, not the whole tree.

  demo_targets_test.py SOURCE_DIR      exit 0 pass, 1 fail
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def configure(src, build):
    """Configures BUILD with a CMake file-API query for the code model; returns cmake's output."""
    query = os.path.join(build, ".cmake", "api", "v1", "query")
    os.makedirs(query)
    open(os.path.join(query, "codemodel-v2"), "w").close()
    return subprocess.run(["cmake", "-S", src, "-B", build], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=120, check=True).stdout


def load_targets(build):
    """{target name: its code-model JSON}, from the file API's reply."""
    reply = os.path.join(build, ".cmake", "api", "v1", "reply")
    index = json.load(open(os.path.join(reply, sorted(f for f in os.listdir(reply) if f.startswith("index-"))[-1])))
    model = json.load(open(os.path.join(reply, index["reply"]["codemodel-v2"]["jsonFile"])))
    targets = {}
    for t in model["configurations"][0]["targets"]:
        targets[t["name"]] = json.load(open(os.path.join(reply, t["jsonFile"])))
    return targets


def closure(targets, name):
    """NAME and every target building NAME builds first."""
    by_id = {t["id"]: n for n, t in targets.items()}
    seen, todo = set(), [name]
    while todo:
        n = todo.pop()
        if n in seen or n not in targets:
            continue
        seen.add(n)
        todo += [by_id[d["id"]] for d in targets[n].get("dependencies", [])]
    return seen


def demo_programs(src):
    text = open(os.path.join(src, "scripts", "demo.sh")).read()
    return set(re.findall(r"build/bin/([\w.-]+)", text)), text


def main():
    src = os.path.realpath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../.."))
    build = tempfile.mkdtemp(prefix="simnic-demo-targets.")
    failures = []

    def check(name, ok, detail=""):
        print(("PASS " if ok else "FAIL ") + name + ("" if ok else ("\n  " + detail if detail else "")))
        if not ok:
            failures.append(name)

    try:
        log = configure(src, build)
        targets = load_targets(build)
        check("the demo target exists", "demo" in targets)
        built = closure(targets, "demo")
        artifacts = {os.path.basename(a["path"]) for n in built for a in targets[n].get("artifacts", [])}
        programs, script = demo_programs(src)
        # The shim and librdmacm as the code model names them (lib/libibverbs.so: SONAME .so.1).
        wanted = {"simnic", "simnicd", "libibverbs.so", "librdmacm.so"} | programs
        if "simnic-viz" not in targets and "simnic-viz not built" in log:
            wanted.discard("simnic-viz")  # this machine lacks ImGui/GLFW; the demo says so
        check("the demo target builds everything the demo runs", wanted <= artifacts,
              "missing: %s" % sorted(wanted - artifacts))
        sources = {os.path.normpath(s["path"]) for n in built for s in targets[n].get("sources", [])}
        from_tests = {s for s in sources if s.startswith("tests" + os.sep)}
        check("no test suite is compiled (from tests/ only tests/programs/verbs_check.cc)",
              from_tests <= {os.path.join("tests", "programs", "verbs_check.cc")},
              "compiled from tests/: %s" % sorted(from_tests)[:10])
        check("scripts/demo.sh builds --target demo", re.search(r"cmake --build build\b.*--target demo", script)
              is not None and "scripts/build.sh" not in script)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
