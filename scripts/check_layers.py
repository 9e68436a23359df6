#!/usr/bin/env python3
"""The layer table of docs/architecture.md, enforced.

Every #include in a layer's folder must name a header of that layer or of a layer it may use;
the build runs this before compiling anything (CMakeLists.txt: target check_layers), so a
wrong include fails the build, and ctest runs it with --self-test (test "layering"). A few
headers a layer may never see, not even through another header it includes (NEVER): the
core keeps to the shared-memory contract, and the control protocol is simnic/service's.

usage: check_layers.py SOURCE_DIR        check the tree; exit 1 and list what is wrong
       check_layers.py --self-test       check that a planted wrong include is caught
"""
import os
import re
import sys
import tempfile

# Folder -> the folders (or single headers) it may include besides its own. Transitive rules
# are spelled out: a folder lists everything it includes directly.
LAYERS = {
    "simnic/abi": [],
    "simnic/proto": [],
    "simnic/core": ["simnic/proto", "simnic/abi"],
    "simnic/service": ["simnic/core", "simnic/proto", "simnic/abi"],
    "simnic/io": ["simnic/service", "simnic/core", "simnic/proto", "simnic/abi"],
    "simnic/daemon": ["simnic/io", "simnic/service", "simnic/core", "simnic/proto", "simnic/abi"],
    "simnic/client": ["simnic/abi"],
    # netif.h (the host's interfaces) and proc_stat.h sit with io but have no Asio: `simnic up`
    # and `simnic down` need them too.
    "simnic/cli": ["simnic/client", "simnic/proto", "simnic/abi", "simnic/io/netif.h", "simnic/io/proc_stat.h"],
    # The packet codec too: a post that sends itself builds its packet (shim/direct_packet.cc).
    "shim": ["simnic/abi", "simnic/proto"],
    "rdmacm": ["simnic/abi"],
    "viz/model": [],
    "viz/app": ["viz/model", "simnic/client", "simnic/abi"],
}
# Headers a layer may not include, directly or through any header of the tree it includes: the
# control protocol (its messages, and the message I/O of its socket) stays out of the core.
NEVER = {
    "simnic/core": {
        "simnic/abi/control.h": "the control protocol is simnic/service's: the core's verbs take plain arguments",
        "simnic/abi/seqpacket.h": "the control socket's message I/O is simnic/io's and the clients'",
    },
}
# Folders whose sources are not layered (they may include anything).
FREE = ["tests", "labs", "examples", "tools", "scripts", "build", "docs"]
# System headers only some layers may include: Asio only in io, ImGui/GLFW only in the viz app.
SYSTEM_ONLY = {
    "boost/asio": ["simnic/io"],
    "imgui": ["viz/app"],
    "backends/imgui": ["viz/app"],
    "GLFW/": ["viz/app"],
}
PROJECT_ROOTS = ("simnic/", "shim/", "rdmacm/", "viz/", "tests/", "labs/", "examples/")
SOURCE_EXT = (".h", ".hpp", ".cc", ".cpp", ".c")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def layer_of(rel):
    best = None
    for layer in LAYERS:
        if rel.startswith(layer + "/") and (best is None or len(layer) > len(best)):
            best = layer
    return best


def allowed(layer, target):
    for ok in [layer] + LAYERS[layer]:
        if target == ok or target.startswith(ok + "/"):
            return True
    return False


def includes_of(root, rel):
    """(line number, "<" or '"', target) of every #include in rel."""
    found = []
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                found.append((lineno, *m.groups()))
    return found


def brings(root, header, cache):
    """Every project header `header` includes, through any chain of project headers (itself too)."""
    if header in cache:
        return cache[header]
    cache[header] = {header}  # a cycle stops here
    reached = {header}
    if os.path.isfile(os.path.join(root, header)):
        for _, kind, target in includes_of(root, header):
            if kind == '"' and target.startswith(PROJECT_ROOTS):
                reached |= brings(root, target, cache)
    cache[header] = reached
    return reached


def never_included(root, layer, target, cache):
    """The reasons `target` is refused to `layer` because of what it brings (NEVER)."""
    problems = []
    for banned, why in NEVER.get(layer, {}).items():
        if banned in brings(root, target, cache):
            via = "" if banned == target else f", which brings {banned}"
            problems.append(f"{via}: {layer} may never include {banned} ({why})")
    return problems


def check_file(root, rel, layer, cache):
    errors = []
    for lineno, kind, target in includes_of(root, rel):
        where = f"{rel}:{lineno}: {layer} includes {target}"
        if kind == '"' and target.startswith(PROJECT_ROOTS):
            if not allowed(layer, target):
                errors.append(f"{where}: not in what {layer} may use ({', '.join(LAYERS[layer]) or 'nothing else'})")
            else:
                errors.extend(where + p for p in never_included(root, layer, target, cache))
            continue
        for prefix, layers in SYSTEM_ONLY.items():
            if target.startswith(prefix) and layer not in layers:
                errors.append(f"{where}: only {', '.join(layers)} may include <{prefix}...>")
    return errors


def check_tree(root):
    errors = []
    cache = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and not (rel_dir == "." and d in FREE)]
        for name in filenames:
            if not name.endswith(SOURCE_EXT):
                continue
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            layer = layer_of(rel)
            if layer is None:
                if rel.startswith(("simnic/", "viz/")) and rel.count("/") >= 2:
                    errors.append(f"{rel}: in no layer: add its folder to LAYERS in scripts/check_layers.py "
                                  "and to the table in docs/architecture.md")
                continue
            errors.extend(check_file(root, rel, layer, cache))
    return errors


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def self_test():
    """A clean tree passes; each kind of wrong include is reported, once, at its line."""
    with tempfile.TemporaryDirectory() as root:
        write(root, "simnic/core/device.cc", '#include "simnic/core/device.h"\n#include "simnic/proto/psn.h"\n')
        write(root, "simnic/core/cm/agent.h", '#include "simnic/abi/cm_bodies.h"\n#include "simnic/abi/rings.h"\n')
        write(root, "simnic/abi/cm_bodies.h", '#include "simnic/abi/wire_safe.h"\n')
        write(root, "simnic/abi/cm.h", '#include "simnic/abi/cm_bodies.h"\n#include "simnic/abi/control.h"\n')
        write(root, "simnic/abi/control.h", '#include "simnic/abi/wire_safe.h"\n')
        write(root, "simnic/service/control_dispatch.cc", '#include "simnic/abi/cm.h"\n#include "simnic/core/device.h"\n')
        write(root, "simnic/io/udp_port.cc", '#include <boost/asio/ip/udp.hpp>\n#include "simnic/core/device.h"\n')
        write(root, "viz/app/main.cc", '#include <imgui.h>\n#include "simnic/client/nic_client.h"\n')
        write(root, "tests/unit/core/any_test.cc", '#include "simnic/io/udp_port.h"\n')
        clean = check_tree(root)
        if clean:
            return [f"a clean tree was refused: {clean}"]
        write(root, "simnic/core/bad.cc", '// core must not see io\n#include "simnic/io/udp_port.h"\n')
        write(root, "viz/model/bad.h", '#include "simnic/cli/cli.h"\n')
        write(root, "simnic/proto/bad.cc", "#include <boost/asio/post.hpp>\n")
        write(root, "simnic/newlayer/x.cc", "int x;\n")
        # The control protocol in the core: named, and brought by another abi header.
        write(root, "simnic/core/wire.cc", '#include "simnic/abi/rings.h"\n#include "simnic/abi/control.h"\n')
        write(root, "simnic/core/cm_bad.h", '#include "simnic/abi/cm.h"\n')
        # The service may not reach up into io.
        write(root, "simnic/service/bad.cc", '#include "simnic/io/nic_server.h"\n')
        found = check_tree(root)
        expected = ["simnic/core/bad.cc:2:", "viz/model/bad.h:1:", "simnic/proto/bad.cc:1:", "simnic/newlayer/x.cc:",
                    "simnic/core/wire.cc:2:", "simnic/core/cm_bad.h:1:", "simnic/service/bad.cc:1:"]
        problems = [f"not reported: {e}" for e in expected if not any(f.startswith(e) for f in found)]
        if len(found) != len(expected):
            problems.append(f"expected {len(expected)} findings, got {found}")
        return problems


def main(argv):
    if argv[1:] == ["--self-test"]:
        problems = self_test()
        for p in problems:
            print(f"check_layers self-test: {p}", file=sys.stderr)
        if not problems:
            print("check_layers self-test: every planted wrong include was caught")
        return 1 if problems else 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    errors = check_tree(argv[1])
    for e in errors:
        print(f"layering: {e}", file=sys.stderr)
    if errors:
        print("layering: see the layer table in docs/architecture.md", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
