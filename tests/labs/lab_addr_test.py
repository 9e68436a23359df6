#!/usr/bin/env python3
"""CI for the graders' NIC addresses (ctest label "labs"): a taken address, or another grader
on the same address block at the same time, must never turn into a FAIL.

Each case runs lab 3's grader on its solution with the grader's first address block forced
(simnic_lab._first_block) to block K:
  1. someone else holds K's second NIC address (a UDP socket on 127.A.B.2:4791, as another
     user's NIC would): the grader starts its NICs again elsewhere and passes;
  2. two graders start at the same moment on the same block K: both pass (the per-user lock
     gives the second one another block);
  3. the lock alone: while this test holds K's lock, a grader does not use block K.

    lab_addr_test.py --simnic build/bin/simnic --labs labs
"""
import argparse
import fcntl
import os
import random
import re
import socket
import subprocess
import sys

LAB = "03-one-sided"

# Runs a grader with its first address block forced: argv = block, grader, grader args...
WRAPPER = r"""
import os, runpy, sys
block = int(sys.argv[1])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(sys.argv[2])), "..", "common"))
import simnic_lab
simnic_lab._first_block = lambda: block
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def block_addr(k, nic):
    return "127.%d.%d.%d" % (216 + k % 38, k // 38 + 1, 1 + nic)


def start_grader(labs, simnic, block, trace_out):
    grader = os.path.join(labs, LAB, "grader.py")
    return subprocess.Popen([sys.executable, "-c", WRAPPER, str(block), grader, "--solution", "--simnic", simnic,
                             "--trace-out", trace_out],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def finish(p, what, failures):
    try:
        out = p.communicate(timeout=120)[0].decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        p.kill()
        out = p.communicate()[0].decode("utf-8", "replace") + "\n(timed out)"
    print("== %s (exit %d)\n%s" % (what, p.returncode, out))
    if p.returncode != 0 or "FAIL" in out or not re.search(r"^\d+ passed, 0 failed", out, re.M):
        failures.append("%s: the solution did not pass (exit %d)" % (what, p.returncode))
    return out


def nic_addresses(trace_dir):
    """The addresses the grader's NICs had (their nic_up events)."""
    addrs = set()
    for name in os.listdir(trace_dir) if os.path.isdir(trace_dir) else []:
        with open(os.path.join(trace_dir, name), errors="replace") as f:
            addrs.update(re.findall(r'"kind":\s*"nic_up".*?"addr":\s*"([0-9.]+)"', f.read()))
    return addrs


def lock_dir():
    """Where the graders keep their block locks, if they made it (the test does not make it)."""
    run = os.environ.get("XDG_RUNTIME_DIR")
    for d in ([os.path.join(run, "simnic-lab-addr")] if run else []) + ["/tmp/simnic-lab-addr-%d" % os.getuid()]:
        if os.path.isdir(d) and os.stat(d).st_uid == os.getuid():
            return d
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--simnic", required=True)
    ap.add_argument("--labs", required=True)
    a = ap.parse_args()
    simnic, labs = os.path.abspath(a.simnic), os.path.abspath(a.labs)
    failures = []
    work = "/tmp/simnic-addr-test-%d" % os.getpid()
    os.makedirs(work)
    k = random.randrange(1000, 9000)

    # 1. Another holder of the block's second address.
    squatter = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        squatter.bind((block_addr(k, 1), 4791))
    except OSError as e:
        print("SKIP case 1: cannot bind %s:4791 (%s)" % (block_addr(k, 1), e))
        squatter.close()
        squatter = None
    if squatter:
        out = finish(start_grader(labs, simnic, k, work + "/t1"), "address %s taken" % block_addr(k, 1), failures)
        if block_addr(k, 1) in nic_addresses(work + "/t1"):
            failures.append("case 1: a NIC claims the taken address %s" % block_addr(k, 1))
        squatter.close()

    # 2. Two graders on the same block at once.
    k2 = (k + 100) % 9500
    ps = [start_grader(labs, simnic, k2, work + "/t2-%d" % i) for i in range(2)]
    for i, p in enumerate(ps):
        finish(p, "concurrent grader %d on block %d" % (i, k2), failures)
    a0, a1 = nic_addresses(work + "/t2-0"), nic_addresses(work + "/t2-1")
    if not a0 or not a1 or a0 & a1:
        failures.append("case 2: the concurrent graders' NIC addresses overlap or are unknown: %s, %s" % (a0, a1))

    # 3. A block whose lock is held is not used.
    d = lock_dir()
    if d is None:
        print("SKIP case 3: no per-user lock folder (the graders did not make one)")
        failures.append("the graders made no per-user address lock folder")
    else:
        k3 = (k + 200) % 9500
        fd = os.open(os.path.join(d, block_addr(k3, 0) + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        finish(start_grader(labs, simnic, k3, work + "/t3"), "block %d locked" % k3, failures)
        used = nic_addresses(work + "/t3")
        if not used or block_addr(k3, 0) in used:
            failures.append("case 3: the grader used the locked block %d (%s)" % (k3, used))
        os.close(fd)

    subprocess.run(["rm", "-rf", work])
    for f in failures:
        print("TEST FAILURE: " + f)
    print("lab_addr_test: %s" % ("ok" if not failures else "%d failures" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
