#!/usr/bin/env python3
"""Lab 8 grader: RC survives a lossy link, and the student can read what happened.

Part 1 runs the student's reliable_lab on NICs that lose 10% of their packets and checks
from the trace that every message arrived intact through go-back-N, ACK timeouts and RNR
NAKs, with no error completion.

Part 2 reads the trace the student recorded (mytrace/simnic0.jsonl and simnic1.jsonl, README
step 4) and the answers in answers.txt, and compares each answer with what that very trace
shows. The answers are recomputed here from the events, never taken from the program.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from simnic_lab import Lab, Trace  # noqa: E402
import more_checks as mc  # noqa: E402

MESSAGES, SIZE = 16, 4096
# builds 1, delivery 3 (core), lost packets 1, receives/go-back-N/RNR 2 each (core), answers.txt
# exists 1, mytrace/ 1, seven answers 1 each (core).
POINTS = 20


def sender_qp(t):
    """(nic, qpn) of the QP that sent the SEND packets (A), or (None, None)."""
    for p in t.packets("tx", opcode="SEND"):
        return p["nic"], p["qp"]
    return None, None


def requests(t, nic, qp):
    return [p for p in t.packets("tx", nic, qp=qp) if "SEND" in p.get("opcode", "")]


def resent(t, nic, qp):
    """Request packets whose PSN the QP had already sent once."""
    seen, out = set(), []
    for p in requests(t, nic, qp):
        if p["psn"] in seen:
            out.append(p)
        seen.add(p["psn"])
    return out


def peer_nic(t, nic):
    return next((n for n in t.nics() if n != nic), None)


# The questions of README step 5: key -> (how to compute it from a trace, what it means).
def answers_from(t):
    nic, qp = sender_qp(t)
    other = peer_nic(t, nic)
    seq_naks = [e for e in t.events("nak", other) if e.get("code") == "PSN_SEQ_ERR"]
    return {
        "sends_sent": len(requests(t, nic, qp)),
        "resent_packets": len(resent(t, nic, qp)),
        "dropped": len([p for p in t.events("pkt_tx") if p.get("fault") == "drop"]),
        "first_nak_psn": seq_naks[0]["psn"] if seq_naks else "none",
        "seq_naks": len(seq_naks),
        "rnr_naks": len([e for e in t.events("nak", other) if e.get("code") == "RNR"]),
        "ack_timeouts": len(t.events("timer", nic, qp=qp, what="ack_timeout", action="fired")),
    }


MEANING = {
    "sends_sent": "every SEND packet (FIRST/MIDDLE/LAST) simnic0's QP put on the wire, resends included: "
                  "pkt_tx events of simnic0 whose opcode contains SEND",
    "resent_packets": "SEND packets with a PSN that had been sent before (the orange 'R' boxes in simnic-viz), "
                      "not the number of 'retransmit' events (one of those can resend many packets)",
    "dropped": "packets the fault injector dropped on both NICs (pkt_tx with \"fault\":\"drop\"), ACKs and NAKs "
               "included",
    "first_nak_psn": "the PSN in the first NAK 'PSN sequence error' simnic1 sent (a 'nak' event with code "
                     "PSN_SEQ_ERR): the first PSN it was missing",
    "seq_naks": "NAKs with code PSN_SEQ_ERR that simnic1 sent",
    "rnr_naks": "NAKs with code RNR that simnic1 sent",
    "ack_timeouts": "times simnic0's ACK timer fired (timer events what=ack_timeout action=fired)",
}


def grade(lab):
    lab.build(["reliable_lab"])
    lab.up(2, extra=["--loss", "0.1", "--seed", str(os.getpid() % 1000 + 1)])
    run = lab.run([lab.bin("reliable_lab"), "-a", lab.device(0), "-b", lab.device(1), "-g", lab.gid_index,
                   "-n", MESSAGES, "-s", SIZE], timeout=50, name="reliable_lab")
    lab.down()
    t = lab.trace
    # Exit 0 alone proves nothing (a program that does nothing exits 0): B's receives must be in
    # the trace too (on a real device there is no trace to ask).
    delivered = lab.device_mode or len(good_receives(t)) == MESSAGES
    lab.check("reliable_lab delivers every message intact on a lossy link",
              run.rc == 0 and not run.timed_out and delivered, lambda: explain_failure(t, run),
              weight=3, core=True)
    check_run_trace(lab, t)
    check_answers(lab)


def explain_failure(t, run):
    errors = t.error_cqes()
    if errors:
        status = errors[0].get("status")
        if status == mc.WC_RETRY_EXC_ERR:
            return ("A's SEND failed with 'transport retry counter exceeded' (step 2): on a lossy link a QP must be "
                    "allowed to resend; set retry_cnt to 7 and a timeout around 12-14")
        if status == mc.WC_RNR_RETRY_EXC_ERR:
            return ("A's SEND failed with 'RNR retry counter exceeded' (step 2): B's last receive is posted late on "
                    "purpose; set rnr_retry to 7 (retry forever) so A waits for it")
        return "a completion failed with '%s': %s" % (status, run.tail(4))
    if run.rc == 0 and not run.timed_out:
        return ("it exited 0, but B completed %d receives of %d bytes, not %d: post the receives and the SENDs"
                % (len(good_receives(t)), SIZE, MESSAGES))
    return run.tail(6)


def good_receives(t):
    return [e for e in t.cqes(status=mc.WC_SUCCESS, opcode="RECV") if e.get("byte_len") == SIZE]


def check_run_trace(lab, t):
    nic, qp = sender_qp(t)
    recvs = good_receives(t)
    lab.trace_check("the link really lost packets", lambda: any(p.get("fault") == "drop" for p in t.events("pkt_tx")),
                    "no packet was dropped: the grader's NICs run with --loss 0.1, so a program that sends its "
                    "messages loses some (did it send any?)", weight=1)
    lab.trace_check("B completed %d receives of %d bytes, no error completion" % (MESSAGES, SIZE),
                    lambda: len(recvs) == MESSAGES and not t.error_cqes(),
                    lambda: "%d good receives, error completions: %s" % (
                        len(recvs), sorted({e.get("status") for e in t.error_cqes()}) or "none"), weight=2, core=True)
    lab.trace_check("go-back-N: after a NAK, A resent from the PSN the NAK named",
                    lambda: went_back(t, nic, qp),
                    lambda: "no NAK-triggered resend starting at the NAK's PSN (with 10% loss there should be several): " + (
                        "the connection died first (see the first failed check)" if t.error_cqes()
                        else "did A post every SEND at once, before waiting for completions?"), weight=2, core=True)
    lab.trace_check("RNR: B answered RNR NAK and A resent after the RNR timer",
                    lambda: mc.naks(t, "RNR") and t.events("retransmit", nic, qp=qp, cause="rnr"),
                    lambda: "no RNR NAK and RNR resend: " + (
                        "the connection died before the last message (see the first failed check)" if t.error_cqes()
                        else "keep the last receive posted late (after the others arrived)"), weight=2, core=True)


def went_back(t, nic, qp):
    """A retransmit after a NAK whose next request packet carries the NAK's PSN."""
    events = t.by_nic.get(nic, [])
    for i, e in enumerate(events):
        if e.get("kind") == "retransmit" and e.get("qp") == qp and e.get("cause") == "nak_seq":
            nxt = next((p for p in events[i + 1:] if p.get("kind") == "pkt_tx" and p.get("qp") == qp
                        and "SEND" in p.get("opcode", "")), None)
            if nxt and nxt.get("psn") == e.get("psn"):
                return True
    return False


def recorded_trace_problem(t):
    """Why the recorded trace cannot be graded, or None."""
    if set(t.nics()) != {"simnic0", "simnic1"}:
        return "mytrace/ must hold simnic0.jsonl and simnic1.jsonl (found: %s)" % (t.nics() or "nothing")
    for nic, evs in t.by_nic.items():
        if [e.get("seq") for e in evs] != list(range(1, len(evs) + 1)):
            return "%s.jsonl is not a whole trace (its seq numbers have gaps): record it again" % nic
    if sender_qp(t)[0] != "simnic0":
        return "no SEND packets from simnic0 in mytrace/: record a run of reliable_lab (step 4)"
    if not any(p.get("fault") == "drop" for p in t.events("pkt_tx")):
        return "no packet was dropped in mytrace/: start the NICs with --loss 0.05 (step 4)"
    return None


def check_answers(lab):
    """Judged from the files alone (answers.txt, mytrace/), so on a real device too."""
    path = lab.source_path("answers.txt")  # as built: a broken/NAME.patch may change it
    tdir = lab.source_path("mytrace")
    given = mc.read_kv_file(path) if path else None
    lab.check("answers.txt exists", given is not None, "write answers.txt next to your code (step 5)", weight=1)
    t = Trace.load(tdir) if tdir else Trace({})
    problem = recorded_trace_problem(t) if tdir else "no mytrace/ folder: record your own run into it (step 4)"
    lab.check("mytrace/ holds a recorded lossy run of reliable_lab", problem is None, problem or "", weight=1)
    truth = answers_from(t) if problem is None else {key: None for key in MEANING}
    for key, value in truth.items():
        answer = (given or {}).get(key, "")
        ok = value is not None and answer.strip().lower() == str(value).lower()
        if value is None:
            hint = "%s: nothing to compare it with until mytrace/ holds a recorded run (step 4)" % key
        elif answer.upper() in ("", "TODO"):
            hint = "%s: no answer yet (step 5)" % key
        else:
            hint = "%s: you answered %s, mytrace/ shows otherwise. Count %s" % (key, answer, MEANING[key])
        lab.check("answer %s" % key, ok, hint, weight=1, core=True)


if __name__ == "__main__":
    with Lab(__file__, "Lab 8: reliability on a lossy link", points=POINTS) as lab:
        grade(lab)
