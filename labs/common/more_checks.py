"""more_checks: trace queries shared by labs 05-08 on top of simnic_lab.Trace.

Kept apart from simnic_lab.py (the grading library every lab uses) so labs 05-08 can grow
their own questions without touching it. Standard library only.
"""

# ibv_wc_status_str() text, as simnicd writes it in cqe/error events (docs/trace-format.md).
WC_SUCCESS = "success"
WC_REM_ACCESS_ERR = "remote access error"
WC_RNR_RETRY_EXC_ERR = "RNR retry counter exceeded"
WC_RETRY_EXC_ERR = "transport retry counter exceeded"
WC_WR_FLUSH_ERR = "Work Request Flushed Error"
WC_LOC_PROT_ERR = "local protection error"


def recoveries(trace):
    """(nic, qp, seq of the RESET) for every QP that went ERR -> RESET -> INIT -> RTR -> RTS
    (the RESET, INIT, RTR and RTS steps by modify_qp), in trace order."""
    out = []
    for nic in trace.nics():
        per_qp = {}
        for e in trace.events("qp_state", nic):
            per_qp.setdefault(e.get("qp"), []).append(e)
        for qp, trs in per_qp.items():
            for i, t in enumerate(trs):
                if t.get("from") != "ERR" or t.get("to") != "RESET":
                    continue
                rest = [x.get("to") for x in trs[i + 1:]
                        if not (x.get("from") == x.get("to") == "RESET")][:3]
                if rest == ["INIT", "RTR", "RTS"]:
                    out.append((nic, qp, t.get("seq", 0)))
    return out


def forced_errors(trace, nic=None):
    """qp_state events into ERR (or SQE) that the NIC forced (cause is not modify_qp)."""
    return [e for e in trace.events("qp_state", nic) if e.get("to") in ("ERR", "SQE")
            and e.get("cause") != "modify_qp"]


def cqes_after(trace, nic, seq, status=None, opcode=None):
    """cqe events of `nic` recorded after event `seq` of that NIC."""
    return [e for e in trace.cqes(nic, status=status, opcode=opcode) if e.get("seq", 0) > seq]


def refused_modifies(trace):
    """error events with status EINVAL: ibv_modify_qp calls the NIC refused, with the rule."""
    return [e for e in trace.events("error") if e.get("status") == "EINVAL"]


def naks(trace, code=None):
    return [e for e in trace.events("nak") if code is None or e.get("code") == code]


def aeth_packets(trace, cls, direction="tx"):
    """Acknowledge packets whose AETH class is `cls` ("ACK", "RNR_NAK", "NAK")."""
    return [p for p in trace.packets(direction) if (p.get("aeth") or {}).get("class") == cls]


def qp_ctx(trace):
    """{(nic, qp): ctx} from qp_create events."""
    return {(e["nic"], e["qp"]): e.get("ctx") for e in trace.events("qp_create")}


def doorbells_by_ctx(trace):
    """{(nic, ctx): number of doorbell events}."""
    out = {}
    for e in trace.events("doorbell"):
        key = (e["nic"], e.get("ctx"))
        out[key] = out.get(key, 0) + 1
    return out


def read_kv_file(path):
    """`key: value` lines of a text file (answers.txt); '#' starts a comment. {} if missing."""
    out = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if ":" in line:
                    k, v = line.split(":", 1)
                    out[k.strip().lower()] = v.strip()
    except OSError:
        return None
    return out
