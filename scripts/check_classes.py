#!/usr/bin/env python3
"""No class over MAX_MEMBERS members in the NIC's core, simnic/core (issue 27 point 1).

A member is one declaration in the class body: a data member, a member function (declared or
defined there), a nested type, a constructor or destructor, `= default`/`= delete` included.
Friend declarations, access specifiers, `using` and `static_assert` are not members. Only
`class` bodies are counted: a `struct` here is a record (a table row, a wire layout, a set of
counters) whose fields are its point. ctest runs this (tests "class_size_*"). --list prints the
count of every class in simnic/, shim/, rdmacm/ and viz/, checked or not.

usage: check_classes.py SOURCE_DIR [--list]   check the tree (--list: print every class's count)
       check_classes.py --self-test           check that a planted large class is caught, and only it
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_functions import ROOTS, SOURCE_EXT, THIRD_PARTY, strip_code  # noqa: E402

MAX_MEMBERS = 45  # issue 27: "no class in core has more than ~40 members"
CHECKED = ("simnic/core/",)  # the folders the limit holds in; io's NicServer and UdpPort are not there yet

CLASS_HEAD = re.compile(r"(?<![\w])(?<!enum )class\s+(?:\[\[[^\]]*\]\]\s*)?([A-Za-z_]\w*)\s*(?:final\s*)?(?::[^;{]*)?\{")
NOT_MEMBERS = re.compile(r"^(?:friend|using|static_assert)\b")
ACCESS = re.compile(r"\b(?:public|private|protected)\s*:(?!:)")
NESTED_TYPE = re.compile(r"^(?:template\s*<.*>\s*)?(?:enum|struct|class|union)\b")
FUNCTION_HEAD = re.compile(r"\)\s*(?:const|volatile|noexcept|override|final|mutable|&&|&|->[^{]*|\s)*$|\)\s*:.*$")


def members_in_body(code, start):
    """Counts the members of the class body whose '{' is at code[start - 1]; returns
    (count, index after the closing brace)."""
    count, depth, stmt, i = 0, 0, [], start
    while i < len(code):
        c = code[i]
        if c == "{":
            depth += 1
            if depth == 1:
                head = ACCESS.sub("", "".join(stmt)).strip()
                stmt.append(" {BODY} ")
                i += 1
                continue
        elif c == "}":
            if depth == 0:
                return count, i + 1
            depth -= 1
            if depth == 0:
                text = "".join(stmt)
                head = ACCESS.sub("", text[: text.rfind("{BODY}")]).strip()
                if FUNCTION_HEAD.search(head) and not NESTED_TYPE.match(head):
                    if not NOT_MEMBERS.match(head):
                        count += 1
                    stmt = []
            i += 1
            continue
        elif c == ";" and depth == 0:
            head = ACCESS.sub("", "".join(stmt)).strip()
            if head and not NOT_MEMBERS.match(head):
                count += 1
            stmt = []
            i += 1
            continue
        if depth == 0:
            stmt.append(c)
        i += 1
    return count, i


def classes_in(text):
    """(line, name, members) of every class defined in text."""
    code = strip_code(text)
    found = []
    for m in CLASS_HEAD.finditer(code):
        n, _ = members_in_body(code, m.end())
        found.append((code.count("\n", 0, m.start()) + 1, m.group(1), n))
    return found


def tree_sources(root):
    for base in ROOTS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, base)):
            dirnames[:] = sorted(d for d in dirnames if d not in THIRD_PARTY and not d.startswith("."))
            for f in sorted(filenames):
                if f.endswith(SOURCE_EXT):
                    yield os.path.join(dirpath, f)


def check(root, listing=False):
    errors = []
    for path in tree_sources(root):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8", errors="replace") as f:
            for line, name, n in classes_in(f.read()):
                if listing:
                    print(f"{n:4d} {rel}:{line}: {name}")
                if n > MAX_MEMBERS and rel.startswith(CHECKED):
                    errors.append(f"{rel}:{line}: class {name} has {n} members (at most {MAX_MEMBERS}): "
                                  "split it into parts by concern (docs/architecture.md, 'Inside the core')")
    return errors


def self_test():
    members = "\n".join(f"  int f{i}(int x) const;" for i in range(MAX_MEMBERS))
    files = {
        "simnic/core/ok.h": "class Ok {\n public:\n" + members + "\n  friend class X;\n  using T = int;\n};\n",
        "simnic/core/big.h": "class Big final : public Base {\n public:\n" + members
                             + "\n  void g() { if (1) { h(); } }\n};\n",
        "simnic/core/mixed.h": "struct Rows {\n" + members + members + "\n};\nenum class E { kA, kB };\n"
                               "class Small {\n  struct Nested { int a; int b; };\n  Small() : a_{1} {}\n"
                               "  int a_{0};\n  std::vector<int> v_ = {1, 2};\n};\n",
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        errors = check(root)
        counts = {name: n for rel in files for _, name, n in classes_in(files[rel])}
    expected = ["simnic/core/big.h:1: class Big has 46"]
    ok = len(errors) == 1 and errors[0].startswith(expected[0]) and counts.get("Small") == 4 \
        and counts.get("Ok") == MAX_MEMBERS
    if not ok:
        print("check_classes self-test failed:", errors, counts)
        return 1
    print("check_classes self-test: the planted class over the limit was caught, and only it")
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        return self_test()
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    errors = check(sys.argv[1], listing="--list" in sys.argv[2:])
    for e in errors:
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
