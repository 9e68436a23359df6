#!/usr/bin/env python3
"""Lab 1 grader: runs the student's devinfo on two simnic NICs (MTU 2048, addresses chosen at
random per run, so nothing can be hard-coded) and compares what it prints with the truth
(ibv_devinfo -v, and the NICs' addresses), then checks in the trace that the program really
opened and closed every device. Weights and core checks: the table in README.md (keep them in
step). Arguments: see labs/common/simnic_lab.py."""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from simnic_lab import Lab  # noqa: E402

MTU = 2048
# What each `prints <field> of every device` check is worth (all core: they are the lab).
FIELD_WEIGHTS = {"node_guid": 2, "phys_port_cnt": 1, "max_qp": 1, "max_cqe": 1, "port 1 state": 2,
                 "port 1 active_mtu": 2, "port 1 max_mtu": 1, "port 1 link_layer": 1, "port 1 gid 0": 2}


def devinfo_truth(text):
    """{device: {field: value}} from `ibv_devinfo -v`."""
    truth, dev = {}, None
    for line in text.splitlines():
        m = re.match(r"hca_id:\s*(\S+)", line)
        if m:
            dev = truth.setdefault(m.group(1), {})
            continue
        m = re.match(r"\s*(node_guid|max_qp|max_cqe|phys_port_cnt|max_mtu|active_mtu|link_layer|state):\s*(\S+)", line)
        if m and dev is not None and m.group(1) not in dev:
            dev[m.group(1)] = m.group(2)
    return truth


def student_devices(text):
    """{device: [its indented lines]} from the student's output."""
    devs, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"device\s+(\S+)\s*$", line)
        if m:
            cur = devs.setdefault(m.group(1), [])
        elif cur is not None and line.strip():
            cur.append(" ".join(line.split()))
    return devs


def gid_of(addr):
    a, b, c, d = (int(x) for x in addr.split("."))
    return "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % (a, b, c, d)


def field(lines, key):
    for l in lines:
        if l.startswith(key + " "):
            return l[len(key) + 1:].strip()
    return None


with Lab(__file__, "Lab 1: devices, ports, GIDs", points=20) as lab:
    lab.build(["devinfo"], weight=1)
    lab.up(2, mtu=MTU)
    truth_run = lab.run(["ibv_devinfo", "-v"], timeout=20, name="ibv_devinfo")
    truth = devinfo_truth(truth_run.out) if truth_run.rc == 0 else {}
    r = lab.run([lab.bin("devinfo")], timeout=20, name="devinfo")
    pid = lab.procs[-1].popen.pid
    lab.down()
    devs = student_devices(r.out)
    names = [lab.device(i) for i in range(2)] if not lab.device_mode else [lab.args.device]

    lab.check("devinfo runs and exits with status 0", r.rc == 0, "it did not: " + r.tail(), weight=1)
    lab.check("lists every device (a `device NAME` line each)", all(n in devs for n in names),
              lambda: "expected %s, found %s. Step 1: loop over all n entries of ibv_get_device_list(&n) "
              "and print ibv_get_device_name() of each" % (", ".join(names), ", ".join(devs) or "none"),
              weight=3, core=True)

    def per_device(key, expected_of, hint):
        bad = []
        for i, n in enumerate(names):
            want = expected_of(i, n)
            got = field(devs.get(n, []), key)
            if got is None or (want is not None and got != want):
                bad.append("%s: printed %s, expected %r" % (n, "nothing" if got is None else repr(got), want or "a value"))
        lab.check("prints `%s` of every device" % key, not bad, lambda: "; ".join(bad) + ". " + hint,
                  weight=FIELD_WEIGHTS[key], core=True)

    t = lambda key: (lambda i, n: truth.get(n, {}).get(key))
    per_device("node_guid", t("node_guid"),
               "Step 2: ibv_get_device_guid() returns the GUID in network byte order (__be64): "
               "convert it with be64toh() and print four groups of four hex digits")
    per_device("phys_port_cnt", t("phys_port_cnt"), "Step 2: ibv_query_device() fills struct ibv_device_attr")
    per_device("max_qp", t("max_qp"), "Step 2: ibv_query_device() fills struct ibv_device_attr")
    per_device("max_cqe", t("max_cqe"), "Step 2: ibv_query_device() fills struct ibv_device_attr")
    per_device("port 1 state", lambda i, n: "active" if not lab.device_mode else None,
               "Step 3: ibv_query_port(ctx, 1, &attr), then print ibv_port_state_str(attr.state)")
    per_device("port 1 active_mtu",
               lambda i, n: str(MTU) if not lab.device_mode else truth.get(n, {}).get("active_mtu"),
               "Step 4: active_mtu is an enum ibv_mtu (IBV_MTU_2048 is 4, not 2048): convert it to bytes")
    per_device("port 1 max_mtu", t("max_mtu"),
               "Step 4: max_mtu is an enum ibv_mtu too (IBV_MTU_4096 is 5): convert it to bytes")
    per_device("port 1 link_layer", t("link_layer"),
               "Step 3: attr.link_layer is IBV_LINK_LAYER_ETHERNET (print Ethernet) on RoCE NICs")
    per_device("port 1 gid 0", lambda i, n: gid_of(lab.addr(i)) if not lab.device_mode else None,
               "Step 5: ibv_query_gid(ctx, 1, 0, &gid) and print its 16 raw bytes as eight groups of four "
               "hex digits (lab_gid_str() does it); on RoCE GID 0 holds the port's IPv4 address ::ffff:a.b.c.d")

    def opened_and_closed():
        bad = []
        for n in names:
            opens = lab.trace.events("ctx_open", n, pid=pid)
            closes = lab.trace.events("ctx_close", n, pid=pid)
            if not opens:
                bad.append("%s was never opened" % n)
            elif len(closes) < len(opens):
                bad.append("%s was opened but not closed" % n)
        return bad

    lab.problems_check("the NICs saw the program open and close every device (trace: ctx_open/ctx_close)",
                       opened_and_closed,
                       "Step 1 and 6: ibv_open_device() each device, query it, then ibv_close_device() it and "
                       "ibv_free_device_list() the list", weight=2, core=True)
