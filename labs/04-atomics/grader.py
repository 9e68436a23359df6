#!/usr/bin/env python3
"""Lab 4 grader: three clients (on simnic1, simnic2, simnic1) hammer the server's words (on
simnic0) at the same time: each adds 1 to the counter INCREMENTS times with FETCH_ADD and
updates the total UPDATES times under a CMP_SWP spinlock. The final values must equal the sums,
and the trace must show that atomics carried them: one FETCH_ADD per increment, each answered
with a different old value (the NIC serialised them), and exactly one successful lock
acquisition per update. A check passes only on evidence that what it names happened (the "no
error" check needs the atomics to have run). Weights and core checks: the table in README.md
(keep them in step). Arguments: see labs/common/simnic_lab.py."""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from simnic_lab import Lab  # noqa: E402

CLIENTS, INCREMENTS, UPDATES = 3, 40, 8


def printed(out, name):
    m = re.search(r"^server: %s (\d+)" % name, out, re.M)
    return int(m.group(1)) if m else None


def va_of(p):
    va = (p.get("atomic") or p.get("reth") or {}).get("va", "-1")
    return int(va, 16) if isinstance(va, str) else va


def unique(packets):
    """One packet per (QP, PSN): a retransmitted request is the same request."""
    return list({(p["qp"], p["psn"]): p for p in packets}.values())


def hammer(lab, server, client, clients, increments, updates, names=("server", "client")):
    """The server on NIC 0 and `clients` clients at once on NICs 1, 2, 1, ...; returns
    (server result, client results)."""
    port = lab.free_port()
    g = ["-g", lab.gid_index, "-p", port]
    srv = lab.start([server, "-d", lab.device(0), "-c", clients] + g, name=names[0])
    lab.wait_listen(port, 10, srv)
    started = [lab.start([client, "-d", lab.device(1 + i % 2), "-i", i + 1, "-n", increments, "-m", updates]
                         + g + ["127.0.0.1"], name="%s%d" % (names[1], i + 1)) for i in range(clients)]
    results = lab.wait_all(started, 40)
    return lab.wait_all([srv], 5)[0], results


with Lab(__file__, "Lab 4: atomics, a counter and a spinlock", points=20) as lab:
    lab.build(["server", "client"], weight=1)
    ref = lab.build_reference(["server", "client"])
    lab.up(3)
    s, results = hammer(lab, lab.bin("server"), lab.bin("client"), CLIENTS, INCREMENTS, UPDATES)
    lab.down()
    tr = lab.trace
    server_nic = lab.device(0)

    bad = [r for r in results if r.rc != 0]
    lab.check("all %d clients finish and exit 0" % CLIENTS, not bad, lambda: "; ".join(r.tail(3) for r in bad),
              weight=1)  # exiting 0 alone proves nothing: the checks below say what they did
    lab.check("the server reports its words and exits 0", s.rc == 0 and printed(s.out, "counter") is not None,
              lambda: s.tail(), weight=1)
    want_count, want_total = CLIENTS * INCREMENTS, CLIENTS * UPDATES
    lab.check("counter = %d (%d clients x %d increments): no increment lost" % (want_count, CLIENTS, INCREMENTS),
              printed(s.out, "counter") == want_count,
              lambda: "the server did not report a counter (see above)" if printed(s.out, "counter") is None else
              "the server's counter is %s. Two clients that READ the counter, add one and WRITE it back "
              "can both read the same value and one increment is lost: step 3, IBV_WR_ATOMIC_FETCH_AND_ADD "
              "does the read, the add and the write in one step at the server's NIC" % printed(s.out, "counter"),
              weight=3, core=True)
    lab.check("total = %d (%d clients x %d locked updates): the lock excluded the others" % (
              want_total, CLIENTS, UPDATES), printed(s.out, "total") == want_total and printed(s.out, "lock") == 0,
              lambda: "the server did not report a total (see above)" if printed(s.out, "total") is None else
              "the server's total is %s and its lock %s. Step 4: take the lock with CMP_SWP(0 -> my id), "
              "retrying until the old value returned is 0; update; give it back with CMP_SWP(my id -> 0)" % (
                  printed(s.out, "total"), printed(s.out, "lock")), weight=3, core=True)

    def shared_mr():
        ms = [m for m in tr.mrs(server_nic) if "REMOTE_ATOMIC" in m.get("access", "")]
        return ms[0] if ms else None

    lab.trace_check("the server's words are registered for REMOTE_ATOMIC (trace: mr_create)",
                    lambda: shared_mr() is not None,
                    lambda: "the server's MRs allow: %s. Step 1: add IBV_ACCESS_REMOTE_ATOMIC to the MR (and to the "
                    "QP's access flags)" % (", ".join(m.get("access", "") for m in tr.mrs(server_nic)) or "nothing"),
                    weight=1)  # a step: the atomics checks prove it was the right one

    def fetch_adds():
        m = shared_mr()
        base = int(m["addr"], 16) if m else -1
        return unique([p for p in tr.packets("rx", server_nic, opcode="FETCH_ADD")
                       if va_of(p) == base and (p.get("atomic") or {}).get("swap_add") == 1])

    lab.trace_check("every increment was a FETCH_ADD of 1 on the counter (trace: %d RC_FETCH_ADD)" % want_count,
                    lambda: len(fetch_adds()) == want_count,
                    lambda: "the server's NIC received %d FETCH_ADD packets adding 1 at the counter's address, %d "
                    "expected (other requests: %s). Step 3: fetch_add() posts IBV_WR_ATOMIC_FETCH_AND_ADD with "
                    "wr.wr.atomic.remote_addr = the counter, compare_add = 1" % (
                        len(fetch_adds()), want_count, dict(tr.opcode_counts("rx", server_nic))),
                    weight=2, core=True)

    def acks_by_request():
        """{(qp, psn): original value} from the server's ATOMIC ACKNOWLEDGE packets."""
        return {(p["qp"], p["psn"]): (p.get("atomic_ack") or {}).get("orig")
                for p in tr.packets("tx", server_nic, opcode="ATOMIC_ACKNOWLEDGE")}

    def old_values():
        acks = acks_by_request()
        return sorted(acks.get((p["qp"], p["psn"]), -1) for p in fetch_adds())

    lab.trace_check("each FETCH_ADD saw a different old value: 0, 1, ... %d (trace: ATOMIC ACKNOWLEDGE)"
                    % (want_count - 1), lambda: old_values() == list(range(want_count)),
                    lambda: "the old values the server's NIC returned were not 0..%d once each. Increment only "
                    "with FETCH_ADD, never with a READ and a WRITE of the counter (step 3)" % (want_count - 1),
                    weight=1, core=True)

    def lock_grabs():
        """Successful CMP_SWP(0 -> id) on the lock word: the old value returned was 0."""
        m = shared_mr()
        lock_va = int(m["addr"], 16) + 8 if m else -1
        acks = acks_by_request()
        return unique([p for p in tr.packets("rx", server_nic, opcode="COMPARE_SWAP")
                       if va_of(p) == lock_va and (p.get("atomic") or {}).get("compare") == 0
                       and acks.get((p["qp"], p["psn"])) == 0])

    lab.trace_check("the lock was taken with CMP_SWP exactly once per update (trace: %d successful RC_COMPARE_SWAP)"
                    % want_total, lambda: len(lock_grabs()) == want_total,
                    lambda: "the server's NIC saw %d successful CMP_SWP(0 -> id) on the lock word, %d expected. "
                    "Step 4: lock() retries IBV_WR_ATOMIC_CMP_AND_SWP with compare_add = 0 and swap = your id "
                    "until it returns 0; unlock() swaps your id back to 0" % (len(lock_grabs()), want_total),
                    weight=2, core=True)

    lab.requests_ran_check("the atomics ran without an error completion or error NAK (trace)", tr, server_nic,
                           [("FETCH_ADD", "FETCH_ADD"), ("CMP_SWP", "COMPARE_SWAP")],
                           "there is nothing to judge yet (steps 3 and 4)", weight=1)

    # The student's programs against the reference ones (two clients, fewer rounds).
    lab.up(3)
    ref_s, my_cs = hammer(lab, ref["server"], lab.bin("client"), 2, 10, 3, ("reference server", "your client"))
    my_s, ref_cs = hammer(lab, lab.bin("server"), ref["client"], 2, 10, 3, ("your server", "reference client"))
    lab.down()
    lab.check("your clients work with the reference server (counter 20, total 6)",
              all(r.rc == 0 for r in my_cs) and printed(ref_s.out, "counter") == 20 and printed(ref_s.out, "total") == 6,
              lambda: "it did not: %s; %s" % ("; ".join(r.tail(2) for r in my_cs), ref_s.tail(3)), weight=2, core=True)
    lab.check("your server works with the reference clients (counter 20, total 6)",
              all(r.rc == 0 for r in ref_cs) and printed(my_s.out, "counter") == 20 and printed(my_s.out, "total") == 6,
              lambda: "it did not: %s; %s" % (my_s.tail(3), "; ".join(r.tail(2) for r in ref_cs)), weight=2, core=True)
