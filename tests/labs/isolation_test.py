#!/usr/bin/env python3
"""Two students on one machine never cross (ctest label "labs", issue 24 point 4).

root and `nobody` each do what lab 2's README says, at the same time: their own `simnic up 2
--addr 127.0.N.1`, then the lab's server on simnic0 and its client on simnic1, connected to
their own server NIC's address, with the programs' default TCP port (-p not given). Before
issue 24 both servers wanted port 18515 on every address: the second one could not listen and
its user's client reached the other user's server. Now the default port is per user
(labutil.h: lab_default_port), so each client must reach its own user's server:

  - every program exits 0 with all of its messages (outputs checked);
  - each user's NICs carried the traffic and only it: simnic0's received packets are simnic1's
    sent ones and the reverse (`simnic status --raw` counters), and every packet each NIC
    received came from an address of the same user (the NICs' traces).

Needs root (to run as `nobody`); skips with exit status 77 otherwise.

    isolation_test.py --simnic build/bin/simnic --labs labs
"""
import argparse
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
MESSAGES = 5


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


class User:
    """One student: a uid, a private SIMNIC_DIR and trace folder, two NICs on 127.0.N.1-2."""

    def __init__(self, name, simnic, third):
        pw = pwd.getpwnam(name)
        self.name, self.uid, self.gid, self.simnic, self.third = name, pw.pw_uid, pw.pw_gid, simnic, third
        self.home = tempfile.mkdtemp(prefix="simnic-iso-%s-" % name)
        os.chmod(self.home, 0o700)
        os.chown(self.home, self.uid, self.gid)
        self.dir, self.trace = os.path.join(self.home, "nics"), os.path.join(self.home, "trace")
        self.addr = ["127.0.%d.%d" % (third, i) for i in (1, 2)]

    def argv(self, args):
        env = ["env", "SIMNIC_DIR=" + self.dir, "HOME=" + self.home]
        prefix = [] if self.uid == os.geteuid() else ["runuser", "-u", self.name, "--"]
        return prefix + env + list(args)

    def run(self, args, timeout=60):
        p = subprocess.run(self.argv(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                           cwd=self.home)
        return p.returncode, p.stdout.decode("utf-8", "replace")

    def start(self, args, log):
        f = open(os.path.join(self.home, log), "wb")
        return subprocess.Popen(self.argv(args), stdout=f, stderr=subprocess.STDOUT, cwd=self.home,
                                start_new_session=True), f

    def up(self):
        return self.run([self.simnic, "up", "2", "--addr", self.addr[0], "--trace", self.trace])

    def counters(self, nic):
        rc, out = self.run([self.simnic, "status", nic, "--raw"])
        kv = dict(l.split(" ", 1) for l in out.splitlines() if " " in l)
        return {k: int(v) for k, v in kv.items() if v.strip().isdigit()}

    def received_from(self):
        """{nic file: the set of source addresses of the packets it received}."""
        srcs = {}
        for name in os.listdir(self.trace) if os.path.isdir(self.trace) else []:
            s = set()
            with open(os.path.join(self.trace, name), errors="replace") as f:
                for line in f:
                    try:
                        e = json.loads(line)
                    except ValueError:
                        continue
                    if e.get("kind") == "pkt_rx" and e.get("src"):
                        s.add(e["src"])
            srcs[name] = s
        return srcs

    def down(self):
        try:
            self.run([self.simnic, "down"], 30)
        except subprocess.TimeoutExpired:
            pass
        for i in (0, 1):  # what `down` could not stop, by its pid
            try:
                with open(os.path.join(self.dir, "simnic%d.pid" % i)) as f:
                    os.kill(int(f.read().split()[0]), signal.SIGKILL)
            except (OSError, ValueError, IndexError):
                pass

    def cleanup(self):
        shutil.rmtree(self.home, ignore_errors=True)


def build_lab2(simnic, labs, where):
    """Builds lab 2's solution (what a student's finished lab02 is: `simnic lab start 2`, then
    the solution's files over the starter's) into where/build."""
    src = os.path.join(where, "src")
    subprocess.run([simnic, "lab", "start", "2", src], stdout=subprocess.DEVNULL, check=True, timeout=30,
                   env=dict(os.environ, SIMNIC_LABS_DIR=labs))
    shutil.copytree(os.path.join(labs, "02-rc-send-recv", "solution"), src, dirs_exist_ok=True)
    build = os.path.join(where, "build")
    for cmd in (["cmake", "-S", src, "-B", build], ["cmake", "--build", build, "-j2"]):
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=240)
        if p.returncode != 0:
            raise RuntimeError("cannot build lab 2's solution: " + p.stdout.decode()[-2000:])
    for root, dirs, files in os.walk(where):
        os.chmod(root, 0o755)
    return build


def kill(procs):
    for p, f in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        f.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--simnic", required=True)
    ap.add_argument("--labs", required=True)
    a = ap.parse_args()
    simnic, labs = os.path.abspath(a.simnic), os.path.abspath(a.labs)
    if os.geteuid() != 0:
        skip("needs root, to run the second student as `nobody` (runuser)")
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        skip("no user `nobody` on this machine")
    if not shutil.which("runuser") or not shutil.which("cmake"):
        skip("needs runuser and cmake")
    probe = subprocess.run(["runuser", "-u", "nobody", "--", simnic, "lab", "list"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
    if probe.returncode != 0:
        skip("`nobody` cannot run %s (a build tree not readable by others?): %s" % (simnic, probe.stdout.decode()))

    third = 150 + os.getpid() % 50  # 127.0.N.x: the users' range, away from the tests' and graders'
    users = [User("root", simnic, third), User("nobody", simnic, third + 50)]
    work = tempfile.mkdtemp(prefix="simnic-iso-build-")
    failures, procs = [], []
    try:
        os.chmod(work, 0o755)
        build = build_lab2(simnic, labs, work)
        for u in users:
            rc, out = u.up()
            print("%s: simnic up 2 --addr %s (exit %d)\n%s" % (u.name, u.addr[0], rc, out))
            if rc != 0:
                skip("%s could not start NICs on %s (in use?): %s" % (u.name, u.addr[0], out))
        servers = [u.start([simnic, "run", "--", os.path.join(build, "server"), "-d", "simnic0", "-n", str(MESSAGES)],
                           "server.log") for u in users]
        procs += servers
        time.sleep(1.0)  # both servers listen (or, before the fix, the second one could not)
        clients = [u.start([simnic, "run", "--", os.path.join(build, "client"), "-d", "simnic1", "-n",
                            str(MESSAGES), u.addr[0]], "client.log") for u in users]
        procs += clients
        deadline = time.monotonic() + 60
        for p, _ in servers + clients:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        kill(procs)
        for u, (s, _), (c, _) in zip(users, servers, clients):
            outs = {}
            for who, p in (("server", s), ("client", c)):
                with open(os.path.join(u.home, who + ".log"), errors="replace") as f:
                    outs[who] = f.read()
                print("---- %s's %s (exit %s) ----\n%s" % (u.name, who, p.returncode, outs[who]))
            if s.returncode != 0 or "server: %d messages ok" % MESSAGES not in outs["server"]:
                failures.append("%s's server did not get its %d messages from its own client" % (u.name, MESSAGES))
            if c.returncode != 0 or "client: reply %d ok" % (MESSAGES - 1) not in outs["client"]:
                failures.append("%s's client did not get its replies from its own server" % u.name)
            n0, n1 = ({k: v for k, v in u.counters(nic).items() if k in ("tx_packets", "rx_packets")}
                      for nic in ("simnic0", "simnic1"))
            print("%s: simnic0 %s, simnic1 %s" % (u.name, n0, n1))
            if not n0.get("rx_packets") or n0.get("rx_packets") != n1.get("tx_packets") \
                    or n1.get("rx_packets") != n0.get("tx_packets"):
                failures.append("%s's NICs did not carry exactly their own pair's packets: simnic0 %s, simnic1 %s"
                                % (u.name, n0, n1))
        for u in users:
            u.down()
        for u in users:
            for nic, srcs in u.received_from().items():
                foreign = srcs - set(u.addr)
                if foreign:
                    failures.append("%s's %s received packets from %s, not its user's NICs" % (u.name, nic, foreign))
                if not srcs:
                    failures.append("%s's %s received nothing (trace)" % (u.name, nic))
    finally:
        kill(procs)
        for u in users:
            u.down()
            u.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print("FAILED: " + f)
    print("isolation_test: %s" % ("ok" if not failures else "%d failure(s)" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
