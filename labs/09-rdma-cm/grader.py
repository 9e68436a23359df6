#!/usr/bin/env python3
"""Lab 9 grader: lab 2's ping-pong over a connection rdma_cm made. The student's server (on
simnic0) listens on an rdma_cm port and the client (on simnic1) connects with private data;
both exchange 5 messages of 4000 bytes and the client disconnects. The trace must show the
IBA CM exchange on the wire (REQ, REP, RTU, then DREQ, DREP), the events each program got, and
each QP walked to RTS by the CM exchange. Then each program runs once more against the
reference solution's peer. Arguments: see labs/common/simnic_lab.py."""
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from simnic_lab import Lab  # noqa: E402

MESSAGES = 5
WALK = ["RESET", "INIT", "RTR", "RTS"]


def all_ok(out, what, n):
    return all(re.search(r"^%s %d ok" % (what, i), out, re.M) for i in range(n))


def wait_output(proc, pattern, timeout):
    """Waits until the background program printed `pattern` (or ended, or the time is up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if re.search(pattern, proc.output(), re.M):
            return True
        if not proc.running():
            return False
        time.sleep(0.05)
    return False


def ping_pong(lab, server, client, names=("server", "client")):
    """Server on NIC 0's address, client from NIC 1's; returns (server result, client result, listened)."""
    port = lab.free_port()
    srv = lab.start([server, "-a", lab.addr(0), "-p", port, "-n", MESSAGES], name=names[0])
    listening = wait_output(srv, r"^server: listening", 10)
    cli = lab.run([client, "-a", lab.addr(1), "-p", port, "-n", MESSAGES, lab.addr(0)], timeout=25, name=names[1])
    return lab.wait_all([srv], 10)[0], cli, listening


with Lab(__file__, "Lab 9: rdma_cm, the connection manager") as lab:
    if lab.device_mode:
        lab.note("lab 9 needs the IP addresses of two RDMA ports; on real hardware run the programs by hand "
                 "(README: 'On real hardware')")
    lab.build(["server", "client"])
    ref = lab.build_reference(["server", "client"])
    lab.up(2, mtu=4096)
    s, cli, listening = ping_pong(lab, lab.bin("server"), lab.bin("client"))
    lab.down()
    tr = lab.trace
    server_nic, client_nic = lab.device(0), lab.device(1)

    lab.check("the server listens (rdma_bind_addr, rdma_listen) and says so", listening,
              lambda: "it did not: " + s.tail() + ". Step 1: create the event channel and an id, bind it to the "
              "address and port, listen")
    lab.check("the client gets all %d replies and exits 0" % MESSAGES,
              cli.rc == 0 and all_ok(cli.out, "client: reply", MESSAGES), lambda: "it did not: " + cli.tail())
    lab.check("the server receives all %d messages and exits 0" % MESSAGES,
              s.rc == 0 and all_ok(s.out, "server: message", MESSAGES), lambda: "it did not: " + s.tail())
    lab.check("each side got the other's private data",
              'the client said "lab 9 client says hello"' in s.out and 'the server said "lab 9 server says hello"'
              in cli.out,
              "the hello strings did not arrive: pass conn_param(hello) to rdma_connect and rdma_accept (step 4)")

    def mads(nic, name):
        return tr.events("cm_rx", nic=nic, cm=name)

    def handshake_problems():
        want = [(server_nic, "REQ", "the client's rdma_connect"), (client_nic, "REP", "the server's rdma_accept"),
                (server_nic, "RTU", "the client's NIC, once the REP arrived")]
        return ["no %s reached %s (sent by %s)" % (m, nic, who) for nic, m, who in want if not mads(nic, m)]

    lab.trace_check("the CM handshake went over the wire: REQ, REP, RTU (trace: cm_rx)",
                    lambda: not handshake_problems(),
                    lambda: "; ".join(handshake_problems()) + ". Steps 2-4: resolve the address and route, then "
                    "rdma_connect on the client and rdma_accept on the server")

    def events_problems():
        bad = []
        # The NIC traces the events it sends to the library; a client's CONNECT_RESPONSE (the REP)
        # is what librdmacm turns into ESTABLISHED once it has sent the RTU, as with the kernel.
        for who, nic, wanted in (("client", client_nic, ["CONNECT_RESPONSE", "DISCONNECTED"]),
                                 ("server", server_nic, ["CONNECT_REQUEST", "ESTABLISHED", "DISCONNECTED"])):
            got = [e.get("event") for e in tr.events("cm_event", nic=nic)]
            missing = [w for w in wanted if w not in got]
            if missing:
                bad.append("the %s never got %s (it got %s)" % (who, ", ".join(missing), ", ".join(got) or "nothing"))
        return bad

    lab.trace_check("each side got the CM events of a whole connection (trace: cm_event)",
                    lambda: not events_problems(), lambda: "; ".join(events_problems()))

    lab.trace_check("the client disconnected: DREQ to the server, DREP back",
                    lambda: bool(mads(server_nic, "DREQ")) and bool(mads(client_nic, "DREP")),
                    "no DREQ/DREP on the wire: the client calls rdma_disconnect after the last reply, and both "
                    "sides wait for RDMA_CM_EVENT_DISCONNECTED (step 5)")

    def walk_problems():
        bad = []
        for who, nic in (("server", server_nic), ("client", client_nic)):
            qps = tr.qps(nic, "RC")
            states = tr.qp_states(nic, qps[0][1]) if qps else []
            if states[:4] != WALK:
                bad.append("the %s's QP went %s" % (who, tr.qp_walk(nic, "RC")))
        return bad

    lab.trace_check("each QP went RESET -> INIT -> RTR -> RTS without a hand-written modify (trace: qp_state)",
                    lambda: not walk_problems(),
                    lambda: "; ".join(walk_problems()) + ". rdma_create_qp leaves the QP in INIT (step 3); "
                    "rdma_connect/rdma_accept move it to RTR and RTS from the CM exchange")

    def errors():
        # Receives still posted when the connection closes are flushed: that is how they come back.
        return [e for e in tr.error_cqes() if "Flush" not in str(e.get("status"))]

    lab.trace_check("every SEND reached a posted receive, without error completions",
                    lambda: len(tr.cqes(server_nic, status="success", opcode="RECV")) >= MESSAGES
                    and len(tr.cqes(client_nic, status="success", opcode="RECV")) >= MESSAGES
                    and not errors(),
                    lambda: "; ".join("%s completed wr_id %s with %s" % (e["nic"], e.get("wr_id"), e.get("status"))
                                      for e in errors()[:4]) or "receives missing: post them before the "
                    "connection is established (make_qp does)")

    lab.up(2, mtu=4096)
    ref_s, my_c, _ = ping_pong(lab, ref["server"], lab.bin("client"), ("reference server", "your client"))
    my_s, ref_c, _ = ping_pong(lab, lab.bin("server"), ref["client"], ("your server", "reference client"))
    lab.down()
    lab.check("your client works with the reference server",
              my_c.rc == 0 and all_ok(my_c.out, "client: reply", MESSAGES) and ref_s.rc == 0,
              lambda: "it did not: %s; %s" % (my_c.tail(3), ref_s.tail(3)))
    lab.check("your server works with the reference client",
              my_s.rc == 0 and all_ok(my_s.out, "server: message", MESSAGES) and ref_c.rc == 0,
              lambda: "it did not: %s; %s" % (my_s.tail(3), ref_c.tail(3)))
