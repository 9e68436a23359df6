#!/usr/bin/env python3
"""Hints that point the right way (ctest label "labs", issue 24 point 5).

Grades small, deliberate mistakes (the lab's solution with one thing changed) and checks what
the hints say, not only that the check failed:
  - a failed program's summary keeps its `simnic:` lines even when they are not in the last
    lines, and the run ends with the `--verbose` command;
  - lab 5, a SEND posted while the QP is in RESET: the RNR hints quote simnic's refusal and no
    longer say "connect the sender with rnr_retry = 0";
  - lab 2, a QP created but refused its RESET->INIT: "created but stayed in RESET", with the
    NIC's reason, not "no RC QP created";
  - lab 2's untouched starter: the listen hint shows why the server stopped and no longer
    tells the student to write the listening code (server.c, given, does it).

    hints_test.py --simnic build/bin/simnic --labs labs
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile


def grade(labs, lab, simnic, args, timeout=120):
    argv = [sys.executable, os.path.join(labs, lab, "grader.py"), "--simnic", simnic] + args
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    out = p.stdout.decode("utf-8", "replace")
    print("$ %s  (exit %d)\n%s" % (" ".join(argv), p.returncode, out))
    return p.returncode, out


def hint_of(out, check_prefix):
    """The hint printed under `FAIL <check_prefix>...`, or None when that check did not fail."""
    m = re.search(r"^FAIL %s.*\n  hint: (.*(?:\n  (?!hint:).*)*)" % re.escape(check_prefix), out, re.M)
    return m.group(1) if m else None


def variant(labs, lab, name, file, old, new, tmp):
    """A copy of lab's solution/ with `old` replaced by `new` in `file`."""
    dest = os.path.join(tmp, name)
    shutil.copytree(os.path.join(labs, lab, "solution"), dest)
    path = os.path.join(dest, file)
    with open(path) as f:
        text = f.read()
    if old not in text:
        raise RuntimeError("%s/%s no longer contains %r: update this test" % (lab, file, old))
    with open(path, "w") as f:
        f.write(text.replace(old, new, 1))
    return dest


def test_tail_keeps_simnic_lines(labs, failures):
    sys.path.insert(0, os.path.join(labs, "common"))
    from simnic_lab import Result
    out = "\n".join(["step %d" % i for i in range(5)] + ["simnic: ibv_post_send: EINVAL: QP 0x1: the QP is in RESET"]
                    + ["line %d" % i for i in range(10)])
    tail = Result("prog", 1, out, False).tail(3)
    print("tail: " + tail)
    if "simnic: ibv_post_send: EINVAL" not in tail or "line 9" not in tail or "step 0" in tail:
        failures.append("Result.tail drops the simnic: line before its last lines (or keeps too much): " + tail)


def test_lab5_send_in_reset(labs, simnic, tmp, failures):
    src = variant(labs, "05-errors", "lab5-send-in-reset", "errors_lab.c",
                  "if (qp_connect(b, a, &k_normal) || qp_connect(a, b, &impatient)) return 1;\n",
                  "(void)impatient; /* forgot to connect: the SEND is posted in RESET */\n", tmp)
    rc, out = grade(labs, "05-errors", simnic, ["--src", src])
    if rc != 1:
        failures.append("lab 5 with the SEND posted in RESET should fail (exit 1), got %d" % rc)
    first = hint_of(out, "errors_lab runs every scenario") or ""
    if "simnic: ibv_post_send: EINVAL" not in first:
        failures.append("lab 5: the failed run's summary lacks simnic's ibv_post_send line: " + first)
    for check in ("RNR: a completion with IBV_WC_RNR_RETRY_EXC_ERR", "scenario rnr reports ok"):
        h = hint_of(out, check)
        if h is None:
            failures.append("lab 5: check %r did not fail" % check)
        elif "rnr_retry = 0" in h or "in RESET" not in h:
            failures.append("lab 5: hint of %r should quote the refusal in RESET, not rnr_retry: %s" % (check, h))
    if "simnic lab check 5 %s --verbose" % src not in out:
        failures.append("lab 5: the failed run does not suggest `simnic lab check 5 DIR --verbose`")
    p = subprocess.run([simnic, "lab", "check", "5", src, "--verbose"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=120)
    verbose = p.stdout.decode("utf-8", "replace")
    print("$ simnic lab check 5 %s --verbose  (exit %d)\n%s" % (src, p.returncode, verbose))
    if "missing_attr: INIT->RTR without IBV_QP_DEST_QPN returned" not in verbose:
        failures.append("lab 5: `simnic lab check 5 DIR --verbose` does not show the program's full output")


def test_verbose_shows_every_program(labs, simnic, failures):
    """Lab 6 waits for its registry and service itself: --verbose shows them too."""
    rc, out = grade(labs, "06-ud", simnic, ["--solution", "--verbose"])
    shown = set(re.findall(r"^      ---- (\S+)", out, re.M))
    if not {"registry", "service", "client"} <= shown:
        failures.append("lab 6 --verbose shows only %s of registry, service, client" % sorted(shown))


def test_lab2_qp_stays_in_reset(labs, simnic, tmp, failures):
    src = variant(labs, "02-rc-send-recv", "lab2-no-port", "conn.c",
                  "IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS",
                  "IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS", tmp)
    rc, out = grade(labs, "02-rc-send-recv", simnic, ["--src", src])
    h = hint_of(out, "each QP went RESET -> INIT -> RTR -> RTS") or ""
    if "no RC QP created" in h or "created but stayed in RESET" not in h or "missing IBV_QP_PORT" not in h:
        failures.append("lab 2: a QP refused RESET->INIT should be 'created but stayed in RESET' with the "
                        "NIC's reason: " + h)


def test_lab2_starter_listen_hint(labs, simnic, failures):
    rc, out = grade(labs, "02-rc-send-recv", simnic, ["--starter"])
    h = hint_of(out, "the server listens")
    if h is None:
        print("(the listen check did not fail on the starter: nothing to judge)")
        return
    if "lab_tcp_accept(port) does it" in h or "TODO(lab 2, step 1)" not in h:
        failures.append("lab 2 starter: the listen hint should show why the server stopped (its TODO), "
                        "not ask for listening code: " + h)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--simnic", required=True)
    ap.add_argument("--labs", required=True)
    a = ap.parse_args()
    labs, simnic = os.path.abspath(a.labs), os.path.abspath(a.simnic)
    failures = []
    tmp = tempfile.mkdtemp(prefix="simnic-hints-")
    try:
        test_tail_keeps_simnic_lines(labs, failures)
        test_lab5_send_in_reset(labs, simnic, tmp, failures)
        test_lab2_qp_stays_in_reset(labs, simnic, tmp, failures)
        test_lab2_starter_listen_hint(labs, simnic, failures)
        test_verbose_shows_every_program(labs, simnic, failures)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAILED: " + f)
    print("hints_test: %s" % ("ok" if not failures else "%d failure(s)" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
