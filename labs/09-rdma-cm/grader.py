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
# builds 1; eleven core checks of 2 points: listen, the two programs' messages, private data,
# handshake, CM events, disconnect, QP walk, receives, and each program against the reference.
POINTS = 23


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
    cli = lab.run([client, "-a", lab.addr(1), "-p", port, "-n", MESSAGES, lab.addr(0)], timeout=15, name=names[1])
    return lab.wait_all([srv], 10)[0], cli, listening


def ping_pong_session(lab, server, client, names):
    """One ping_pong on NICs of its own, so that its trace shows that pair alone; returns
    (server result, client result, the session's trace)."""
    lab.up(2, mtu=4096)
    srv, cli, _ = ping_pong(lab, server, client, names)
    lab.down()
    return srv, cli, lab.trace


def ended_itself(r):
    return r.rc == 0 and not r.timed_out


def received(lab, tr, nic):
    """At least MESSAGES receives completed successfully on `nic` (always true with --device:
    there is no trace to ask)."""
    return lab.device_mode or len(tr.cqes(nic, status="success", opcode="RECV")) >= MESSAGES


with Lab(__file__, "Lab 9: rdma_cm, the connection manager", points=POINTS) as lab:
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

    def mads(nic, name):
        return tr.events("cm_rx", nic=nic, cm=name)

    def handshake_problems():
        want = [(server_nic, "REQ", "the client's rdma_connect"), (client_nic, "REP", "the server's rdma_accept"),
                (server_nic, "RTU", "the client's NIC, once the REP arrived")]
        return ["no %s reached %s (sent by %s)" % (m, nic, who) for nic, m, who in want if not mads(nic, m)]

    # What the programs print counts only with the trace showing it happened: a program that
    # does nothing exits 0, and a line is easy to print.
    listened = lab.device_mode or bool(tr.events("cm_state", nic=server_nic, to="LISTEN"))
    lab.check("the server listens (rdma_bind_addr, rdma_listen) and says so", listening and listened,
              lambda: ("it did not: " + s.tail() if not listening else "it said so, but its NIC saw no rdma_listen")
              + ". Step 1: create the event channel and an id, bind it to the address and port, listen",
              weight=2, core=True)
    lab.check("the client gets all %d replies and exits 0" % MESSAGES,
              ended_itself(cli) and all_ok(cli.out, "client: reply", MESSAGES) and received(lab, tr, client_nic),
              lambda: "it did not: " + cli.tail(), weight=2, core=True)
    lab.check("the server receives all %d messages and exits 0" % MESSAGES,
              ended_itself(s) and all_ok(s.out, "server: message", MESSAGES) and received(lab, tr, server_nic),
              lambda: "it did not: " + s.tail(), weight=2, core=True)
    lab.check("each side got the other's private data",
              'the client said "lab 9 client says hello"' in s.out and 'the server said "lab 9 server says hello"'
              in cli.out and (lab.device_mode or not handshake_problems()),
              "the hello strings did not arrive: pass conn_param(hello) to rdma_connect and rdma_accept (step 4)",
              weight=2, core=True)

    lab.problems_check("the CM handshake went over the wire: REQ, REP, RTU (trace: cm_rx)", handshake_problems,
                       "Steps 2-4: resolve the address and route, then rdma_connect on the client and rdma_accept "
                       "on the server", weight=2, core=True)

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

    lab.problems_check("each side got the CM events of a whole connection (trace: cm_event)",
                       events_problems, weight=2, core=True)

    # A client that dies or is killed while connected makes its NIC send a DREQ too; only a live
    # id that disconnected gets its DISCONNECTED event, and the client must have ended by itself.
    lab.trace_check("the client disconnected: DREQ to the server, DREP back",
                    lambda: bool(mads(server_nic, "DREQ")) and bool(mads(client_nic, "DREP"))
                    and bool(tr.events("cm_event", nic=client_nic, event="DISCONNECTED")) and ended_itself(cli),
                    "no DREQ/DREP on the wire, or the client was not there to see it: the client calls "
                    "rdma_disconnect after the last reply, and both sides wait for RDMA_CM_EVENT_DISCONNECTED "
                    "(step 5)", weight=2, core=True)

    def walk_problems():
        bad = []
        for who, nic in (("server", server_nic), ("client", client_nic)):
            qps = tr.qps(nic, "RC")
            states = tr.qp_states(nic, qps[0][1]) if qps else []
            if states[:4] != WALK:
                bad.append("the %s's QP went %s" % (who, tr.qp_walk(nic, "RC")))
        return bad

    lab.problems_check("each QP went RESET -> INIT -> RTR -> RTS without a hand-written modify (trace: qp_state)",
                       walk_problems,
                       "rdma_create_qp leaves the QP in INIT (step 3); rdma_connect/rdma_accept move it to RTR and "
                       "RTS from the CM exchange", weight=2, core=True)

    def errors():
        # Receives still posted when the connection closes are flushed: that is how they come back.
        return [e for e in tr.error_cqes() if "Flush" not in str(e.get("status"))]

    lab.trace_check("every SEND reached a posted receive, without error completions",
                    lambda: len(tr.cqes(server_nic, status="success", opcode="RECV")) >= MESSAGES
                    and len(tr.cqes(client_nic, status="success", opcode="RECV")) >= MESSAGES
                    and not errors(),
                    lambda: "; ".join("%s completed wr_id %s with %s" % (e["nic"], e.get("wr_id"), e.get("status"))
                                      for e in errors()[:4]) or "receives missing: post them before the "
                    "connection is established (make_qp does)", weight=2, core=True)

    # Each pairing on NICs of its own: the trace of each shows what that pair really moved.
    ref_s, my_c, tr_c = ping_pong_session(lab, ref["server"], lab.bin("client"), ("reference server", "your client"))
    my_s, ref_c, tr_s = ping_pong_session(lab, lab.bin("server"), ref["client"], ("your server", "reference client"))
    lab.check("your client works with the reference server",
              ended_itself(my_c) and all_ok(my_c.out, "client: reply", MESSAGES) and ended_itself(ref_s)
              and received(lab, tr_c, client_nic),
              lambda: "it did not: %s; %s" % (my_c.tail(3), ref_s.tail(3)), weight=2, core=True)
    lab.check("your server works with the reference client",
              ended_itself(my_s) and all_ok(my_s.out, "server: message", MESSAGES) and ended_itself(ref_c)
              and received(lab, tr_s, server_nic),
              lambda: "it did not: %s; %s" % (my_s.tail(3), ref_c.tail(3)), weight=2, core=True)
