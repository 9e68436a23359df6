"""simnic_lab: what every lab's grader.py stands on (Python 3, standard library only).

A grader builds the student's programs, starts private simulated NICs, runs the programs on
them, stops the NICs, and then judges what really happened from the NICs' trace (the JSON
lines described in docs/trace-format.md), not only from what the programs printed.

Command line of every grader (what `simnic lab check` runs):

    python3 labs/NN-topic/grader.py (--src DIR | --solution | --starter | --broken NAME)
                                    [--device NAME] [--gid-index N] [--simnic PATH]
                                    [--trace-out DIR] [--keep] [--verbose] [--results FILE]

  --src DIR        the student's folder (what `simnic lab start` made); its files are copied
                   to a private temporary folder and built there; a missing CMakeLists.txt,
                   labutil.h or other file the lab shares (shared_files) is taken from the
                   lab. The NICs' trace is saved to DIR/trace/ (unless --feedback-dir).
  --solution       grade the lab's solution/ (what CI does; must pass)
  --starter        grade the lab's starter/ (CI: must compile and fail with hints)
                   (both with the lab's shared files: labutil.h, the labs/common/ files its
                   shared.txt names, its common/ folder; see shared_files)
  --broken NAME    grade a copy of solution/ with broken/NAME/ copied over it, or with the
                   unified diff broken/NAME.patch applied to it (patch -p1) (CI: must fail)
  --device NAME    a real RDMA NIC: programs run directly on NAME (no simnic, no trace);
                   checks that need the trace are reported as SKIP
  --gid-index N    GID index to use with --device (default 0)
  --simnic PATH    the `simnic` binary (default: $SIMNIC, then PATH, then build/bin/simnic)
  --trace-out DIR  also copy the NICs' traces to DIR (for simnic-viz screenshots)
  --feedback-dir DIR  write the trace (DIR/trace/), the build log (DIR/build.log) and the
                   programs' output (DIR/logs/) here, and nothing into --src DIR (what
                   `simnic lab grade` uses: a submission stays byte-identical)
  --keep           keep the private temporary folder (build, logs, traces) and print it
  --verbose        print the programs' output
  --results FILE   also write the outcome as JSON: {"checks": [{"name", "status", "weight",
                   "core", "hint"}...], "score": P, "total": T}

Output: one line per check, `PASS name`, `FAIL name` followed by `  hint: ...`, or
`SKIP name (needs simnic's trace)`, then `N passed, M failed[, K skipped]; score P/T`. Exit
status 0 only when nothing failed; 2 when the grader itself broke.

Scores: every check carries a weight (weight=, default 1) and may be a core check (core=True:
what the lab teaches; CI requires the starter and the does-nothing/hangs variants to fail
every core check). P is the sum of the weights of the checks that passed, T the lab's total,
declared by the grader (Lab(..., points=T)). A full run whose weights do not add up to T is a
grader bug (exit 2). A grading that stops early (a failed build, a failed lab.require) keeps
the points already earned; one that breaks or is interrupted scores 0/T. Name the checks so
that they say what happened, and let a check pass only on evidence that it happened: an
"absence" check (no error, no SEND) also requires the operation it guards to have run.
A failed run then names the command that shows the programs' full output (`simnic lab
check N ... --verbose`), and a hint quoting a program (Result.tail) always keeps its `simnic:`
lines, simnic's explanation of what it refused.

A grader looks like this:

    from simnic_lab import Lab
    with Lab(__file__, "Lab 2: RC SEND/RECV", points=10) as lab:
        lab.build(["server", "client"])            # a failed build ends grading (FAIL builds)
        lab.up(2)                                   # simnic0, simnic1 on private addresses
        port = lab.free_port()
        srv = lab.start([lab.bin("server"), "-d", lab.device(0), "-p", port], name="server")
        lab.wait_listen(port)
        cli = lab.run([lab.bin("client"), "-d", lab.device(1), "-p", port, "127.0.0.1"], name="client")
        srv.wait(10)
        lab.down()                                  # stops the NICs and loads lab.trace
        lab.check("client exits 0", cli.rc == 0, "the client failed: " + cli.tail(), weight=2)
        lab.trace_check("RC SEND packets on the wire",
                        lambda: len(lab.trace.packets("rx", opcode="SEND")) > 0,
                        "no SEND reached the server: post one with ibv_post_send", weight=7, core=True)
        # with `builds` (weight 1): 1 + 2 + 7 = points

Programs take the device name with -d and the GID index with -g (lab.device(i),
lab.gid_index), so the same binaries run on simnic (`simnic run`) and on a real NIC.

lab.build_reference(["server", "client"]) returns the paths of the lab's reference peer
programs, to run the student's programs against: in an install, the prebuilt execute-only
peers in <prefix>/lib/simnic/labs/NN-topic/ref/ (students may run them but not read them or
the solution; $SIMNIC_LAB_REF_DIR names another folder of NN-topic/ref/ peers, e.g. the build
tree's build/lib/simnic/labs); in the source tree, the lab's solution/ built apart.
In an install the solution/ and broken/ variants (--solution, --broken) are read from the
sealed <prefix>/share/simnic/teacher/labs/NN-topic/ (teachers only; see sealed_dir). Each
lab.up() starts fresh NICs with a trace of their own; lab.down() loads it into lab.trace
(the first one is the trace saved for the student).
"""

import argparse
import collections
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

COMMON_DIR = os.path.dirname(os.path.abspath(__file__))
LABS_DIR = os.path.dirname(COMMON_DIR)
REPO_DIR = os.path.dirname(LABS_DIR)
SKIP_NAMES = {"build", "trace", ".git", "CMakeCache.txt", "CMakeFiles"}


def _install_prefix():
    """<prefix> when these labs run from an install (<prefix>/share/simnic/labs), else None."""
    share_simnic = os.path.dirname(LABS_DIR)
    if os.path.basename(LABS_DIR) == "labs" and os.path.basename(share_simnic) == "simnic" \
            and os.path.basename(os.path.dirname(share_simnic)) == "share":
        return os.path.dirname(os.path.dirname(share_simnic))
    return None


def sealed_dir(lab_dir):
    """Where a lab's solution/, broken/ and teacher/ are: next to its grader in the source
    tree, in <prefix>/share/simnic/teacher/labs/NN-topic in an install (owner/teachers only)."""
    prefix = _install_prefix()
    if prefix is None or os.path.isdir(os.path.join(lab_dir, "solution")):
        return lab_dir
    return os.path.join(prefix, "share", "simnic", "teacher", "labs", os.path.basename(lab_dir))


def reference_peer_dir(lab_dir):
    """The folder of a lab's prebuilt reference peers ($SIMNIC_LAB_REF_DIR/NN-topic/ref, or
    <prefix>/lib/simnic/labs/NN-topic/ref in an install), or None: build them from solution/."""
    root = os.environ.get("SIMNIC_LAB_REF_DIR")
    if not root and _install_prefix():
        root = os.path.join(_install_prefix(), "lib", "simnic", "labs")
    return os.path.join(root, os.path.basename(lab_dir), "ref") if root else None


LAB_CMAKE_INCLUDE = "include(${CMAKE_CURRENT_LIST_DIR}/../common/lab.cmake)"


def shared_files(lab_dir):
    """The files every copy of a lab gets besides its starter/ or solution/, {name: path}:
    labutil.h, the labs/common/ files named in the lab's shared.txt, and the lab's own common/
    (the files a student does not edit, kept once for starter/ and solution/)."""
    names = ["labutil.h"]
    listed = os.path.join(lab_dir, "shared.txt")
    if os.path.isfile(listed):
        with open(listed) as f:
            names += [l.strip() for l in f if l.strip() and not l.startswith("#")]
    files = {n: os.path.join(COMMON_DIR, n) for n in names}
    own = os.path.join(lab_dir, "common")
    for name in sorted(os.listdir(own)) if os.path.isdir(own) else []:
        files[name] = os.path.join(own, name)
    return files


def lab_cmakelists(lab_dir):
    """The lab's CMakeLists.txt as a student's copy has it: standing alone, with the text of
    labs/common/lab.cmake in place of the line that includes it (what `simnic lab start` writes)."""
    with open(os.path.join(lab_dir, "CMakeLists.txt")) as f:
        text = f.read()
    with open(os.path.join(COMMON_DIR, "lab.cmake")) as f:
        shared = f.read()
    return text.replace(LAB_CMAKE_INCLUDE + "\n", shared)


class LabAbort(Exception):
    """Raised by Lab.require: a check that the rest of the grading cannot do without failed."""


MAX_SIMNIC_LINES = 6  # in one hint: enough for every refused verb of a run, short enough to read


class LabInterrupted(LabAbort):
    """A signal stopped the grading: what it had judged so far is no grade (score 0)."""


class Check:
    """One graded check as it was decided: status is "PASS", "FAIL" or "SKIP"."""

    def __init__(self, name, status, hint, weight, core):
        self.name, self.status, self.hint, self.weight, self.core = name, status, hint, weight, core

    def earned(self):
        return self.weight if self.status == "PASS" else 0

    def as_json(self):
        return {"name": self.name, "status": self.status, "weight": self.weight, "core": self.core,
                "hint": self.hint}


class Result:
    """A finished program: exit status (-1 when killed at its timeout), its output."""

    def __init__(self, name, rc, out, timed_out):
        self.name, self.rc, self.out, self.timed_out = name, rc, out, timed_out

    def ok(self):
        return self.rc == 0

    def simnic_lines(self):
        """simnic's own explanations in the output (`simnic: ...`, e.g. why a verb was refused),
        each once, in order."""
        seen = []
        for line in self.out.splitlines():
            line = line.strip()
            if line.startswith("simnic:") and line not in seen:
                seen.append(line)
        return seen

    def tail(self, lines=6):
        """The last lines of the output, for a hint, after the `simnic:` lines from before them:
        such a line is often the decisive explanation, and a tail alone would drop it."""
        all_lines = self.out.strip().splitlines()
        text = all_lines[-lines:]
        earlier = [l for l in Result(self.name, 0, "\n".join(all_lines[:-lines]), False).simnic_lines()
                   if l not in (t.strip() for t in text)]
        if earlier:
            text = earlier[:MAX_SIMNIC_LINES] + ["..."] + text
        what = "timed out" if self.timed_out else "exit status %d" % self.rc
        return "%s (%s)%s" % (self.name, what, (": " + " | ".join(text)) if text else ", printed nothing")


class Proc:
    """A program running in the background in its own process group, killed by pid."""

    def __init__(self, argv, env, cwd, name, log_path):
        self.name = name
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.popen = subprocess.Popen([str(a) for a in argv], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                      stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        self.result = None

    def output(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def running(self):
        return self.result is None and self.popen.poll() is None

    def wait(self, timeout):
        """Waits up to `timeout` seconds; kills the program on expiry. Returns a Result."""
        if self.result is not None:
            return self.result
        timed_out = False
        try:
            rc = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            rc, timed_out = -1, True
        if rc < 0 and not timed_out:
            rc = 128 - rc  # killed by a signal: shell convention
        self._log.close()
        self.result = Result(self.name, rc, self.output(), timed_out)
        return self.result

    def kill(self):
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)  # its group: what it started too
            except ProcessLookupError:
                pass
            self.popen.wait()


class Trace:
    """Every event the NICs recorded, with small queries. Events are dicts (docs/trace-format.md)."""

    def __init__(self, events_by_nic):
        self.by_nic = events_by_nic
        self.all = [e for nic in sorted(events_by_nic) for e in events_by_nic[nic]]

    @staticmethod
    def load(trace_dir):
        by_nic = {}
        for name in sorted(os.listdir(trace_dir)) if os.path.isdir(trace_dir) else []:
            if not name.endswith(".jsonl"):
                continue
            events = []
            with open(os.path.join(trace_dir, name), encoding="utf-8", errors="replace") as f:
                for line in f:
                    try:
                        events.append(json.loads(line))
                    except ValueError:
                        pass  # a line cut short when a NIC was killed
            by_nic[name[:-len(".jsonl")]] = events
        return Trace(by_nic)

    def nics(self):
        return sorted(self.by_nic)

    def events(self, kind=None, nic=None, **fields):
        """Events of `kind` (a name or a set of names) on `nic`, whose fields equal `fields`."""
        kinds = {kind} if isinstance(kind, str) else kind
        src = self.by_nic.get(nic, []) if nic else self.all
        return [e for e in src if (kinds is None or e.get("kind") in kinds)
                and all(e.get(k) == v for k, v in fields.items())]

    def packets(self, direction=None, nic=None, opcode=None, **fields):
        """pkt_tx/pkt_rx events ("tx", "rx" or None for both). `opcode` matches the opcode
        name's text (e.g. "SEND" matches RC_SEND_FIRST, "RDMA_READ_REQUEST", "FETCH_ADD"),
        or is a compiled regular expression."""
        kinds = {"tx": {"pkt_tx"}, "rx": {"pkt_rx"}, None: {"pkt_tx", "pkt_rx"}}[direction]
        out = []
        for e in self.events(kinds, nic, **fields):
            name = e.get("opcode", "")
            if opcode is None or (opcode.search(name) if hasattr(opcode, "search") else opcode in name):
                out.append(e)
        return out

    def opcode_counts(self, direction="tx", nic=None):
        return collections.Counter(e.get("opcode") for e in self.packets(direction, nic))

    def qps(self, nic=None, type=None):
        """(nic, qpn) of every QP created."""
        return [(e["nic"], e["qp"]) for e in self.events("qp_create", nic)
                if type is None or e.get("type") == type]

    def qp_transitions(self, nic, qp):
        """The qp_state events of one QP, in order."""
        return self.events("qp_state", nic, qp=qp)

    def qp_states(self, nic, qp):
        """The states one QP went through, e.g. ["RESET", "INIT", "RTR", "RTS"]."""
        trs = self.qp_transitions(nic, qp)
        if not trs:
            return []
        states = [trs[0].get("from")]
        for t in trs:
            states.append(t.get("to"))
        return states

    def cqes(self, nic=None, status=None, opcode=None, **fields):
        out = self.events("cqe", nic, **fields)
        if status is not None:
            out = [e for e in out if e.get("status") == status]
        if opcode is not None:
            out = [e for e in out if e.get("opcode") == opcode]
        return out

    def error_cqes(self, nic=None):
        return [e for e in self.events("cqe", nic) if e.get("status_num", 0) != 0]

    def error_naks(self, nic=None):
        """NAKs that mean a mistake (bad rkey, invalid request, RNR...): all but PSN sequence
        NAKs, which are how RC recovers a lost or reordered packet."""
        return [n for n in self.events("nak", nic) if n.get("code") != "PSN_SEQ_ERR"]

    def error_lines(self, most=2):
        """The first `most` error NAKs ("CODE: rule") and error completions ("NIC completed with
        STATUS"), for a hint that says what went wrong."""
        return (["%s: %s" % (n.get("code"), n.get("rule")) for n in self.error_naks()][:most] +
                ["%s completed with %s" % (e["nic"], e.get("status")) for e in self.error_cqes()][:most])

    def wqes(self, nic=None, queue=None, opcode=None, **fields):
        out = self.events("wqe_posted", nic, **fields)
        return [e for e in out if (queue is None or e.get("queue") == queue)
                and (opcode is None or e.get("opcode") == opcode)]

    def doorbells(self, nic=None):
        return len(self.events("doorbell", nic))

    def mrs(self, nic=None):
        return self.events("mr_create", nic)

    def mr_with_rkey(self, rkey, nic=None):
        for m in self.mrs(nic):
            if m.get("rkey") == rkey:
                return m
        return None

    def first_psn(self, nic, qp):
        """The PSN of the first request packet a QP sent (its sq_psn), or None."""
        for p in self.packets("tx", nic, qp=qp):
            if "ACKNOWLEDGE" not in p.get("opcode", "") and "RESPONSE" not in p.get("opcode", ""):
                return p.get("psn")
        return None

    def qp_walk(self, nic, type="RC"):
        """How the first `type` QP of `nic` walked, for a hint: "RESET -> INIT -> ...", or
        why it went nowhere: no such QP, or created but never moved (with the NIC's reason when
        it refused a modify)."""
        qps = self.qps(nic, type)
        if not qps:
            return "nowhere (no %s QP created)" % type
        states = self.qp_states(nic, qps[0][1])
        if states:
            return " -> ".join(states)
        refused = [e.get("rule", "") for e in self.events("error", nic, qp=qps[0][1]) if e.get("status") == "EINVAL"]
        return "nowhere: QP 0x%x was created but stayed in RESET (%s)" % (
            qps[0][1], "the NIC refused ibv_modify_qp: " + refused[0] if refused else "no ibv_modify_qp reached the NIC")

    def nic_of_addr(self, addr):
        for e in self.events("nic_up"):
            if e.get("addr") == addr:
                return e["nic"]
        return None


def _hint_text(hint):
    return hint() if callable(hint) else hint


# The graders' private NIC addresses come in blocks 127.A.B.1.. with A in [216, 254) and
# B in [1, 250]: the integration tests use A in [16, 216) and users 127.0.0.x, so a grading run
# never shares an address (a UDP port 4791) with them. A grader leases a block no other grader
# of the same user holds (a lock file per block, see _lease_block) and, should someone else
# hold one of its addresses all the same, starts its NICs again on the next block.
ADDR_BLOCKS = 38 * 250
UP_ATTEMPTS = 12


def _block_base(i):
    """The first address of block i."""
    i %= ADDR_BLOCKS
    return "127.%d.%d.1" % (216 + i % 38, i // 38 + 1)


def _first_block():
    # Concurrent graders start their search far apart; the lock settles any tie.
    return os.getpid() % ADDR_BLOCKS


def _lock_dir():
    """A folder only this user can write, for the block locks: $XDG_RUNTIME_DIR/simnic-lab-addr,
    else /tmp/simnic-lab-addr-UID (checked to be ours: another user could have made it first).
    None when neither works; the graders then rely on starting their NICs again alone."""
    dirs = [os.path.join(os.environ["XDG_RUNTIME_DIR"], "simnic-lab-addr")] if os.environ.get("XDG_RUNTIME_DIR") else []
    dirs.append(os.path.join(tempfile.gettempdir(), "simnic-lab-addr-%d" % os.getuid()))
    for d in dirs:
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
            st = os.lstat(d)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022:
                return d
        except OSError:
            pass
    return None


def _lease_block(start, tries=ADDR_BLOCKS):
    """The first block from `start` on that no other grader of ours holds: (block, lock fd or
    None). The lock is an flock, so a grader that dies, however it dies, frees its block."""
    d = _lock_dir()
    if d is None:
        return start % ADDR_BLOCKS, None
    for i in range(start, start + tries):
        path = os.path.join(d, _block_base(i) + ".lock")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return start % ADDR_BLOCKS, None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return i % ADDR_BLOCKS, fd
        except OSError:
            os.close(fd)
    return start % ADDR_BLOCKS, None


def _address_taken(up_output):
    return "Address already in use" in up_output or "already uses this address" in up_output


class Lab:
    """One grading run: arguments, a private folder, NICs, programs, trace, checks."""

    def __init__(self, grader_file, title, argv=None, points=None):
        self.lab_dir = os.path.dirname(os.path.abspath(grader_file))
        self.title = title
        self.points = points  # the lab's total T; None: the sum of the weights checked
        self.args = self._parse(argv)
        self.device_mode = bool(self.args.device)
        self.gid_index = str(self.args.gid_index)
        self.passed = self.failed = self.skipped = 0
        self.results = []  # Check, in the order decided
        self.tmp = tempfile.mkdtemp(prefix="simnic-lab-")
        self.simnic_dir = os.path.join(self.tmp, "nics")
        self.trace_dir = os.path.join(self.tmp, "trace")
        self.build_dir = os.path.join(self.tmp, "build")
        self.procs = []
        self.nic_count = 0
        self.nic_pids = []
        self.session = 0  # how many times up() started NICs
        self.trace = Trace({})
        self.addr_block, self._addr_lock = _lease_block(_first_block())
        self.base_addr = _block_base(self.addr_block)
        self.simnic = self._find_simnic()
        self.exit_code = None
        self.notes_at_end = []  # printed after the summary line

    # ---- arguments and sources ---------------------------------------------------------

    def _parse(self, argv):
        p = argparse.ArgumentParser(description="Grades one simnic lab (see labs/common/simnic_lab.py).")
        which = p.add_mutually_exclusive_group(required=True)
        which.add_argument("--src", help="the student's folder")
        which.add_argument("--solution", action="store_true", help="grade the lab's solution/")
        which.add_argument("--starter", action="store_true", help="grade the lab's starter/")
        which.add_argument("--broken", metavar="NAME", help="grade solution/ with broken/NAME/ over it")
        p.add_argument("--device", help="a real RDMA device: run without simnic, skip trace checks")
        p.add_argument("--gid-index", type=int, default=0)
        p.add_argument("--simnic", help="path of the simnic binary")
        p.add_argument("--trace-out", help="also copy the NICs' traces here")
        p.add_argument("--feedback-dir", help="write the trace, build log and program logs here, "
                       "nothing into --src DIR (simnic lab grade)")
        p.add_argument("--keep", action="store_true", help="keep the temporary folder")
        p.add_argument("--verbose", action="store_true", help="print the programs' output")
        p.add_argument("--results", metavar="FILE", help="also write the checks and score as JSON")
        return p.parse_args(argv)

    def _find_simnic(self):
        for cand in (self.args.simnic, os.environ.get("SIMNIC"), shutil.which("simnic"),
                     os.path.join(REPO_DIR, "build", "bin", "simnic")):
            if cand and os.access(cand, os.X_OK):
                return os.path.abspath(cand)
        return None

    def source_dirs(self):
        """The folders whose files make the program sources, later ones overriding."""
        a = self.args
        if a.src:
            return [os.path.abspath(a.src)]
        if a.starter:
            return [os.path.join(self.lab_dir, "starter")]
        sealed = sealed_dir(self.lab_dir)
        if sealed != self.lab_dir and not os.access(sealed, os.R_OK | os.X_OK):
            raise LabAbort("the solutions are sealed: only teachers (group simnic-teachers) can grade "
                           "--solution or --broken (%s is not readable for you)" % sealed)
        if a.broken and not self._broken_patch():
            return [os.path.join(sealed, "solution"), os.path.join(sealed, "broken", a.broken)]
        return [os.path.join(sealed, "solution")]

    def _broken_patch(self):
        """broken/NAME.patch when --broken NAME names a patch variant (else None)."""
        if not self.args.broken:
            return None
        path = os.path.join(sealed_dir(self.lab_dir), "broken", self.args.broken + ".patch")
        return path if os.path.isfile(path) else None

    def _apply_broken_patch(self, src):
        """Applies broken/NAME.patch to the copied solution; a patch that does not apply is
        the lab's bug, not a grading outcome."""
        patch = self._broken_patch()
        if not patch:
            return
        r = self.run_tool(["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch",
                             "-d", src, "-i", patch], 30, "patch")
        if r.rc != 0:
            raise RuntimeError("broken/%s does not apply to solution/: %s" % (os.path.basename(patch), r.out))

    def what(self):
        a = self.args
        if a.src:
            return a.src
        return "starter" if a.starter else ("broken/" + a.broken if a.broken else "solution")

    def _assemble_sources(self, dest, dirs=None):
        """The sources to build, in one flat folder: the lab's shared files (shared_files), then
        the files of `dirs` (default source_dirs()) over them. A student's folder (--src) has
        its own copies; the lab's fill in only what it lacks."""
        os.makedirs(dest)
        for d in dirs or self.source_dirs():
            if not os.path.isdir(d):
                raise LabAbort("no such folder: %s" % d)
            for name in os.listdir(d):
                if name in SKIP_NAMES or name.startswith("build") or name == "EXPECT":
                    continue
                path = os.path.join(d, name)
                if os.path.isfile(path):
                    shutil.copy(path, os.path.join(dest, name))
        for name, path in shared_files(self.lab_dir).items():
            if not os.path.exists(os.path.join(dest, name)):
                shutil.copy(path, os.path.join(dest, name))
        if not os.path.exists(os.path.join(dest, "CMakeLists.txt")):
            with open(os.path.join(dest, "CMakeLists.txt"), "w") as f:
                f.write(lab_cmakelists(self.lab_dir))

    # ---- building ------------------------------------------------------------------------

    def build(self, programs, weight=1):
        """Configures and builds the sources with CMake; requires every program to exist.
        The check `builds` weighs `weight` (little: compiling is not what a lab teaches)."""
        src = os.path.join(self.tmp, "src")
        self._assemble_sources(src)
        self._apply_broken_patch(src)
        steps = [["cmake", "-S", src, "-B", self.build_dir, "-DCMAKE_BUILD_TYPE=Debug"],
                 ["cmake", "--build", self.build_dir, "-j2"]]
        for i, cmd in enumerate(steps):
            r = self.run_tool(cmd, 240, "build")
            self._keep_feedback("build.log", "$ %s\n%s" % (" ".join(cmd), r.out), append=i > 0)
            if r.rc != 0:
                errors = [l for l in r.out.splitlines() if "error" in l.lower()] or r.out.splitlines()
                self.require("builds", False, "the compiler said:\n      " + "\n      ".join(errors[:12]), weight)
        missing = [p for p in programs if not os.access(self.bin(p), os.X_OK)]
        self.require("builds", not missing, "no program named %s after the build" % ", ".join(missing), weight)

    def source_path(self, name):
        """A file or folder of the graded sources by name: the copy that was built (with any
        broken/NAME.patch applied) when build() made one, else the one in the last source
        folder holding it (folders, such as lab 8's mytrace/, are read where they are), else None."""
        built = os.path.join(self.tmp, "src", name)
        if os.path.exists(built):
            return built
        for d in reversed(self.source_dirs()):
            if os.path.exists(os.path.join(d, name)):
                return os.path.join(d, name)
        return None

    def bin(self, program):
        return os.path.join(self.build_dir, program)

    def build_reference(self, programs):
        """The reference peer for the student's programs: {program: path}. Prebuilt peers when
        there are (an install: students cannot read the solution), else the lab's solution
        built apart. A missing or unbuildable reference is a grader error."""
        prebuilt = reference_peer_dir(self.lab_dir)
        if prebuilt:
            return self._prebuilt_reference(prebuilt, programs)
        src, build = os.path.join(self.tmp, "reference-src"), os.path.join(self.tmp, "reference-build")
        self._assemble_sources(src, [os.path.join(sealed_dir(self.lab_dir), "solution")])
        for cmd in (["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Debug"], ["cmake", "--build", build, "-j2"]):
            r = self.run_tool(cmd, 240, "reference build")
            if r.rc != 0:
                raise RuntimeError("the lab's reference solution does not build: " + r.tail(6))
        return {p: os.path.join(build, p) for p in programs}

    @staticmethod
    def _prebuilt_reference(ref_dir, programs):
        # os.access(X_OK), not a read: the installed peers are execute-only (0711).
        paths = {p: os.path.join(ref_dir, p) for p in programs}
        missing = [p for p, path in paths.items() if not os.access(path, os.X_OK)]
        if missing:
            raise RuntimeError("the lab's reference peer %s is not installed in %s (reinstall simnic's labs)"
                               % (", ".join(missing), ref_dir))
        return paths

    def run_tool(self, argv, timeout, name, env=None):
        """Runs a helper command that needs no NIC (a plot script, a compiler, simnic itself) to
        the end or `timeout` seconds, in a session of its own: a Result. For the student's
        programs on the NICs use run/start."""
        try:
            p = subprocess.run([str(a) for a in argv], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=timeout, start_new_session=True)
            return Result(name, p.returncode, p.stdout.decode("utf-8", "replace"), False)
        except subprocess.TimeoutExpired as e:
            return Result(name, -1, (e.output or b"").decode("utf-8", "replace"), True)

    # ---- NICs ----------------------------------------------------------------------------

    def addr(self, i):
        """The IPv4 address of NIC i (its GID is ::ffff:ADDR)."""
        a, b, c, d = (int(x) for x in self.base_addr.split("."))
        return "%d.%d.%d.%d" % (a, b, c, d + i)

    def device(self, i):
        """The device name program i should open: simnicI, or the real --device."""
        return self.args.device if self.device_mode else "simnic%d" % i

    def env(self):
        env = dict(os.environ)
        if not self.device_mode:
            env["SIMNIC_DIR"] = self.simnic_dir
        return env

    def _simnic(self, args, timeout=30):
        return self.run_tool([self.simnic] + list(args), timeout, "simnic " + args[0], env=self.env())

    def up(self, count=2, mtu=None, extra=()):
        """Starts `count` NICs with tracing in the private SIMNIC_DIR (nothing with --device)."""
        if self.device_mode:
            return
        if not self.simnic:
            raise LabAbort("simnic was not found: build it (bash scripts/build.sh) and put build/bin on PATH")
        os.makedirs(self.simnic_dir, mode=0o700, exist_ok=True)
        self.session += 1  # each up() records a trace of its own; the first one is saved
        if self.session > 1:
            self.trace_dir = os.path.join(self.tmp, "trace%d" % self.session)
        r = self._up_on_free_addresses(count, mtu, extra)
        self.nic_count = count
        self._read_nic_pids()
        if r.rc != 0:
            raise LabAbort("simnic up failed: " + r.out.strip())

    def _up_on_free_addresses(self, count, mtu, extra):
        """`simnic up` on this grader's address block; when another user (or anything) holds
        one of its addresses, stops what did start and tries the next free block: a taken
        address is never the student's fault, so it must not become a FAIL."""
        for _ in range(UP_ATTEMPTS):
            args = ["up", str(count), "--addr", self.addr(0), "--trace", self.trace_dir]
            if mtu:
                args += ["--mtu", str(mtu)]
            r = self._simnic(args + list(extra), 60)
            if r.rc == 0 or not _address_taken(r.out):
                return r
            self._simnic(["down"], 30)
            shutil.rmtree(self.trace_dir, ignore_errors=True)  # the stopped NICs' traces
            self._next_address_block()
        raise RuntimeError("no free NIC addresses after %d tries (last: %s): %s"
                           % (UP_ATTEMPTS, self.base_addr, r.out.strip()))

    def _next_address_block(self):
        if self._addr_lock is not None:
            os.close(self._addr_lock)
        self.addr_block, self._addr_lock = _lease_block(self.addr_block + 1)
        self.base_addr = _block_base(self.addr_block)

    def _read_nic_pids(self):
        self.nic_pids = []
        for i in range(self.nic_count):
            try:
                with open(os.path.join(self.simnic_dir, "simnic%d.pid" % i)) as f:
                    self.nic_pids.append(int(f.read().split()[0]))
            except (OSError, ValueError, IndexError):
                pass

    def fault(self, nic, settings):
        """`simnic fault NIC SETTINGS...` (settings: e.g. ["loss=0.1", "seed=7"] or ["off"])."""
        if not self.device_mode:
            return self._simnic(["fault", nic] + list(settings))
        return None

    def down(self):
        """Stops every program and NIC, then loads their trace into lab.trace (and saves a
        copy of the first session's: --trace-out, the student's DIR/trace)."""
        for p in self.procs:
            p.kill()
            if self.args.verbose and p.result is None:
                p.wait(1)  # a program waited for by the grader itself, or stopped here: show it too
            self._show_output(p)
        if self.device_mode or not self.nic_count:
            return
        self._simnic(["down"], 30)
        for pid in self.nic_pids:
            try:
                os.kill(pid, signal.SIGKILL)  # in case `down` could not stop it
            except ProcessLookupError:
                pass
        self.nic_count = 0
        self.trace = Trace.load(self.trace_dir)
        if self.session == 1:
            self._save_trace()

    def _save_trace(self):
        targets = [self.args.trace_out] if self.args.trace_out else []
        if self.args.feedback_dir:
            targets.append(os.path.join(os.path.abspath(self.args.feedback_dir), "trace"))
        elif self.args.src:
            targets.append(os.path.join(os.path.abspath(self.args.src), "trace"))
        for t in targets:
            try:
                os.makedirs(t, exist_ok=True)
                for name in os.listdir(self.trace_dir):
                    shutil.copy(os.path.join(self.trace_dir, name), os.path.join(t, name))
                self.notes_at_end.append("the NICs' trace: %s/*.jsonl (watch it: simnic viz --replay %s/*.jsonl)"
                                         % (t, t))
            except OSError as e:
                self.note("could not save the trace to %s: %s" % (t, e))

    # ---- programs ------------------------------------------------------------------------

    def _argv(self, argv):
        argv = [str(a) for a in argv]
        if self.device_mode:
            return argv
        return [self.simnic, "run", "--"] + argv

    def start(self, argv, name=None):
        """Starts a program in the background (on simnic: through `simnic run`)."""
        name = name or os.path.basename(str(argv[0]))
        log = os.path.join(self.tmp, "%s-%d.log" % (name, len(self.procs)))
        p = Proc(self._argv(argv), self.env(), self.tmp, name, log)
        self.procs.append(p)
        return p

    def run(self, argv, timeout=30, name=None):
        """Runs a program to completion (killed after `timeout` s); returns a Result."""
        p = self.start(argv, name)
        r = p.wait(timeout)
        self._show_output(p)
        return r

    def wait_all(self, procs, timeout):
        """Waits for several background programs sharing one deadline."""
        deadline = time.monotonic() + timeout
        out = []
        for p in procs:
            out.append(p.wait(max(0.1, deadline - time.monotonic())))
            self._show_output(p)
        return out

    def _show_output(self, proc):
        """--verbose: prints a finished program's whole output, once."""
        if self.args.verbose and proc.result is not None and not getattr(proc, "shown", False):
            proc.shown = True
            r = proc.result
            self.note("---- %s (%s) ----\n%s" % (r.name, "timed out" if r.timed_out else "exit %d" % r.rc, r.out))

    @staticmethod
    def free_port():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        return port

    @staticmethod
    def wait_listen(port, timeout=10, proc=None):
        """Waits until something listens on TCP `port` (read from /proc, without connecting,
        so the server's accept() is left for the real client). False on timeout or when
        `proc` exits first."""
        needle = ":%04X " % port
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for f in ("/proc/net/tcp", "/proc/net/tcp6"):
                try:
                    with open(f) as fh:
                        for line in fh.readlines()[1:]:
                            cols = line.split()
                            if len(cols) > 3 and cols[3] == "0A" and (cols[1] + " ").find(needle) >= 0:
                                return True
                except OSError:
                    pass
            if proc is not None and not proc.running():
                return False
            time.sleep(0.02)
        return False

    # ---- checks --------------------------------------------------------------------------

    def note(self, text):
        print("      " + text.replace("\n", "\n      "), flush=True)

    def check(self, name, ok, hint="", weight=1, core=False):
        """Records one check: `PASS name` or `FAIL name` with its hint. `weight` is what it is
        worth in the lab's points; `core` marks what the lab teaches. Returns ok."""
        ok = bool(ok)
        if ok:
            self.passed += 1
            print("PASS " + name, flush=True)
            self.results.append(Check(name, "PASS", "", weight, core))
        else:
            self.failed += 1
            text = _hint_text(hint)
            print("FAIL " + name, flush=True)
            if text:
                print("  hint: " + text.replace("\n", "\n  "), flush=True)
            self.results.append(Check(name, "FAIL", text, weight, core))
        return ok

    def trace_check(self, name, ok, hint="", weight=1, core=False):
        """A check judged from the trace: `ok` is a function (called only on simnic); with
        --device it is reported as SKIP (earning nothing)."""
        if self.device_mode:
            self.skipped += 1
            print("SKIP %s (needs simnic's trace)" % name, flush=True)
            self.results.append(Check(name, "SKIP", "", weight, core))
            return True
        return self.check(name, ok() if callable(ok) else ok, hint, weight, core)

    def problems_check(self, name, problems, advice="", weight=1, core=False):
        """A trace check that passes when `problems` (a function returning a list of sentences,
        called only on simnic) finds none; its hint is those sentences, then `advice` (what to
        do about them, e.g. the README's step)."""
        found = []

        def ok():
            found[:] = problems()
            return not found

        return self.trace_check(name, ok, lambda: "; ".join(found) + (". " + advice if advice else ""),
                                weight, core)

    def requests_ran_check(self, name, tr, nic, requests, idle, advice="", weight=1, core=False,
                           who="the server's NIC"):
        """A trace check that requests of each kind in `requests` ((label, opcode text) pairs, e.g.
        ("RDMA READ", "RDMA_READ_REQUEST")) reached `nic` and that no error NAK or error completion
        came of anything (Trace.error_lines). The hint names the errors, or else how many of each
        arrived and `idle` (why that is not enough to judge), then `advice`."""
        def counts():
            return [(label, len(tr.packets("rx", nic, opcode=op))) for label, op in requests]

        def hint():
            got = " and ".join("%d %s" % (n, label) for label, n in counts())
            text = "; ".join(tr.error_lines()) or "%s received %s requests: without %s %s" % (
                who, got, "both" if len(requests) == 2 else "all", idle)
            return text + (". " + advice if advice else "")

        return self.trace_check(name, lambda: all(n for _, n in counts()) and not tr.error_lines(), hint,
                                weight, core)

    def require(self, name, ok, hint="", weight=1, core=False):
        """A check the rest of the grading needs: on failure grading stops here. A name
        already checked (e.g. `builds`, required once per step) is recorded only once."""
        done = [r for r in self.results if r.name == name]
        if ok:
            if not done:
                self.check(name, True, "", weight, core)
            return True
        if done:  # passed at an earlier step, fails now: the one record becomes a FAIL
            self.results.remove(done[0])
            self.passed -= done[0].status == "PASS"
        self.check(name, False, hint, weight, core)
        raise LabAbort(None)

    # ---- the score -----------------------------------------------------------------------

    def score(self):
        """The points earned: the weights of the checks that passed."""
        return sum(r.earned() for r in self.results)

    def total(self):
        """T: the lab's declared points, else the weights of the checks made."""
        return self.points if self.points is not None else sum(r.weight for r in self.results)

    def _weights_add_up(self):
        """In a run that made every check, the weights must add up to the declared points."""
        return self.points is None or sum(r.weight for r in self.results) == self.points

    def summary(self, score):
        text = "%d passed, %d failed" % (self.passed, self.failed)
        if self.skipped:
            text += ", %d skipped" % self.skipped
        return text + "; score %s/%s" % (_num(score), _num(self.total()))

    def _write_results(self, score):
        if not self.args.results:
            return
        data = {"checks": [r.as_json() for r in self.results], "score": score, "total": self.total()}
        try:
            with open(self.args.results, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1)
                f.write("\n")
        except OSError as e:
            print("could not write %s: %s" % (self.args.results, e), flush=True)

    # ---- the run as a whole --------------------------------------------------------------

    def _interrupted(self, signum, frame):
        raise LabInterrupted("grading interrupted by signal %d" % signum)

    def __enter__(self):
        # A grader stopped by SIGTERM/SIGHUP/Ctrl-C still stops its NICs and programs (__exit__).
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, self._interrupted)
        print("%s -- grading %s%s" % (self.title, self.what(),
                                       " on device " + self.args.device if self.device_mode else " on simnic"),
              flush=True)
        return self

    def __exit__(self, exc_type, exc, tb):
        broke = interrupted = False
        if exc_type is not None and issubclass(exc_type, LabAbort):
            if exc.args and exc.args[0]:
                print("FAIL " + str(exc.args[0]), flush=True)
                self.failed += 1
            interrupted = issubclass(exc_type, LabInterrupted)
        elif exc_type is not None and exc_type is not SystemExit:
            import traceback
            print("grader error (not your fault; please report it):", flush=True)
            traceback.print_exception(exc_type, exc, tb)
            broke = True
        elif exc_type is None and not self._weights_add_up():
            print("grader error (not your fault; please report it): the checks' weights add up to %s, "
                  "the lab declares points=%s" % (_num(sum(r.weight for r in self.results)), _num(self.points)),
                  flush=True)
            broke = True
        try:
            self.down()
        finally:
            self._cleanup()
        score = 0 if broke or interrupted else self.score()
        print(self.summary(score), flush=True)
        self._write_results(score)
        if self.failed and not self.args.verbose:
            self.notes_at_end.append("to see everything the programs printed: %s" % self.verbose_command())
        for n in self.notes_at_end:
            print(n, flush=True)
        self.exit_code = 2 if broke else (0 if self.failed == 0 and self.passed > 0 else 1)
        sys.exit(self.exit_code)

    def verbose_command(self):
        """The command that reruns this grading with the programs' full output."""
        a, m = self.args, re.match(r"(\d+)-", os.path.basename(self.lab_dir))
        which = ([a.src] if a.src else ["--starter"] if a.starter else ["--broken", a.broken] if a.broken
                 else ["--solution"])
        if self.device_mode:
            which += ["--device", a.device, "--gid-index", self.gid_index]
        return "simnic lab check %s %s --verbose" % (int(m.group(1)) if m else "N", " ".join(shlex.quote(w) for w in which))

    def output_dir(self):
        """Where files made for the student go (a plot, measurements): --feedback-dir, else the
        student's --src DIR, else None (grading the lab's own code)."""
        d = self.args.feedback_dir or self.args.src
        return os.path.abspath(d) if d else None

    def _keep_feedback(self, name, text, append=False):
        """Writes `text` to --feedback-dir/name (nothing without --feedback-dir)."""
        if not self.args.feedback_dir:
            return
        path = os.path.join(self.args.feedback_dir, name)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "a" if append else "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            self.note("could not write %s: %s" % (path, e))

    def _keep_program_logs(self):
        """Each program's full output, for the teacher: --feedback-dir/logs/NAME-I.log."""
        for p in self.procs:
            try:
                self._keep_feedback(os.path.join("logs", os.path.basename(p.log_path)), p.output())
            except OSError:
                pass

    def _cleanup(self):
        for p in self.procs:
            p.kill()
        self._keep_program_logs()
        for pid in self.nic_pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.args.keep:
            print("kept: %s (build/, trace/, nics/, program logs)" % self.tmp, flush=True)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def _num(x):
    """A score as people write it: 7, 7.5."""
    return ("%g" % x) if isinstance(x, float) else str(x)


def parse_kv_lines(text, prefix):
    """Lines `PREFIX key value...` of a program's output, as {key: value}."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"\s*%s\s+(\S+)\s*(.*)$" % re.escape(prefix), line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out
