#!/usr/bin/env python3
"""The course material (issue 24, point 7) is complete and its demos work.

For every lab folder labs/NN-topic/ with a README:
  - the README has a `## Learning objectives` section before `## Concepts`, with 3 to 6 items;
  - labs/NN-topic/teacher/answers.md has a `## Question K` heading with an answer under it for
    every numbered question K of the README's `## Questions` section, and no heading for a
    question the README does not ask (a renumbered README must renumber its key);
  - docs/course/NN-topic.md exists (the lecture notes) and has at least one ```sh demo block;
  - `simnic lab start N` does not copy teacher/ (the answer keys) into the student's folder.
Then every ```sh demo block of docs/course/*.md is run, one script per file, from the source
tree with `simnic` on PATH, a private SIMNIC_DIR and TMPDIR, the NICs moved to private loopback
addresses (`simnic up N` gets `--addr`, 127.0.0.1/.2/.3 in the script become those addresses,
TCP port 18515 a free one), and a time bound; a script passes when it exits 0. Its NICs are
stopped (`simnic down` in the private SIMNIC_DIR) and its process group killed by pid whatever
happens.

    python3 tests/labs/course_test.py --simnic build/bin/simnic [--repo DIR] [--only NN]
                                      [--no-demos]

Exit 0 when all passes, 1 on a failure; the demos are skipped (with a message) when cmake or a
C compiler is missing, never the checks of the files.
"""

import argparse
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

DEMO_TIMEOUT_S = 180
QUESTION_ITEM = re.compile(r"^(\d+)\.\s+\S")
ANSWER_HEADING = re.compile(r"^##\s+Question\s+(\d+)\b")
DEMO_BLOCK = re.compile(r"^```sh demo\s*\n(.*?)^```\s*$", re.S | re.M)


def section(text, title):
    """The lines of the level-2 section `title` (without its heading), or None."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().lower() == "## " + title.lower():
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("## ")), len(lines))
            return lines[i + 1:end]
    return None


def heading_index(text, title):
    for i, line in enumerate(text.splitlines()):
        if line.strip().lower() == "## " + title.lower():
            return i
    return -1


def readme_questions(readme_text):
    """The numbers of the README's questions: top-level numbered items of `## Questions`."""
    lines = section(readme_text, "Questions") or []
    return [int(m.group(1)) for m in (QUESTION_ITEM.match(l) for l in lines) if m]


def answered_questions(answers_text):
    """{K: answer text} for each `## Question K` heading of an answer key."""
    answers, current = {}, None
    for line in answers_text.splitlines():
        m = ANSWER_HEADING.match(line)
        if m:
            current = int(m.group(1))
            answers[current] = ""
        elif line.startswith("## ") or line.startswith("# "):
            current = None
        elif current is not None:
            answers[current] += line.strip() + " "
    return {k: v.strip() for k, v in answers.items()}


def check_objectives(lab, text, fail):
    items = [l for l in (section(text, "Learning objectives") or []) if re.match(r"^[-*]\s+\S", l)]
    if heading_index(text, "Learning objectives") < 0:
        fail(lab, "README has no '## Learning objectives' section")
    elif not 3 <= len(items) <= 6:
        fail(lab, "'## Learning objectives' has %d items, not 3 to 6" % len(items))
    elif heading_index(text, "Concepts") >= 0 and \
            heading_index(text, "Learning objectives") > heading_index(text, "Concepts"):
        fail(lab, "'## Learning objectives' comes after '## Concepts' (it belongs near the top)")


def check_answers(lab_dir, lab, text, fail):
    asked = readme_questions(text)
    if not asked:
        fail(lab, "README has no numbered questions under '## Questions'")
    key = os.path.join(lab_dir, "teacher", "answers.md")
    if not os.path.isfile(key):
        fail(lab, "no answer key teacher/answers.md")
        return
    with open(key, encoding="utf-8") as f:
        answers = answered_questions(f.read())
    for q in asked:
        if q not in answers:
            fail(lab, "question %d of the README has no '## Question %d' in teacher/answers.md" % (q, q))
        elif len(answers[q]) < 40:
            fail(lab, "the answer to question %d is empty or a stub (%r)" % (q, answers[q]))
    for q in sorted(set(answers) - set(asked)):
        fail(lab, "teacher/answers.md answers question %d, which the README does not ask" % q)


def check_notes(repo, lab, fail):
    notes = os.path.join(repo, "docs", "course", lab + ".md")
    if not os.path.isfile(notes):
        fail(lab, "no lecture notes docs/course/%s.md" % lab)
        return
    with open(notes, encoding="utf-8") as f:
        text = f.read()
    if not DEMO_BLOCK.search(text):
        fail(lab, "docs/course/%s.md has no ```sh demo block" % lab)
    if text.count("\n---\n") + len(re.findall(r"^## ", text, re.M)) < 8:
        fail(lab, "docs/course/%s.md has fewer than 8 slides" % lab)


def check_start_leaves_keys_out(simnic, lab, fail):
    """`simnic lab start N` hands a student the starter, never the sealed teacher/ folder."""
    n = str(int(lab[:2]))
    with tempfile.TemporaryDirectory(prefix="course-start-") as tmp:
        dest = os.path.join(tmp, "lab")
        r = subprocess.run([simnic, "lab", "start", n, dest], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        if r.returncode != 0:
            fail(lab, "simnic lab start %s failed: %s" % (n, r.stdout.strip()[-300:]))
        elif os.path.exists(os.path.join(dest, "teacher")):
            fail(lab, "simnic lab start %s copied teacher/ (the answer keys) to the student" % n)


def udp_port_free(addr, port=4791):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((addr, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def private_addresses(count=3):
    """Three loopback addresses 127.A.B.1..3 whose RoCE port is free (A in [100, 200))."""
    seed = os.getpid()
    for attempt in range(50):
        a, b = 100 + (seed + attempt * 7) % 100, (seed // 100 + attempt) % 250 + 1
        addrs = ["127.%d.%d.%d" % (a, b, i + 1) for i in range(count)]
        if all(udp_port_free(x) for x in addrs):
            return addrs
    raise RuntimeError("no free private loopback addresses")


def free_tcp_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return str(port)


def privatise(script, addrs, port):
    """The demo script moved onto private addresses and a private TCP port."""
    script = re.sub(r"\bsimnic up (\d+)", r"simnic up \1 --addr %s" % addrs[0], script)
    for i, a in enumerate(addrs):
        script = script.replace("127.0.0.%d" % (i + 1), a)
    return script.replace("18515", port)


def run_demo(repo, simnic, name, script):
    """Runs one demo script; returns (ok, output)."""
    work = tempfile.mkdtemp(prefix="course-demo-")
    env = dict(os.environ)
    env.update(SIMNIC_DIR=os.path.join(work, "nics"), TMPDIR=work,
               PATH=os.path.dirname(os.path.abspath(simnic)) + os.pathsep + env.get("PATH", ""))
    os.makedirs(env["SIMNIC_DIR"])
    os.chmod(env["SIMNIC_DIR"], 0o700)  # simnic refuses a NIC folder other users can reach
    body = "set -e\n" + privatise(script, private_addresses(), free_tcp_port())
    # Output to a file, not a pipe: a program the script left in the background (a server
    # whose client failed) must not keep us waiting for the end of a pipe.
    log_path = os.path.join(work, "demo.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(["bash", "-c", body], cwd=repo, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        proc.wait(timeout=DEMO_TIMEOUT_S)
        ok, status = proc.returncode == 0, "(exit status %d)" % proc.returncode
    except subprocess.TimeoutExpired:
        ok, status = False, "(killed after %d s)" % DEMO_TIMEOUT_S
    finally:
        subprocess.run([simnic, "down"], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the script's group: whatever it left running
        except ProcessLookupError:
            pass
        proc.wait()
        with open(log_path, errors="replace") as f:
            out = f.read() + "\n" + status
        shutil.rmtree(work, ignore_errors=True)
    return ok, out


def demos_possible():
    missing = [t for t in ("cmake", "cc") if not shutil.which(t)]
    return "" if not missing else "needs " + ", ".join(missing)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--simnic", required=True)
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    ap.add_argument("--only", help="only the lab whose folder starts with this (e.g. 03)")
    ap.add_argument("--no-demos", action="store_true")
    args = ap.parse_args()
    simnic = os.path.abspath(args.simnic)
    failures = []

    def fail(lab, what):
        failures.append("%s: %s" % (lab, what))
        print("FAIL %s: %s" % (lab, what), flush=True)

    labs = sorted(os.path.basename(d) for d in glob.glob(os.path.join(args.repo, "labs", "[0-9][0-9]-*"))
                  if os.path.isfile(os.path.join(d, "README.md")))
    if args.only:
        labs = [l for l in labs if l.startswith(args.only)]
    if not labs:
        print("FAIL no lab folders found under %s/labs" % args.repo)
        return 1
    for lab in labs:
        lab_dir = os.path.join(args.repo, "labs", lab)
        with open(os.path.join(lab_dir, "README.md"), encoding="utf-8") as f:
            text = f.read()
        check_objectives(lab, text, fail)
        check_answers(lab_dir, lab, text, fail)
        check_notes(args.repo, lab, fail)
        check_start_leaves_keys_out(simnic, lab, fail)
    print("checked the objectives, answer keys and notes of %d labs" % len(labs), flush=True)

    why_not = demos_possible()
    if args.no_demos or why_not:
        print("SKIP the demos: %s" % ("--no-demos" if args.no_demos else why_not))
    else:
        for lab in labs:
            notes = os.path.join(args.repo, "docs", "course", lab + ".md")
            if not os.path.isfile(notes):
                continue
            with open(notes, encoding="utf-8") as f:
                script = "\n".join(DEMO_BLOCK.findall(f.read()))
            if not script:
                continue
            start = time.monotonic()
            ok, out = run_demo(args.repo, simnic, lab, script)
            print("%s demo of %s (%.0f s)" % ("PASS" if ok else "FAIL", lab, time.monotonic() - start),
                  flush=True)
            if not ok:
                failures.append("%s: the demo failed" % lab)
                print("\n".join("  | " + l for l in out.splitlines()[-40:]), flush=True)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
