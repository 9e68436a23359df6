#!/usr/bin/env python3
"""Lab 5 grader: each error the README asks for must really have happened on the NICs.

errors_lab runs once with every scenario; the checks then read the NICs' trace: the error
completions (cqe events) with their statuses, the NAK packets the responder sent, the refused
ibv_modify_qp (an EINVAL error event), the ACK timeouts and retransmissions, and the QP state
transitions to ERR and back through RESET -> INIT -> RTR -> RTS. A program that prints the
right words without provoking the errors fails.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from simnic_lab import Lab  # noqa: E402
import more_checks as mc  # noqa: E402


def scenario_line(out, name):
    """The program's verdict line for one scenario ("ok", "FAILED" or None when absent)."""
    for line in out.splitlines():
        if line.startswith("scenario %s:" % name):
            return line.split(":", 1)[1].strip()
    return None


def grade(lab):
    lab.build(["errors_lab"])
    lab.up(2)
    run = lab.run([lab.bin("errors_lab"), "-a", lab.device(0), "-b", lab.device(1), "-g", lab.gid_index],
                  timeout=40, name="errors_lab")
    lab.down()
    t = lab.trace
    verdicts = {name: scenario_line(run.out, name) for name in STEP}
    # Exit 0 alone proves nothing (a program that does nothing exits 0): every scenario must
    # have reported, and the program must have ended by itself.
    lab.check("errors_lab runs every scenario and exits 0",
              run.rc == 0 and not run.timed_out and None not in verdicts.values(),
              lambda: "it reported: " + run.tail(8), weight=1)
    evidence = scenario_evidence(t)
    for name, verdict in verdicts.items():
        # The program's own "ok" counts only when the trace shows the scenario's error happened.
        proved = lab.device_mode or evidence[name]()
        lab.check("scenario %s reports ok" % name, verdict == "ok" and proved,
                  lambda name=name, verdict=verdict: report_hint(name, verdict) + refused_in(run, name),
                  weight=1)

    # 1. bad rkey
    lab.trace_check("bad rkey: the responder sent a NAK 'remote access error'",
                    lambda: mc.naks(t, "REMOTE_ACCESS_ERR") and mc.aeth_packets(t, "NAK"),
                    "no REMOTE_ACCESS_ERR NAK in the trace (step 1): post an RDMA WRITE to the peer's buffer "
                    "with an rkey the peer never registered (e.g. its MR's rkey ^ 0x5a5a00), not a bad lkey",
                    weight=2, core=True)
    lab.trace_check("bad rkey: a completion with IBV_WC_REM_ACCESS_ERR",
                    lambda: t.cqes(status=mc.WC_REM_ACCESS_ERR),
                    lambda: "no 'remote access error' CQE (step 1)" + (
                        "; there is a 'local protection error' CQE: your lkey was wrong, the rkey must be"
                        if t.cqes(status=mc.WC_LOC_PROT_ERR) else ""), weight=2, core=True)
    # 2. missing attribute
    lab.trace_check("missing attribute: the NIC refused an ibv_modify_qp with EINVAL",
                    lambda: any("missing" in e.get("rule", "") for e in mc.refused_modifies(t)),
                    "no refused modify_qp in the trace (step 2): call ibv_modify_qp INIT->RTR with "
                    "IBV_QP_DEST_QPN left out of the attribute mask, and expect EINVAL", weight=2, core=True)
    # 3. RNR
    lab.trace_check("RNR: the responder sent an RNR NAK",
                    lambda: mc.naks(t, "RNR") and mc.aeth_packets(t, "RNR_NAK"),
                    lambda: "no RNR NAK in the trace (step 3): SEND to a QP that has no receive posted"
                    + refused_in(run, "rnr"), weight=2, core=True)
    lab.trace_check("RNR: a completion with IBV_WC_RNR_RETRY_EXC_ERR",
                    lambda: t.cqes(status=mc.WC_RNR_RETRY_EXC_ERR),
                    lambda: "no 'RNR retry counter exceeded' CQE (step 3): " + (
                        "the RNR NAKs were there, but the sender retried: connect it with rnr_retry = 0 "
                        "(7 means retry forever)" if mc.naks(t, "RNR") else
                        "no RNR NAK came back to fail a SEND (see the check above)" + refused_in(run, "rnr")),
                    weight=2, core=True)
    # 4. retry exceeded
    lab.trace_check("dead peer: the ACK timer fired and the request was sent again",
                    lambda: t.events("timer", what="ack_timeout", action="fired")
                    and t.events("retransmit", cause="timeout"),
                    "no ACK timeout and no timeout retransmission in the trace (step 4): destroy the "
                    "peer's QP, then SEND to it with a small timeout (e.g. 8) and retry_cnt 1", weight=2, core=True)
    lab.trace_check("dead peer: a completion with IBV_WC_RETRY_EXC_ERR",
                    lambda: t.cqes(status=mc.WC_RETRY_EXC_ERR),
                    "no 'transport retry counter exceeded' CQE (step 4): after retry_cnt retries the "
                    "SEND fails with IBV_WC_RETRY_EXC_ERR; use retry_cnt 1, not 7, so it gives up quickly",
                    weight=2, core=True)
    # 5. flush
    lab.trace_check("flush: receives completed with IBV_WC_WR_FLUSH_ERR",
                    lambda: t.cqes(status=mc.WC_WR_FLUSH_ERR, opcode="RECV"),
                    "no flushed receive (step 5): post receives on B, then move B to IBV_QPS_ERR with ibv_modify_qp",
                    weight=2, core=True)
    lab.trace_check("flush: a send completed with IBV_WC_WR_FLUSH_ERR",
                    lambda: [e for e in t.cqes(status=mc.WC_WR_FLUSH_ERR) if e.get("opcode") != "RECV"],
                    "no flushed send (step 5): post a SEND on the QP while it is in ERR", weight=2, core=True)
    lab.trace_check("QPs were forced into ERR by the errors",
                    lambda: len(mc.forced_errors(t)) >= 3,
                    lambda: "only %d QP state change(s) to ERR caused by an error (want one each for the bad "
                    "rkey, RNR and retry scenarios)" % len(mc.forced_errors(t)), weight=2, core=True)
    # 6. recovery
    lab.trace_check("recovery: a QP went ERR -> RESET -> INIT -> RTR -> RTS",
                    lambda: mc.recoveries(t),
                    "no QP went from ERR back to RTS through RESET, INIT and RTR (step 6): from ERR the only "
                    "way back is ibv_modify_qp to IBV_QPS_RESET, then INIT, RTR, RTS with all their attributes",
                    weight=2, core=True)
    lab.trace_check("recovery: data moved again after the reset (successful SEND and RECV)",
                    lambda: recovered_traffic(t),
                    lambda: "after the last ERR -> RESET no SEND completed successfully with its matching RECV "
                    "(step 6): post a receive on B and a SEND on A once both are back in RTS" + invalid_moves(t),
                    weight=2, core=True)


def scenario_evidence(t):
    """{scenario: a function telling whether the trace shows the error the scenario provokes}."""
    return {
        "bad_rkey": lambda: bool(t.cqes(status=mc.WC_REM_ACCESS_ERR)),
        "missing_attr": lambda: any("missing" in e.get("rule", "") for e in mc.refused_modifies(t)),
        "rnr": lambda: bool(t.cqes(status=mc.WC_RNR_RETRY_EXC_ERR)),
        "retry": lambda: bool(t.cqes(status=mc.WC_RETRY_EXC_ERR)),
        "flush": lambda: bool(t.cqes(status=mc.WC_WR_FLUSH_ERR, opcode="RECV")),
        "recover": lambda: recovered_traffic(t),
    }


def report_hint(name, verdict):
    if verdict == "TODO":
        return "scenario %s: not written yet: step %d, the TODO in scenario_%s()" % (name, STEP[name], name)
    if verdict is None:
        return "scenario %s: the program stopped before it (see the first check)" % name
    if verdict == "ok":
        return ("scenario %s: the program said ok, but the trace does not show the error it provokes "
                "(see the scenario's trace checks below)" % name)
    return "scenario %s: it said %s" % (name, verdict)


def recovered_traffic(t):
    last = {}
    for nic, qp, seq in mc.recoveries(t):
        last[nic] = max(last.get(nic, 0), seq)
    ok_send = any(mc.cqes_after(t, nic, seq, status=mc.WC_SUCCESS, opcode="SEND") for nic, seq in last.items())
    ok_recv = any(mc.cqes_after(t, nic, seq, status=mc.WC_SUCCESS, opcode="RECV") for nic, seq in last.items())
    return ok_send and ok_recv


def invalid_moves(t):
    """Part of a hint: the transitions the NIC refused as invalid (e.g. ERR->INIT)."""
    bad = sorted({e["rule"].split(" ")[0] for e in mc.refused_modifies(t) if "not a valid QP transition" in e.get("rule", "")})
    if not bad:
        return ""
    return ("; the NIC refused %s: a QP reaches INIT only from RESET, so recover through RESET first "
            "(ibv_modify_qp to IBV_QPS_RESET, or qp_reset())" % ", ".join(bad))


def scenario_output(out, name):
    """The lines the program printed during one scenario: after the previous scenario's
    verdict line, up to this one's."""
    lines, start = out.splitlines(), 0
    for i, line in enumerate(lines):
        if line.startswith("scenario %s:" % name):
            return lines[start:i]
        if line.startswith("scenario "):
            start = i + 1
    return []


def refused_in(run, name):
    """Part of a hint: what simnic said during scenario `name` (a refused verb explains why the
    error the scenario wants never happened, e.g. a SEND posted while the QP was in RESET)."""
    said = [l.strip() for l in scenario_output(run.out, name) if l.strip().startswith("simnic:")]
    return "; during scenario %s: %s" % (name, " | ".join(said)) if said else ""


# builds 1 + runs 1 + six scenario reports 1 each + twelve trace checks 2 each (core).
POINTS = 32
STEP = {"bad_rkey": 1, "missing_attr": 2, "rnr": 3, "retry": 4, "flush": 5, "recover": 6}

if __name__ == "__main__":
    with Lab(__file__, "Lab 5: errors and the QP state machine", points=POINTS) as lab:
        grade(lab)
