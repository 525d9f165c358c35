"""`handoffd bench --digest`: the cost of `digest --task` on a large thread, and whether it
grows with unrelated history (docs/protocol.md §11).

Two projects, alike but for their history: each holds one task of 200 git handoffs
(lead → alice → bob), 500 reports and 300 commits; one also holds 50,000 completed
cards of other tasks (25,000 handoffs to two recipients, their originals in `sent/`).
The first digest of each builds the history index (timed apart, as "cold"); the warm
runs are interleaved A B B A … so a drifting disk or a busy neighbour affects both alike.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from handoffd import handoff as hf
from handoffd.digest.gather import digest_of
from handoffd.outcome import Outcome

ROLES = ("lead", "alice", "bob")
TASK = "bench-task"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


@dataclass
class Shape:
    handoffs: int = 200
    reports: int = 500
    commits: int = 300
    history: int = 50_000  # unrelated completed cards in the big project
    runs: int = 7


QUICK = Shape(handoffs=20, reports=50, commits=30, history=500, runs=3)


@dataclass
class Result:
    history: int
    cold_s: float = 0.0
    warm_s: list[float] = field(default_factory=list)
    cli_s: list[float] = field(default_factory=list)
    lines: int = 0


def git(cwd: str, *args: str, stdin: str | None = None) -> str:
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, check=True
    )
    return done.stdout


def make_repo(root: str, commits: int) -> list[str]:
    """A repository of `commits` commits (one fast-import), worktrees for alice and bob;
    the commits' sha10s, oldest first."""
    os.makedirs(root)
    git(root, "init", "-q", "-b", "main")
    stream, start = [], 1_780_000_000
    for n in range(commits):
        content = f"change {n}\n"
        stream.append(
            f"commit refs/heads/main\nmark :{n + 1}\n"
            f"committer Bench <bench@example.com> {start + n * 60} +0000\n"
            f"data {len(f'change {n}')}\nchange {n}\n"
            f"M 644 inline src/file{n % 40}.txt\ndata {len(content)}\n{content}\n"
        )
    git(root, "fast-import", "--quiet", stdin="".join(stream))
    git(root, "reset", "-q", "--hard", "main")
    for role in ROLES[1:]:
        git(root, "worktree", "add", "-q", os.path.join("wt", role), "-b", role)
    out = git(root, "log", "--reverse", "--format=%h", "--abbrev=10", "main")
    return out.split()


def write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as file:
        file.write(data)


def handoffs_dir(root: str, role: str) -> str:
    worktree = root if role == "lead" else os.path.join(root, "wt", role)
    return os.path.join(worktree, ".swarmforge", "handoffs")


def queue_file(sender: str, to: str, seq: int, when: float, **headers: str) -> tuple[str, bytes]:
    stamp = hf.id_stamp(when)
    ident = f"{stamp}_{seq:06d}_from_{sender}"
    fields = [("id", ident), ("from", sender), ("to", to), ("priority", "50"), *headers.items()]
    fields.append(("created_at", hf.iso_now(when)))
    body = "Re-read your role and constitution.\n\nmerge_and_process\n"
    return f"50_{ident}_to_{to.replace(',', '_')}.handoff", hf.Handoff(fields, body).render()


def build(root: str, shape: Shape, history: int) -> None:
    """The project: roles.tsv, the task's thread with its reports, and the history."""
    shas = make_repo(root, shape.commits)
    rows = [f"{r}\t{r}\t{os.path.dirname(os.path.dirname(handoffs_dir(root, r)))}\t{r}\t{r}\t"
            f"bench\ttask\n" for r in ROLES]  # fmt: skip
    write(os.path.join(root, ".swarmforge", "roles.tsv"), "".join(rows).encode())
    step = max(1, shape.commits * 2 // shape.handoffs)
    for n in range(shape.handoffs):
        sender, to = ("lead", "alice") if n % 2 == 0 else ("alice", "bob")
        sha = shas[min(len(shas) - 1, (n // 2) * step)]
        when = 1_790_000_000 + n * 600
        name, data = queue_file(sender, to, n + 1, when, type="git_handoff", role=sender,
                                task=TASK, commit=sha)  # fmt: skip
        write(os.path.join(handoffs_dir(root, sender), "sent", name), data)
        copy = hf.parse(data, name)
        copy.set("recipient", to)
        copy.set("enqueued_at", hf.iso_now(when + 1))
        box = "inbox/new" if n >= shape.handoffs - 2 else "inbox/completed"
        if box == "inbox/completed":
            copy.set("completed_at", hf.iso_now(when + 300))
        write(os.path.join(handoffs_dir(root, to), box, name), copy.render())
        _reports(root, to, copy.get("id") or "", when, n, shape)
    _history(root, history)


def _reports(root: str, role: str, ident: str, when: float, n: int, shape: Shape) -> None:
    count = shape.reports // shape.handoffs + (1 if n < shape.reports % shape.handoffs else 0)
    for k in range(count):
        at = when + 10 + k * 30
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(at)) + ".000000Z"
        text = (f"Worked on slice {n}, step {k}. I decided to keep the parser as it is for now.\n"
                f"I'll add the remaining tests for slice {n} tomorrow morning.\n")  # fmt: skip
        front = f"---\nstatus: RUNNING\nrole: {role}\nagent: bench\nconversation: ''\n---\n\n"
        path = os.path.join(handoffs_dir(root, role), "reports", ident, f"{stamp}_RUNNING.md")
        write(path, (front + text).encode())


def _history(root: str, history: int) -> None:
    """`history` completed cards of other tasks: half as many handoffs, two recipients each."""
    for n in range(history // 2):
        name, data = queue_file("lead", "alice,bob", 100_000 + n, 1_700_000_000 + n,
                                type="git_handoff", role="lead", task=f"other-{n % 977}",
                                commit="0000000000")  # fmt: skip
        write(os.path.join(handoffs_dir(root, "lead"), "sent", name), data)
        for role in ("alice", "bob"):
            write(os.path.join(handoffs_dir(root, role), "inbox/completed", name), data)


def timed(root: str) -> tuple[float, int]:
    start = time.perf_counter()
    digest = digest_of(root, None, TASK, 60)
    elapsed = time.perf_counter() - start
    if isinstance(digest, Outcome):
        raise RuntimeError(f"digest refused: {digest.stderr}")
    return elapsed, len(digest.lines)


def cli(root: str) -> float:
    start = time.perf_counter()
    command = [sys.executable, "-m", "handoffd", "digest", "--task", TASK, "--root", root]
    subprocess.run(command, capture_output=True, check=True)
    return time.perf_counter() - start


def measure(base: str, shape: Shape) -> list[Result]:
    results = [Result(0), Result(shape.history)]
    roots = [os.path.join(base, f"history-{r.history}") for r in results]
    for result, root in zip(results, roots, strict=True):
        _progress(f"digest: building a project with {result.history:,} unrelated cards")
        build(root, shape, result.history)
        result.cold_s, result.lines = timed(root)
    pairs = list(zip(results, roots, strict=True))
    for n in range(shape.runs):
        for result, root in pairs if n % 2 == 0 else pairs[::-1]:
            result.warm_s.append(timed(root)[0])
            result.cli_s.append(cli(root))
    return results


def render(results: list[Result], shape: Shape) -> str:
    small, big = results
    ratio = statistics.median(big.warm_s) / statistics.median(small.warm_s)
    lines = [
        f"digest --task: {shape.handoffs} handoffs, {shape.reports} reports, "
        f"{shape.commits} commits; median of {shape.runs} warm runs",
    ]
    for r in results:
        lines.append(
            f"  {r.history:>6,} unrelated cards: in-process {statistics.median(r.warm_s):.3f} s "
            f"(cold, building the index: {r.cold_s:.3f} s), "
            f"CLI {statistics.median(r.cli_s):.3f} s, {r.lines} lines"
        )
    lines.append(f"  growth {shape.history:,} vs 0: {ratio:.2f}x (target <= 1.20x, <= 1 s)")
    return "\n".join(lines)


def as_json(results: list[Result]) -> dict[str, Any]:
    return {
        "digest": [
            {"history": r.history, "cold_s": r.cold_s, "warm_s": r.warm_s, "cli_s": r.cli_s}
            for r in results
        ]
    }


def run(quick: bool, directory: str | None, keep: bool) -> tuple[str, dict[str, Any]]:
    """Run the digest scenario: its table followed by its JSON line, and its figures."""
    shape = QUICK if quick else Shape()
    base = tempfile.mkdtemp(prefix="handoffd-bench-digest-", dir=directory)
    try:
        results = measure(base, shape)
    finally:
        if keep:
            _progress(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    figures = as_json(results)
    return render(results, shape) + "\n" + json.dumps(figures, sort_keys=True), figures


def _progress(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)
