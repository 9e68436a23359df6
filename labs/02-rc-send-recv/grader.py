#!/usr/bin/env python3
"""Lab 2 grader: the student's server (on simnic0) and client (on simnic1) exchange QPN, PSN
and GID over TCP, walk their QPs RESET->INIT->RTR->RTS and ping-pong 4000-byte messages. The
trace must show the state walk, the path MTU of 1024 the README asks for (each message in four
packets although the port allows 4096), the PSNs the programs say they exchanged, and every
SEND accepted by the peer. Then each program runs once more against the reference solution's
peer. A check passes only on evidence that what it names happened (the MTU and PSN checks need
the packets they judge). Weights and core checks: the table in README.md (keep them in step).
Arguments: see labs/common/simnic_lab.py."""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from simnic_lab import Lab  # noqa: E402

MESSAGES = 5
PACKETS_PER_MESSAGE = 4  # 4000 bytes at path MTU 1024
WALK = ["RESET", "INIT", "RTR", "RTS"]
RTR_FIELDS = ["IBV_QP_AV", "IBV_QP_PATH_MTU", "IBV_QP_DEST_QPN", "IBV_QP_RQ_PSN"]


def endpoints(out):
    """{"local": (qpn, psn), "remote": (qpn, psn)} as the program printed them."""
    eps = {}
    for m in re.finditer(r"^(local|remote)\s+qpn\s+(\d+)\s+psn\s+(\d+)", out, re.M):
        eps[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return eps


def all_ok(out, what, n):
    return all(re.search(r"^%s %d ok" % (what, i), out, re.M) for i in range(n))


def ping_pong(lab, server, client, names=("server", "client")):
    """Runs `server` on NIC 0 and `client` on NIC 1; returns (server result, client result, listened)."""
    port = lab.free_port()
    common = ["-g", lab.gid_index, "-p", port, "-n", MESSAGES]
    srv = lab.start([server, "-d", lab.device(0)] + common, name=names[0])
    listening = lab.wait_listen(port, 10, srv)
    cli = lab.run([client, "-d", lab.device(1)] + common + ["127.0.0.1"], timeout=25, name=names[1])
    return lab.wait_all([srv], 5)[0], cli, listening


def not_listening(server):
    """Why the server never listened. server.c (given) listens with lab_tcp_accept once
    conn_create() returns, so what stopped it came before: its output says what."""
    if server.timed_out:
        return ("the server was still running but never listened: it is stuck before server.c's "
                "lab_tcp_accept() call, in your conn_create(): " + server.tail())
    return "the server stopped before it listened: " + server.tail()


with Lab(__file__, "Lab 2: RC SEND/RECV, connecting by hand", points=20) as lab:
    lab.build(["server", "client"], weight=1)
    ref = lab.build_reference(["server", "client"])
    lab.up(2, mtu=4096)
    s, cli, listening = ping_pong(lab, lab.bin("server"), lab.bin("client"))
    lab.down()
    tr = lab.trace

    lab.check("the server listens on the TCP port given with -p", listening, lambda: not_listening(s), weight=1)
    lab.check("the client gets all %d replies and exits 0" % MESSAGES,
              cli.rc == 0 and all_ok(cli.out, "client: reply", MESSAGES), "it did not: " + cli.tail(),
              weight=2, core=True)
    lab.check("the server receives all %d messages and exits 0" % MESSAGES,
              s.rc == 0 and all_ok(s.out, "server: message", MESSAGES), "it did not: " + s.tail(),
              weight=2, core=True)

    sides = [("server", lab.device(0), s), ("client", lab.device(1), cli)]

    def qp_of(nic):
        qps = tr.qps(nic, "RC")
        return qps[0][1] if qps else None

    def each_side(problem):
        """The problems `problem(who, nic)` finds on each side (None where it finds none)."""
        return lambda: [p for p in (problem(who, nic) for who, nic, _ in sides) if p]

    def walk_problem(who, nic):
        qp = qp_of(nic)
        states = tr.qp_states(nic, qp) if qp is not None else []
        by_hand = all(t.get("cause") == "modify_qp" for t in tr.qp_transitions(nic, qp)[:3])
        if states[:4] != WALK or not by_hand:
            return "the %s's QP went %s" % (who, tr.qp_walk(nic, "RC"))
        return None

    lab.problems_check("each QP went RESET -> INIT -> RTR -> RTS (trace: qp_state)", each_side(walk_problem),
                       "Steps 2-5: ibv_modify_qp to INIT, then RTR, then RTS, in this order, with the attribute "
                       "masks of the README", weight=2, core=True)

    def rtr_problem(who, nic):
        rtr = [t for t in tr.qp_transitions(nic, qp_of(nic)) if t.get("to") == "RTR"]
        mask = rtr[0].get("mask", "").split("|") if rtr else []
        missing = [f for f in RTR_FIELDS if f not in mask]
        if not rtr or missing:
            return "%s: %s" % (who, "no INIT->RTR" if not rtr else "mask lacks " + ", ".join(missing))
        return None

    lab.problems_check("INIT -> RTR names the peer: address, QPN, first PSN, path MTU", each_side(rtr_problem),
                       "Step 4: the RTR modify carries IBV_QP_AV (ah_attr.grh.dgid = the peer's GID), "
                       "IBV_QP_DEST_QPN, IBV_QP_RQ_PSN and IBV_QP_PATH_MTU", weight=1, core=True)

    def mtu_problem(who, nic):
        data = tr.packets("tx", nic, opcode="SEND")
        big = [p for p in data if p.get("payload", 0) > 1024]
        if not big and len(data) < MESSAGES * PACKETS_PER_MESSAGE:
            return ("the %s's NIC sent %d SEND packets, %d expected (%d messages of 4 packets): too few to "
                    "measure (see the checks above)" % (who, len(data), MESSAGES * PACKETS_PER_MESSAGE, MESSAGES))
        if big:
            return ("the %s's NIC sent %d-byte packets (%s): set path_mtu = IBV_MTU_1024 in the RTR attributes "
                    "(step 4), as the README asks, even though the port's active MTU is 4096"
                    % (who, big[0]["payload"], big[0]["opcode"]))
        return None

    lab.problems_check("path MTU 1024: every 4000-byte message went as 4 packets (trace: pkt_tx)",
                       each_side(mtu_problem), weight=2, core=True)

    def psn_problems():
        bad = []
        eps = {who: endpoints(r.out) for who, _, r in sides}
        for (who, nic, _), (peer, _, _) in zip(sides, reversed(sides)):
            mine, theirs = eps[who].get("local"), eps[peer].get("remote")
            wire = tr.first_psn(nic, qp_of(nic))
            if not mine:
                bad.append("the %s did not print `local qpn N psn P`" % who)
            elif mine[0] != qp_of(nic):
                bad.append("the %s says its QPN is %d, its NIC says %s" % (who, mine[0], qp_of(nic)))
            elif wire is None:
                bad.append("the %s's QP sent no request packet, so the PSN it used is unknown (see the checks "
                           "above)" % who)
            elif mine[1] != wire:
                bad.append("the %s says it starts at PSN %d, but its first packet carried PSN %d (sq_psn)"
                           % (who, mine[1], wire))
            elif theirs != mine:
                bad.append("the %s sent qpn/psn %s but the %s received %s" % (who, mine, peer, theirs))
        return bad

    lab.problems_check("the QPN and PSN each side sent over TCP are the ones its QP used", psn_problems,
                       "Step 3: fill struct endpoint with qp->qp_num and the PSN you then give to RTS as sq_psn; "
                       "print both lines as the README shows", weight=2, core=True)

    def random_psn_problems():
        firsts = [tr.first_psn(nic, qp_of(nic)) for _, nic, _ in sides]
        if None in firsts:
            return ["a side sent no request packet, so its first PSN is unknown (see the checks above)"]
        if firsts[0] == firsts[1] or 0 in firsts:
            return ["the first PSNs were %d and %d: pick each side's first PSN with lrand48() & 0xffffff "
                    "(24 bits) instead of a constant (step 3)" % tuple(firsts)]
        return []

    lab.problems_check("each side starts from its own random PSN", random_psn_problems, weight=1, core=True)

    def delivery_problems():
        bad = []
        for (who, nic, _), (peer, peer_nic, _) in zip(sides, reversed(sides)):
            recvs = tr.cqes(peer_nic, status="success", opcode="RECV")
            if len(recvs) < MESSAGES:
                bad.append("the %s's receive queue completed %d of %d SENDs from the %s"
                           % (peer, len(recvs), MESSAGES, who))
        for e in tr.error_cqes():
            bad.append("%s completed wr_id %s with %s" % (e["nic"], e.get("wr_id"), e.get("status")))
        # A PSN sequence NAK alone is how RC recovers a lost packet (Trace.error_naks).
        for n in tr.events("nak"):
            if bad or n in tr.error_naks():
                bad.append("%s NAKed PSN %s: %s (%s)" % (n["nic"], n.get("psn"), n.get("code"), n.get("rule", "")))
        arrived_unused = any(tr.packets("rx", peer_nic, opcode="SEND") and not tr.cqes(peer_nic, opcode="RECV")
                             for (_, _, _), (_, peer_nic, _) in zip(sides, reversed(sides)))
        if tr.events("nak", code="PSN_SEQ_ERR") or (arrived_unused and not tr.events("nak", code="RNR")):
            bad.insert(0, "SEND packets arrived but were not accepted (a PSN sequence NAK, or packets taken for "
                       "duplicates): the responder expected another PSN. Each side's rq_psn (RTR) must be the "
                       "PSN its peer sent over TCP")
        return bad[:6]

    lab.problems_check("every SEND reached a posted receive on the other side, without errors", delivery_problems,
                       "Steps 4 and 6: rq_psn = the peer's PSN, dest_qp_num = the peer's QPN, and receives posted "
                       "before the peer sends", weight=2, core=True)

    # The student's programs against the reference ones: the exchange over TCP and the QP
    # walk must interoperate with any correct peer, not only with each other.
    lab.up(2, mtu=4096)
    ref_s, my_c, _ = ping_pong(lab, ref["server"], lab.bin("client"), ("reference server", "your client"))
    my_s, ref_c, _ = ping_pong(lab, lab.bin("server"), ref["client"], ("your server", "reference client"))
    lab.down()
    lab.check("your client works with the reference server",
              my_c.rc == 0 and all_ok(my_c.out, "client: reply", MESSAGES) and ref_s.rc == 0,
              lambda: "it did not: %s; %s. Your endpoint must be filled and exchanged exactly as conn.h's "
              "struct endpoint says (step 3)" % (my_c.tail(3), ref_s.tail(3)), weight=2, core=True)
    lab.check("your server works with the reference client",
              my_s.rc == 0 and all_ok(my_s.out, "server: message", MESSAGES) and ref_c.rc == 0,
              lambda: "it did not: %s; %s" % (my_s.tail(3), ref_c.tail(3)), weight=2, core=True)
