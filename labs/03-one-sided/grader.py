#!/usr/bin/env python3
"""Lab 3 grader: the student's client (simnic1) puts 8 key-value pairs into the server's table
(simnic0) and gets them back. Passing needs more than the right output: the trace must show
the table registered for remote access, the values carried by RDMA WRITE packets into the
table's address range with its rkey, read back by RDMA READ, and no SEND reaching the server
(its CPU never touches the table). A check passes only on evidence that what it names happened:
the WRITE and READ checks need the client's completions too (a client that never learns its
writes landed has not done step 4), the "no SEND" and "no error" checks need the values to have
moved at all. Weights and core checks: the table in README.md. Arguments: see
labs/common/simnic_lab.py."""
import os
import random
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from simnic_lab import Lab  # noqa: E402

KEYS = ["apple", "banana", "cherry", "damson", "elder", "fig", "guava", "hazel"]


def pairs(out, what):
    return dict(re.findall(r"^%s (\S+) = (\S+)" % what, out, re.M))


def table(out):
    return dict(re.findall(r"^server: slot \d+ holds (\S+) = (\S+)", out, re.M))


def kv_run(lab, server, client, seed, names=("server", "client")):
    """Runs `server` on NIC 0 and `client` (putting values made from `seed`) on NIC 1."""
    port = lab.free_port()
    common = ["-g", lab.gid_index, "-p", port]
    srv = lab.start([server, "-d", lab.device(0)] + common, name=names[0])
    lab.wait_listen(port, 10, srv)
    cli = lab.run([client, "-d", lab.device(1)] + common + ["-s", seed, "127.0.0.1"], timeout=25, name=names[1])
    return lab.wait_all([srv], 5)[0], cli


with Lab(__file__, "Lab 3: one-sided RDMA WRITE and READ", points=20) as lab:
    lab.build(["server", "client"], weight=1)
    ref = lab.build_reference(["server", "client"])
    lab.up(2)
    seed = "s%04d" % random.randrange(10000)  # the values change every run
    want = {k: "%s-%s-%d" % (k, seed, i) for i, k in enumerate(KEYS)}
    s, cli = kv_run(lab, lab.bin("server"), lab.bin("client"), seed)
    lab.down()
    tr = lab.trace
    server_nic, client_nic = lab.device(0), lab.device(1)

    got = pairs(cli.out, "client: get")
    lab.check("the client gets back every value it put, and exits 0", cli.rc == 0 and got == want,
              lambda: "expected %d values like %s = %s; %s" % (len(want), KEYS[0], want[KEYS[0]], cli.tail()),
              weight=3, core=True)
    lab.check("the values are in the server's table at the end (the server prints them)",
              s.rc == 0 and table(s.out) == want,
              lambda: "the server's table holds %d of %d values; %s" % (
                  sum(table(s.out).get(k) == v for k, v in want.items()), len(want), s.tail()),
              weight=2, core=True)

    def table_mr():
        remote = [m for m in tr.mrs(server_nic) if "REMOTE_WRITE" in m.get("access", "")
                  and "REMOTE_READ" in m.get("access", "")]
        return remote[0] if remote else None

    lab.trace_check("the server registered its table for REMOTE_WRITE and REMOTE_READ (trace: mr_create)",
                    lambda: table_mr() is not None,
                    lambda: "no MR of the server allows both (its MRs allow: %s). Step 1: ibv_reg_mr the table with "
                    "IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ" % (
                        ", ".join(m.get("access", "") for m in tr.mrs(server_nic)) or "nothing"),
                    weight=1)  # a step: the WRITE and READ checks prove it was the right one

    def in_table(pkt):
        """A request aimed at one of the server's MRs: its rkey, an address inside it."""
        reth = pkt.get("reth") or {}
        m = tr.mr_with_rkey(reth.get("rkey"), server_nic)
        va = reth.get("va", "-1")
        va = int(va, 16) if isinstance(va, str) else va
        return m is not None and int(m["addr"], 16) <= va < int(m["addr"], 16) + m["length"]

    def completed(opcode):
        """The client's successful completions of `opcode`: it learnt that its requests were done."""
        return [e for e in tr.cqes(client_nic, opcode=opcode) if e.get("status_num", 0) == 0]

    writes = lambda: [p for p in tr.packets("rx", server_nic, opcode="RDMA_WRITE") if in_table(p)]
    lab.trace_check("the values went into the table with RDMA WRITE packets, and the client saw them complete "
                    "(trace: pkt_rx with RETH, cqe)",
                    lambda: len(writes()) >= len(KEYS) and len(completed("RDMA_WRITE")) >= len(KEYS),
                    lambda: "the server's NIC received %d RDMA WRITE packets into the table (with its rkey and "
                    "an address inside it) and the client polled %d successful RDMA_WRITE completions, %d of "
                    "each expected. Step 4: kv_put posts a signalled IBV_WR_RDMA_WRITE with "
                    "wr.rdma.remote_addr = table address + slot * 64 and wr.rdma.rkey = the table's rkey, and "
                    "waits for its completion" % (len(writes()), len(completed("RDMA_WRITE")), len(KEYS)),
                    weight=3, core=True)
    reads = lambda: [p for p in tr.packets("rx", server_nic, opcode="RDMA_READ_REQUEST") if in_table(p)]
    lab.trace_check("the values came back with RDMA READ, and the client saw them complete "
                    "(trace: READ requests and responses, cqe)",
                    lambda: len(reads()) >= len(KEYS) and
                    len(tr.packets("tx", server_nic, opcode="READ_RESPONSE")) >= len(KEYS) and
                    len(completed("RDMA_READ")) >= len(KEYS),
                    lambda: "the server's NIC received %d RDMA READ requests for the table and the client polled "
                    "%d successful RDMA_READ completions, %d of each expected. Step 5: kv_get posts a signalled "
                    "IBV_WR_RDMA_READ from the slot's remote address into a local, LOCAL_WRITE-registered "
                    "buffer, and waits for its completion" % (len(reads()), len(completed("RDMA_READ")), len(KEYS)),
                    weight=3, core=True)

    def moved_one_sided():
        """What the absence checks need to have happened: WRITEs and READs into the table."""
        return len(writes()) >= len(KEYS) and len(reads()) >= len(KEYS)

    not_moved = ("the values did not move by RDMA WRITE and READ (%d WRITE packets, %d READ requests into the "
                 "table), so there is nothing to judge yet")

    def cpu_involvement():
        bad = [] if moved_one_sided() else [not_moved % (len(writes()), len(reads()))]
        sends = tr.packets("rx", server_nic, opcode="SEND")
        if sends:
            bad.append("%d SEND packets reached the server (%s)" % (len(sends), sends[0]["opcode"]))
        posted = tr.wqes(server_nic)
        if posted:
            bad.append("the server posted %d work requests (%s)" % (len(posted), posted[0].get("opcode")))
        return bad

    lab.problems_check("the values moved one-sided and no SEND reached the server: its CPU never touched the table",
                       cpu_involvement,
                       "The lab is one-sided: the client moves the values with RDMA WRITE and READ, the server only "
                       "registers the table, sends its address and rkey over TCP and waits; do not SEND requests "
                       "for the server's CPU to serve",
                       weight=2, core=True)

    lab.requests_ran_check("RDMA WRITEs and READs ran without a remote access error (trace: error NAKs, error "
                           "completions)", tr, server_nic, [("RDMA WRITE", "RDMA_WRITE"),
                                                            ("RDMA READ", "RDMA_READ_REQUEST")],
                           "there is no access to judge yet",
                           "A REMOTE_ACCESS_ERR NAK means the rkey, the address range or the MR's or QP's access "
                           "flags do not allow the operation (steps 1 and 2)", weight=1)

    # The student's programs against the reference ones: the table's address and rkey must
    # travel as conn.h's struct endpoint says, for any correct peer.
    lab.up(2)
    ref_s, my_c = kv_run(lab, ref["server"], lab.bin("client"), seed, ("reference server", "your client"))
    my_s, ref_c = kv_run(lab, lab.bin("server"), ref["client"], seed, ("your server", "reference client"))
    lab.down()
    lab.check("your client works with the reference server",
              my_c.rc == 0 and pairs(my_c.out, "client: get") == want and table(ref_s.out) == want,
              lambda: "it did not: %s; %s" % (my_c.tail(3), ref_s.tail(3)), weight=2, core=True)
    lab.check("your server works with the reference client",
              ref_c.rc == 0 and pairs(ref_c.out, "client: get") == want and table(my_s.out) == want,
              lambda: "it did not: %s; %s. The server must publish the table's address, rkey and size "
              "in c.me (step 3)" % (my_s.tail(3), ref_c.tail(3)), weight=2, core=True)
