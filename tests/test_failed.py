"""A sender's `failed/` against the running daemon (docs/protocol.md §13, §15 "Retry and
dismiss"): `retry` and `dismiss` never remove a reason the daemon wrote after they
started.  The daemon is a real process refusing the file again while the operator's
commands run, round after round: the race is the test, not a mock of it."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoffd.core.config import Box
from handoffd.core.outcome import Refusal
from handoffd.ops import operator
from handoffd.ops.context import Context, resolve_context
from handoffd.queue import failed
from tests.conftest import Project, wait_for
from tests.daemon_support import HANDOFFD, wait_event

ID = "20260101T000000Z_000001_from_coder"
NAME = f"50_{ID}_to_QA.handoff"
CARD = f"{ID}@coder"
# No `type` header: refused at every check, so each retry sends it straight back.
REFUSED = f"id: {ID}\nfrom: coder\nto: QA\npriority: 50\n\nRe-read your role.\n".encode()
ROUNDS = 80


@pytest.fixture
def daemon(project: Project) -> Iterator[subprocess.Popen[bytes]]:
    """The daemon as a real process, its console discarded (a pipe nobody reads would fill)."""
    process = subprocess.Popen([HANDOFFD, "run", str(project.root)], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_event(project, "started", where=lambda e: e["pid"] == process.pid)
        yield process
    finally:
        process.kill()
        process.wait(timeout=10)


def send_refused(project: Project) -> None:
    """Put the bad original into coder's outbox the way a writer publishes (a rename)."""
    drafts = project.box("coder", "outbox/tmp")
    drafts.mkdir(parents=True, exist_ok=True)
    (drafts / f".{NAME}.tmp").write_bytes(REFUSED)
    os.rename(drafts / f".{NAME}.tmp", project.box("coder", "outbox") / NAME)


def at_rest(project: Project) -> Path:
    """Wait until the daemon has refused the original (again): its path in `failed/`."""
    original = project.box("coder", "failed") / NAME
    outbox = project.box("coder", "outbox") / NAME
    wait_for(lambda: original.exists() and not outbox.exists(), what="the refusal")
    return original


def reasonless(original: Path) -> bool:
    """The card `failed: no .error file beside it`: a refused original without its reason."""
    return original.exists() and not Path(f"{original}{failed.ERROR}").exists()


def test_retry_racing_the_daemon_never_removes_the_reason_it_wrote_again(
    project: Project, daemon: subprocess.Popen[bytes]
) -> None:
    """Each round `retry` moves the original back to the outbox and the daemon, woken by
    the rename, refuses it again at once: its new `.error` lands while `retry` is still
    finishing.  Over every round, the refused original always has its reason beside it."""
    send_refused(project)
    context = resolve_context(str(project.root), needs_role=False)
    lost = 0
    for _ in range(ROUNDS):
        at_rest(project)
        assert operator.retry(context, CARD, force=True).ok  # it is refused again: forced
        lost += reasonless(at_rest(project))
    assert lost == 0, f"{lost} of {ROUNDS} refusals lost their reason to a retry"


def test_dismiss_racing_retry_never_takes_the_reason_the_daemon_wrote_again(
    project: Project, daemon: subprocess.Popen[bytes]
) -> None:
    """`dismiss` and `retry` of one card at once, the daemon refusing it again whenever it
    is back in the outbox: whichever wins, a refused original keeps its reason, and a
    dismissed one has its own beside it."""
    send_refused(project)
    context = resolve_context(str(project.root), needs_role=False)
    aside = project.box("coder", "failed/dismissed")
    lost = 0
    for _ in range(ROUNDS):
        at_rest(project)
        both(context)
        original = _settled(project, aside)
        if original.parent == aside:
            lost += not Path(f"{original}{failed.ERROR}").exists()
            os.rename(original, project.box("coder", "outbox") / NAME)  # for the next round
            for left in aside.iterdir():  # its reason and note
                left.unlink()
        else:
            lost += reasonless(original)
    assert lost == 0, f"{lost} of {ROUNDS} rounds lost the reason to the race"


def both(context: Context) -> None:
    """`retry` and `dismiss` of the card started together, each as its command runs it."""
    start = threading.Barrier(2)

    def act(step: str) -> None:
        start.wait()
        try:
            if step == "retry":
                operator.retry(context, CARD, force=True)  # it would be STILL_INVALID
            else:
                operator.dismiss(context, CARD)
        except Refusal:
            pass  # NOT_FAILED: the other one moved it first

    threads = [threading.Thread(target=act, args=(step,)) for step in ("retry", "dismiss")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)


def _settled(project: Project, aside: Path) -> Path:
    """Where the original came to rest: dismissed, or refused again in `failed/`."""
    dismissed, refused = aside / NAME, project.box("coder", "failed") / NAME
    outbox = project.box("coder", "outbox") / NAME
    wait_for(lambda: (dismissed.exists() or refused.exists()) and not outbox.exists(),
             what="the original to come to rest")  # fmt: skip
    return dismissed if dismissed.exists() else refused


# --- a retry or dismissal killed half-way -----------------------------------------------------


def test_a_reason_moved_aside_by_a_killed_retry_is_put_back_by_the_next_command(
    project: Project,
) -> None:
    """Killed after it moved the reason aside, before the original moved: the next
    `dismiss` (or `retry`) puts the reason back first, and it goes with the original."""
    role = resolve_context(str(project.root), needs_role=False).roles["coder"]
    folder = Path(role.path(Box.FAILED))
    folder.mkdir(parents=True)
    (folder / NAME).write_bytes(REFUSED)
    (folder / f"{NAME}{failed.ERROR}").write_text("missing required header(s): type\n")
    os.rename(folder / f"{NAME}{failed.ERROR}", folder / failed.aside_name(NAME))  # the kill
    target = failed.dismiss(role, NAME, failed.note("ann", "obsolete"))
    assert Path(f"{target}{failed.ERROR}").read_text() == "missing required header(s): type\n"
    assert sorted(os.listdir(folder)) == ["dismissed"]


def test_the_board_reads_a_reason_left_aside_and_the_daemons_start_puts_it_back(
    project: Project,
) -> None:
    """Killed between its two renames, a retry leaves the reason aside: the board still
    shows it (never `no .error file beside it`), and `sweep` (the daemon's start) puts it
    back beside its original, or removes an aside whose original has left."""
    role = resolve_context(str(project.root), needs_role=False).roles["coder"]
    folder = Path(role.path(Box.FAILED))
    folder.mkdir(parents=True)
    (folder / NAME).write_bytes(REFUSED)
    (folder / failed.aside_name(NAME)).write_text("missing required header(s): type\n")
    (folder / failed.aside_name("gone.handoff")).write_text("its original was retried\n")
    shown = subprocess.run([HANDOFFD, "status", "--json", str(project.root)], capture_output=True,
                           text=True, timeout=60, check=True)  # fmt: skip
    [card] = [c for c in json.loads(shown.stdout) if c["card"] == CARD]
    assert card["detail"] == "failed: missing required header(s): type"
    assert failed.sweep(role) == [str(folder / failed.aside_name("gone.handoff"))]
    assert sorted(os.listdir(folder)) == [NAME, f"{NAME}{failed.ERROR}"]
    assert (folder / f"{NAME}{failed.ERROR}").read_text() == "missing required header(s): type\n"
