"""SIGKILL at every I/O step of `answer`, `retry`, `dismiss` and `reopen` (docs/protocol.md
§13): whatever instant the command dies at, the file it moves is whole and in exactly one
place, running the command again finishes the job, and the handoff then goes on exactly
once.  The kill is injected with strace, as test_release_crash.py does for `release`.

Steps are the calls that change the disk (`write`, `fsync`, renames, unlinks, `mkdir`,
`rmdir`, and an `openat` that may create or write), from the role's lock on: the scan
before it only reads.  Slow: ~25 s per operation on this machine (one process per step).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from handoffd.core import handoff as hf
from handoffd.queue import reports
from tests import shards
from tests.conftest import helper_env, make_project
from tests.daemon_support import add_role
from tests.fault_support import strace_problem

SYSCALLS = ("openat", "write", "fsync", "rename", "renameat", "renameat2", "unlink", "unlinkat",
            "rmdir", "mkdir")  # fmt: skip
CALL = re.compile(r"^(?:\d+\s+)?(\w+)\(")
WRITING = ("O_WRONLY", "O_RDWR", "O_CREAT")
ID = "20260101T000000Z_000001_from_QA"
NAME = f"50_{ID}_to_coder.handoff"
FAILED_NAME = f"50_{ID}_to_designer.handoff"
WHEN = "2026-01-01T00:00:00Z"


class Scene:
    """A project set up for one operation, and how to run it and judge what is left."""

    def __init__(self, base: Path, op: str) -> None:
        base.mkdir()
        self.base, self.op = base, op
        self.project = make_project(base)
        getattr(self, f"_set_up_{op}")()

    # set-ups: the state each operation starts from

    def _set_up_answer(self) -> None:
        self.project.put("coder", NAME, box="inbox/in_process", id=ID, task="parse",
                         blocked_reason="which grammar?", dequeued_at=WHEN)  # fmt: skip
        self.card, self.args = f"{ID}@coder", ("Use the new one.",)

    def _set_up_retry(self) -> None:
        self._refused()
        self.args = ()

    def _set_up_dismiss(self) -> None:
        self._refused()
        self.args = ("--reason", "obsolete")

    def _set_up_reopen(self) -> None:
        self.project.put("coder", NAME, box="inbox/completed", id=ID, completed_at=WHEN,
                         dequeued_at=WHEN)  # fmt: skip
        self.card, self.args = f"{ID}@coder", ()

    def _refused(self) -> None:
        """QA's original to `designer`, refused before that role existed; it exists now."""
        fields = {
            "from": "QA",
            "to": "designer",
            "message": "hi",
            "created_at": "2026-01-01T00:00:00Z",
        }
        path = self.project.put("QA", FAILED_NAME, box="failed", id=ID, **fields)
        Path(f"{path}.error").write_text("Unknown recipient role 'designer'.\n")
        (self.base / "designer").mkdir()
        add_role(self.project, "designer", self.base / "designer")
        self.card = f"{ID}@QA"

    # running

    def argv(self) -> list[str]:
        root = str(self.project.root)
        return [sys.executable, "-m", "handoffd", self.op, self.card, *self.args, "--root", root]

    def run(self, *strace: str) -> subprocess.CompletedProcess[bytes]:
        argv = ["strace", "-f", "-qq", *strace, *self.argv()] if strace else self.argv()
        env = {**helper_env(None), "USER": "ann"}
        return subprocess.run(argv, cwd=self.project.root, env=env, capture_output=True,
                              timeout=60, check=False)  # fmt: skip

    def helper(self, role: str, command: str, *args: str) -> subprocess.CompletedProcess[bytes]:
        where = self.project.worktrees.get(role, self.project.root)
        return subprocess.run([command, *args], cwd=where, env=helper_env(role),
                              capture_output=True, timeout=60, check=False)  # fmt: skip

    # judging

    def places(self, *boxes: tuple[str, str]) -> list[Path]:
        """Every queue file of the handoff in the (role, box) folders given, each whole."""
        found = []
        for role, box in boxes:
            folder = self.project.box(role, box)
            found += [p for p in folder.rglob("*.handoff") if p.parent.name != "dismissed"
                      or box.endswith("dismissed")] if folder.exists() else []  # fmt: skip
        for path in found:
            hf.read(str(path))  # whole: a partial file would not parse
        return found


def check_answer(scene: Scene) -> list[str]:
    [copy] = scene.places(("coder", "inbox/new"), ("coder", "inbox/in_process"))
    handoffs = str(scene.project.handoffs("coder"))
    answers = [reports.read(p) for p in reports.report_paths(handoffs, ID)]
    if any(a.text != "Use the new one." for a in answers) or len(answers) > 1:
        return [f"answers after the kill: {answers}"]
    if "blocked_reason" in dict(hf.read(str(copy)).headers) or not answers:
        again = scene.run()
        if again.returncode != 0:
            return [f"answer again: {again.stderr!r}"]
    taken = scene.helper("coder", "ready_for_next")
    if b"ANSWER: Use the new one. (ann, " not in taken.stdout or b"BLOCKED_REASON" in taken.stdout:
        return [f"the agent does not see the answer: {taken.stdout!r}"]
    return []


def check_retry(scene: Scene) -> list[str]:
    [original] = scene.places(("QA", "failed"), ("QA", "outbox"))
    if original.parent.name == "failed" and scene.run().returncode != 0:
        return ["retry again refused"]
    return delivered_once(scene)


def delivered_once(scene: Scene) -> list[str]:
    root = str(scene.project.root)
    daemon = subprocess.run(["handoffd", "run", "--once", root], env=helper_env(None),
                            capture_output=True, timeout=60, check=False)  # fmt: skip
    copies = scene.places(("designer", "inbox/new"))
    sent = scene.places(("QA", "sent"))
    left = scene.places(("QA", "failed"), ("QA", "outbox"))
    if daemon.returncode != 0 or len(copies) != 1 or len(sent) != 1 or left:
        return [f"after the daemon: copies {copies}, sent {sent}, left {left}"]
    return []


def check_dismiss(scene: Scene) -> list[str]:
    [original] = scene.places(("QA", "failed"), ("QA", "failed/dismissed"))
    if original.parent.name == "failed" and scene.run().returncode != 0:
        return ["dismiss again refused"]
    [aside] = scene.places(("QA", "failed/dismissed"))
    note = Path(f"{aside}.dismissed")
    if not note.exists() or not Path(f"{aside}.error").exists():
        return [f"dismissed without its note or reason: {sorted(os.listdir(aside.parent))}"]
    if (
        scene.places(("QA", "failed"))
        or Path(scene.project.box("QA", "failed"), f"{FAILED_NAME}.error").exists()
    ):
        return ["something left in failed/"]
    return []


def check_reopen(scene: Scene) -> list[str]:
    [copy] = scene.places(("coder", "inbox/completed"), ("coder", "inbox/new"))
    if copy.parent.name == "completed" and scene.run().returncode != 0:
        return ["reopen again refused"]
    taken = scene.helper("coder", "ready_for_next")
    done = scene.helper("coder", "done_with_current")
    completed = scene.places(("coder", "inbox/completed"))
    if not taken.stdout.startswith(b"TASK: ") or done.returncode != 0 or len(completed) != 1:
        return [f"after reopening: {taken.stdout!r} {done.stderr!r} {completed}"]
    return []


CHECKS: dict[str, Callable[[Scene], list[str]]] = {
    "answer": check_answer, "retry": check_retry, "dismiss": check_dismiss, "reopen": check_reopen,
}  # fmt: skip


def steps(scene: Scene, trace: Path) -> list[tuple[str, int]]:
    """(syscall, n) of each call that changes the disk, from the role's lock on."""
    result = scene.run("-e", f"trace={','.join(SYSCALLS)}", "-o", str(trace))
    assert result.returncode == 0, result.stderr
    lines = [line for line in trace.read_text().splitlines() if CALL.match(line)]
    start = next(i for i, line in enumerate(lines) if '/inbox"' in line)  # the role's lock
    seen: dict[str, int] = {}
    found = []
    for index, line in enumerate(lines):
        call = CALL.match(line).group(1)  # type: ignore[union-attr]
        seen[call] = seen.get(call, 0) + 1
        reads = call == "openat" and not any(flag in line for flag in WRITING)
        if index >= start and not reads:
            found.append((call, seen[call]))
    return found


def traced(folder: Path, op: str) -> list[tuple[str, int]]:
    """The kill points of `op` traced in a scene laid out in `folder`."""
    Scene(folder / "warm", op).run("-o", os.devnull, "-e", "trace=none")  # compile first
    return steps(Scene(folder / "probe", op), folder / "trace")


@pytest.mark.slow
@pytest.mark.parametrize("op", list(CHECKS))
@shards.parametrize(2)
def test_sigkill_at_every_step_of_an_operator_action_leaves_a_state_it_finishes(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, op: str, shard: tuple[int, int]
) -> None:
    """`op` is traced once per session; each shard kills at its share of its steps
    (tests/shards.py)."""
    problem = strace_problem()
    if problem:
        pytest.skip(problem)
    found = shards.shared(tmp_path_factory, f"operator-{op}", lambda folder: traced(folder, op))
    assert any(call.startswith("rename") for call, _ in found), found
    mine = shards.share(found, shard)
    failures, unreached = [], 0
    for index, (call, n) in mine:
        scene = Scene(tmp_path / f"s{index}", op)
        killed = scene.run("-o", os.devnull, "-e", f"trace={call}",
                           "-e", f"inject={call}:signal=KILL:when={n}")  # fmt: skip
        if killed.returncode == 0:
            unreached += 1
            continue
        if killed.returncode != -signal.SIGKILL:
            failures.append(f"{call} #{n}: not killed ({killed.returncode}) {killed.stderr!r}")
            continue
        try:
            failures += [f"{call} #{n}: {why}" for why in CHECKS[op](scene)]
        except ValueError as error:  # not exactly one place
            failures.append(f"{call} #{n}: {error}")
    assert failures == [], failures
    assert unreached <= len(mine) // 10, f"{unreached} of {len(mine)} steps never reached"
