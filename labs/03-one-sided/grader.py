#!/usr/bin/env python3
"""Lab 3 grader: the student's client (simnic1) puts 8 key-value pairs into the server's table
(simnic0) and gets them back. Passing needs more than the right output: the trace must show
the table registered for remote access, the values carried by RDMA WRITE packets into the
table's address range with its rkey, read back by RDMA READ, and no SEND reaching the server
(its CPU never touches the table). Arguments: see labs/common/simnic_lab.py."""
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


with Lab(__file__, "Lab 3: one-sided RDMA WRITE and READ") as lab:
    lab.build(["server", "client"])
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
              lambda: "expected %d values like %s = %s; %s" % (len(want), KEYS[0], want[KEYS[0]], cli.tail()))
    lab.check("the values are in the server's table at the end (the server prints them)",
              s.rc == 0 and table(s.out) == want,
              lambda: "the server's table holds %d of %d values; %s" % (
                  sum(table(s.out).get(k) == v for k, v in want.items()), len(want), s.tail()))

    def table_mr():
        remote = [m for m in tr.mrs(server_nic) if "REMOTE_WRITE" in m.get("access", "")
                  and "REMOTE_READ" in m.get("access", "")]
        return remote[0] if remote else None

    lab.trace_check("the server registered its table for REMOTE_WRITE and REMOTE_READ (trace: mr_create)",
                    lambda: table_mr() is not None,
                    lambda: "no MR of the server allows both (its MRs allow: %s). Step 1: ibv_reg_mr the table with "
                    "IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ" % (
                        ", ".join(m.get("access", "") for m in tr.mrs(server_nic)) or "nothing"))

    def in_table(pkt):
        """A request aimed at one of the server's MRs: its rkey, an address inside it."""
        reth = pkt.get("reth") or {}
        m = tr.mr_with_rkey(reth.get("rkey"), server_nic)
        va = reth.get("va", "-1")
        va = int(va, 16) if isinstance(va, str) else va
        return m is not None and int(m["addr"], 16) <= va < int(m["addr"], 16) + m["length"]

    writes = lambda: [p for p in tr.packets("rx", server_nic, opcode="RDMA_WRITE") if in_table(p)]
    lab.trace_check("the values went into the table with RDMA WRITE packets (trace: pkt_rx with RETH)",
                    lambda: len(writes()) >= len(KEYS),
                    lambda: "the server's NIC received %d RDMA WRITE packets into the table (with its rkey and "
                    "an address inside it), %d expected. Step 4: kv_put posts IBV_WR_RDMA_WRITE with "
                    "wr.rdma.remote_addr = table address + slot * 64 and wr.rdma.rkey = the table's rkey" % (
                        len(writes()), len(KEYS)))
    reads = lambda: [p for p in tr.packets("rx", server_nic, opcode="RDMA_READ_REQUEST") if in_table(p)]
    lab.trace_check("the values came back with RDMA READ (trace: READ requests and responses)",
                    lambda: len(reads()) >= len(KEYS) and
                    len(tr.packets("tx", server_nic, opcode="READ_RESPONSE")) >= len(KEYS),
                    lambda: "the server's NIC received %d RDMA READ requests for the table, %d expected. "
                    "Step 5: kv_get posts IBV_WR_RDMA_READ from the slot's remote address into a local, "
                    "LOCAL_WRITE-registered buffer" % (len(reads()), len(KEYS)))

    def cpu_involvement():
        bad = []
        sends = tr.packets("rx", server_nic, opcode="SEND")
        if sends:
            bad.append("%d SEND packets reached the server (%s)" % (len(sends), sends[0]["opcode"]))
        posted = tr.wqes(server_nic)
        if posted:
            bad.append("the server posted %d work requests (%s)" % (len(posted), posted[0].get("opcode")))
        return bad

    lab.trace_check("no SEND reached the server: its CPU never touched the table", lambda: not cpu_involvement(),
                    lambda: "; ".join(cpu_involvement()) + ". The lab is one-sided: the client moves the values "
                    "with RDMA WRITE and READ, the server only registers the table, sends its address and "
                    "rkey over TCP and waits; do not SEND requests for the server's CPU to serve")
    lab.trace_check("no remote access error (trace: error NAKs, error completions)",
                    lambda: not tr.error_naks() and not tr.error_cqes(),
                    lambda: "; ".join(["%s: %s" % (n.get("code"), n.get("rule")) for n in tr.error_naks()][:2] +
                                      ["%s completed with %s" % (e["nic"], e.get("status")) for e in tr.error_cqes()][:2])
                    + ". A REMOTE_ACCESS_ERR NAK means the rkey, the address range or the MR's or QP's access "
                    "flags do not allow the operation (steps 1 and 2)")

    # The student's programs against the reference ones: the table's address and rkey must
    # travel as conn.h's struct endpoint says, for any correct peer.
    lab.up(2)
    ref_s, my_c = kv_run(lab, ref["server"], lab.bin("client"), seed, ("reference server", "your client"))
    my_s, ref_c = kv_run(lab, lab.bin("server"), ref["client"], seed, ("your server", "reference client"))
    lab.down()
    lab.check("your client works with the reference server",
              my_c.rc == 0 and pairs(my_c.out, "client: get") == want and table(ref_s.out) == want,
              lambda: "it did not: %s; %s" % (my_c.tail(3), ref_s.tail(3)))
    lab.check("your server works with the reference client",
              ref_c.rc == 0 and pairs(ref_c.out, "client: get") == want and table(my_s.out) == want,
              lambda: "it did not: %s; %s. The server must publish the table's address, rkey and size "
              "in c.me (step 3)" % (my_s.tail(3), ref_c.tail(3)))
