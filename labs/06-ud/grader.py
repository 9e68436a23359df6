#!/usr/bin/env python3
"""Lab 6 grader: service discovery over UD, judged from the datagrams on the wire.

Three NICs: the reference registry (the lab's solution: lab.build_reference) on simnic0, the student's
service on simnic1 and the student's client on simnic2. Checks from the trace: the UD QPs
reached RTS; every message of the protocol travelled as a UD SEND with a DETH whose Q_Key is
the one the receiving QP accepts (REGISTER and LOOKUP to the registry, the answer back, the
REQUEST sent straight to the service, the REPLY back to the client); no datagram was dropped
for a wrong Q_Key; and the client printed the service's reply.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from simnic_lab import Lab  # noqa: E402

REGISTRY_QKEY, SERVICE_QKEY, CLIENT_QKEY = 0x52454749, 0x53525643, 0x434C4E54
# builds 1 + service exit 1 + client's reply 2 + five datagram checks 2 each + no Q_Key drop 1.
POINTS = 15


def ud_rx(t, nic, src_addr, qkey):
    """UD SEND packets with a DETH that `nic` received from `src_addr` with Q_Key `qkey`."""
    return [p for p in t.packets("rx", nic, opcode="UD_SEND") if p.get("src") == src_addr
            and (p.get("deth") or {}).get("qkey") == qkey]


def qkey_drops(t, nic=None):
    """The NIC's drops of a datagram for its Q_Key: "qkey" in its drop table (simnic/core/observe/drop_reasons.h)."""
    return [e for e in t.events("pkt_drop", nic) if e.get("drop") == "qkey"]


def drop_why(e):
    return e.get("detail") or e.get("reason", "")


def drop_hint(t, nic):
    drops = qkey_drops(t, nic)
    return (" The NIC dropped a datagram: " + drop_why(drops[0])) if drops else ""


def grade(lab):
    lab.build(["ud_lab"])
    reference = lab.build_reference(["ud_lab"])["ud_lab"]  # the registry is the reference peer
    lab.up(3)
    boot = os.path.join(lab.tmp, "registry.addr")
    text = "hello from the grader %d" % (os.getpid() % 10000)
    common = ["-g", lab.gid_index, "-f", boot]
    reg = lab.start([reference, "registry", "-d", lab.device(0), "-c", "1"] + common, name="registry")
    svc = lab.start([lab.bin("ud_lab"), "service", "-d", lab.device(1), "-n", "1"] + common + ["echo"], name="service")
    cli = lab.run([lab.bin("ud_lab"), "client", "-d", lab.device(2)] + common + ["echo", text], timeout=25, name="client")
    svc_r = svc.wait(10)
    reg.wait(3)  # it ends after answering one lookup; if none came, it is stopped here
    lab.down()
    t = lab.trace
    a_reg, a_svc, a_cli = lab.addr(0), lab.addr(1), lab.addr(2)
    # Exit 0 and the right words count only with the datagrams that make them true on the wire
    # (a program that does nothing exits 0 too); on a real device there is no trace to ask.
    registered = lab.device_mode or bool(ud_rx(t, "simnic0", a_svc, REGISTRY_QKEY))
    replied = lab.device_mode or bool(ud_rx(t, "simnic2", a_svc, CLIENT_QKEY))
    lab.check("the service registers and answers (exit 0)", svc_r.rc == 0 and not svc_r.timed_out and registered
              and replied, lambda: svc_r.tail(4) + ("" if registered and replied else
                                                    "; the trace shows no REGISTER reaching the registry or no REPLY "
                                                    "reaching the client"), weight=1)
    lab.check("the client gets the service's reply", cli.rc == 0 and ("reply from" in cli.out and text.upper() in cli.out)
              and replied, lambda: "expected a line 'client: reply from QPN ...: %s'; %s" % (text.upper(), cli.tail(4))
              + ("" if replied else "; the trace shows no REPLY from the service reaching the client"),
              weight=2, core=True)
    lab.trace_check("the service's and the client's UD QPs reached RTS with a Q_Key",
                    lambda: all(ud_rts(t, nic) for nic in ("simnic1", "simnic2")),
                    "a UD QP of the service or the client never reached RTS (step 1): INIT needs IBV_QP_QKEY "
                    "(with PKEY_INDEX and PORT), RTR only the state, RTS the SQ PSN", weight=2, core=True)
    lab.trace_check("REGISTER reached the registry as a UD SEND with the registry's Q_Key",
                    lambda: ud_rx(t, "simnic0", a_svc, REGISTRY_QKEY),
                    lambda: "no UD SEND from the service's NIC reached the registry with Q_Key 0x%x (steps 2-3): make an "
                    "AH to the registry's GID and set wr.wr.ud.ah, remote_qpn and remote_qkey.%s"
                    % (REGISTRY_QKEY, drop_hint(t, "simnic0")), weight=2, core=True)
    lab.trace_check("the registry's answer reached the service and the client (Q_Keys matched)",
                    lambda: ud_rx(t, "simnic1", a_reg, SERVICE_QKEY) and ud_rx(t, "simnic2", a_reg, CLIENT_QKEY),
                    lambda: "the registry's answers did not arrive: the REGISTER/LOOKUP must carry the sender's own "
                    "Q_Key in msg.qkey (the registry answers with it)." + drop_hint(t, "simnic1") + drop_hint(t, "simnic2"),
                    weight=2, core=True)
    lab.trace_check("the REQUEST went straight to the service with the service's Q_Key",
                    lambda: ud_rx(t, "simnic1", a_cli, SERVICE_QKEY),
                    lambda: "no UD SEND from the client's NIC reached the service with Q_Key 0x%x (step 5): use the "
                    "GID, QPN and Q_Key of the registry's answer.%s" % (SERVICE_QKEY, drop_hint(t, "simnic1")),
                    weight=2, core=True)
    lab.trace_check("the REPLY came back to the client, addressed from the receive completion",
                    lambda: ud_rx(t, "simnic2", a_svc, CLIENT_QKEY),
                    lambda: "no UD SEND from the service reached the client with Q_Key 0x%x (step 4): answer with "
                    "ibv_create_ah_from_wc, wc.src_qp and the Q_Key the request carried.%s"
                    % (CLIENT_QKEY, drop_hint(t, "simnic2")), weight=2, core=True)
    # An absence check: it counts only when the service and the client really sent datagrams.
    lab.trace_check("no datagram was dropped for a wrong Q_Key",
                    lambda: both_sent(t) and not qkey_drops(t),
                    lambda: ("%s: %s: a UD QP accepts only datagrams carrying its own Q_Key"
                             % (qkey_drops(t)[0]["nic"], drop_why(qkey_drops(t)[0]))) if qkey_drops(t) else
                    "the service and the client did not both send datagrams, so nothing shows their Q_Keys were "
                    "right (steps 1-3)", weight=1, core=True)


def both_sent(t):
    """The service's NIC and the client's NIC each put at least one UD SEND on the wire."""
    return all(t.packets("tx", nic, opcode="UD_SEND") for nic in ("simnic1", "simnic2"))


def ud_rts(t, nic):
    for q in t.events("qp_create", nic, type="UD"):
        trs = t.qp_transitions(nic, q["qp"])
        if any(e.get("to") == "RTS" for e in trs) and any("IBV_QP_QKEY" in e.get("mask", "") for e in trs):
            return True
    return False


if __name__ == "__main__":
    with Lab(__file__, "Lab 6: UD datagrams and address handles", points=POINTS) as lab:
        grade(lab)
