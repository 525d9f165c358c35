"""Disk faults during delivery (docs/protocol.md §5.2, §5.4): fsync and I/O errors, a full disk,
short writes, an inbox on another filesystem, a failing journal commit.

A transient error defers: the original stays in its outbox, nothing partial shows in any
new/, no temp file stays behind, and a later pass delivers exactly once.  Errors are
injected in-process (they run everywhere); the full disk and the second filesystem are
also real tmpfs mounts where mounting is allowed.
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from handoffd.core import handoff as hf
from handoffd.core import lifecycle
from handoffd.core.config import Box
from handoffd.core.limits import LAST_RETRY
from handoffd.delivery import journal
from handoffd.delivery.delivery import JOURNAL
from tests.conftest import Project, make_project, wait_for
from tests.daemon_support import finish, inbox, read_log, running_pid, spawn, terminate
from tests.fault_support import (
    RECIPIENTS,
    Faults,
    Scene,
    assert_delivered_once,
    fill,
    hidden_temps,
    ident_of,
    open_daemon,
    partial_copies,
    queue_note,
    roles_of,
    tmpfs,
)

T0 = 1000.0  # the daemon's clock: passes are stepped with explicit times
LATER = T0 + LAST_RETRY + 1  # past any retry


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    """architect's outbox holds one note to coder, cleaner and QA."""
    return Scene(tmp_path / "scene")


def in_project(scene: Scene) -> Callable[[str], bool]:
    root = str(scene.project.root)
    return lambda path: path.startswith(root)


def assert_nothing_delivered(scene: Scene) -> None:
    """The pass was deferred whole: original in its outbox, no copy, no temp, no journal."""
    assert scene.visible_copies() == []
    assert hidden_temps(scene.roles) == []
    assert journal.load(str(scene.project.root / JOURNAL)) is None
    assert os.path.lexists(scene.roles["architect"].path(Box.OUTBOX, scene.original[0]))


def deferred_reasons(log: Any) -> list[str]:
    return [str(fields["reason"]) for fields in log.named("deferred")]


# --- (a) fsync errors ------------------------------------------------------------------


@pytest.mark.parametrize("failures", [1, 2, 3])
def test_fsync_eio_on_a_staged_copy_defers_and_the_copy_is_rewritten_never_trusted(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, failures: int
) -> None:
    """The first `failures` fsyncs fail with EIO (the 1st, 2nd, 3rd staged copy): each pass
    defers with nothing in view and the staged files unlinked, not fsynced again; once
    fsync works and the retry is due, each recipient gets one complete copy."""
    daemon, log = open_daemon(scene.project.root)
    faults = Faults(monkeypatch)
    faults.fail("fsync", errno.EIO, when=set(range(1, failures + 1)), where=in_project(scene))
    now = T0
    for _ in range(failures):
        daemon.step(now)
        assert_nothing_delivered(scene)
        now = daemon.courier.next_retry() or now
    failed_on = [path for name, path in faults.injected]
    assert len(failed_on) == failures and all(".tmp" in path for path in failed_on)
    assert len(deferred_reasons(log)) == failures
    assert all(reason.startswith("EIO") for reason in deferred_reasons(log))
    assert not any(os.path.lexists(path) for path in failed_on), "a failed copy was kept"
    daemon.step(now)  # the fault is spent: this pass delivers
    assert_delivered_once(scene.project.root, scene.expect())
    fsynced = faults.calls["fsync"][failures:]
    assert not set(failed_on) & set(fsynced), "an fsync was retried on a failed staged copy"
    daemon.close()


def test_a_deferred_original_waits_for_its_retry_time(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a deferral the original is not tried again before its backoff expires."""
    daemon, _ = open_daemon(scene.project.root)
    faults = Faults(monkeypatch)
    faults.fail("fsync", errno.EIO, when={1}, where=in_project(scene))
    daemon.step(T0)
    due = daemon.courier.next_retry()
    assert due is not None and due > T0
    daemon.step(due - 0.01)
    assert_nothing_delivered(scene)
    assert len(faults.calls["fsync"]) == 1, "retried before it was due"
    daemon.step(due)
    assert_delivered_once(scene.project.root, scene.expect())
    daemon.close()


# --- every I/O call of a pass, failing in turn ------------------------------------------

FAULTS = [
    ("fsync", errno.EIO),
    ("write", errno.ENOSPC),
    ("open", errno.EIO),
    ("rename", errno.EIO),
    ("close", errno.EIO),
]  # a clean pass unlinks nothing (the journal is emptied in place): no unlink to fail


@pytest.mark.parametrize(("call", "code"), FAULTS, ids=[call for call, _ in FAULTS])
def test_an_io_error_at_each_call_of_a_pass_shows_nothing_partial_and_delivers_once_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str, code: int
) -> None:
    """For each `os.<call>` a clean 3-recipient pass makes (the daemon already started),
    a fresh pass whose n-th such call fails: afterwards no partial file is in view, a
    visible copy means the pass was committed (its journal is kept for the next pass),
    and one clean later pass leaves every recipient exactly one copy, no journal, no
    temp, and no retry timer."""
    scene = Scene(tmp_path / "scene")
    daemon, _ = open_daemon(scene.project.root)
    counter = Faults(monkeypatch)
    counter.fail(call, code, when=set(), where=in_project(scene))  # count only
    daemon.step(T0)
    daemon.close()
    total = len(counter.calls[call])
    counter.clear()
    assert total >= 2, counter.calls
    broken = []
    for n in range(1, total + 1):
        scene.reset()
        daemon, log = open_daemon(scene.project.root)
        faults = Faults(monkeypatch)
        faults.fail(call, code, when={n}, where=in_project(scene))
        daemon.guarded_step(T0)
        problems = partial_copies(scene.roles)
        committed = journal.load(str(scene.project.root / JOURNAL)) is not None
        committed = committed or scene.archived()
        if scene.visible_copies() and not committed:
            problems.append("copies in view of a pass that was not committed")
        if log.named("deferred") and scene.visible_copies():
            problems.append("deferred, yet copies are in view")
        faults.clear()
        daemon.guarded_step(LATER)
        try:
            assert_delivered_once(scene.project.root, scene.expect())
        except AssertionError as error:
            problems.append(str(error))
        if daemon.courier.next_retry() is not None:
            problems.append("a retry timer is left for an original that is gone")
        daemon.close()
        if problems:
            broken.append(f"{call} #{n} on {faults.injected}: {problems}")
    assert not broken, "\n".join(broken)


# --- (b) disk full ---------------------------------------------------------------------


def test_enospc_on_a_copy_defers_with_nothing_partial_then_delivers(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Injected ENOSPC on writing QA's copy (runs everywhere): deferred, nobody gets a copy,
    no temp; delivered once when the disk has room again."""
    qa_new = scene.roles["QA"].path(Box.NEW)
    daemon, log = open_daemon(scene.project.root)
    faults = Faults(monkeypatch)
    faults.fail("write", errno.ENOSPC, where=lambda path: path.startswith(qa_new))
    daemon.step(T0)
    assert_nothing_delivered(scene)
    assert deferred_reasons(log)[0].startswith("ENOSPC")
    faults.clear()
    daemon.step(LATER)
    assert_delivered_once(scene.project.root, scene.expect())
    daemon.close()


def test_a_full_tmpfs_under_one_recipient_defers_then_delivers_once_space_is_freed(
    scene: Scene,
) -> None:
    """QA's handoff directory on a 64 KiB tmpfs filled to the last byte: the pass defers
    with ENOSPC, no recipient sees anything, no temp is left; after the filler is removed
    the retry delivers once."""
    handoffs = Path(scene.roles["QA"].handoffs)
    handoffs.mkdir()
    with tmpfs(handoffs, "64k") as cannot:
        if cannot:
            pytest.skip(cannot)
        daemon, log = open_daemon(scene.project.root)  # makes QA's folders on the tmpfs
        filler = fill(handoffs)
        daemon.step(T0)
        assert_nothing_delivered(scene)
        assert deferred_reasons(log)[0].startswith("ENOSPC"), log.events
        os.unlink(filler)
        daemon.step(LATER)
        assert_delivered_once(scene.project.root, scene.expect())
        daemon.close()


# --- (c) short writes --------------------------------------------------------------------


def test_short_writes_still_produce_complete_copies(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`os.write` writes at most 7 bytes per call (legal, and silent): every copy is still
    the whole original plus its two stamps, and so is the journal."""
    real_write = os.write
    sizes: list[int] = []

    def short_write(fd: int, data: Any) -> int:
        sizes.append(len(data))
        return real_write(fd, bytes(data[:7]))

    monkeypatch.setattr(os, "write", short_write)
    daemon, _ = open_daemon(scene.project.root)
    daemon.step(T0)
    monkeypatch.undo()
    assert len(sizes) > 4 * len(scene.original[1]) // 7, "the writes were not cut short"
    assert_delivered_once(scene.project.root, scene.expect())
    original = hf.parse(scene.original[1], "original")
    for name in RECIPIENTS:
        copy = hf.read(scene.roles[name].path(Box.NEW, scene.original[0]))
        assert copy.body == original.body
        assert copy.headers[: len(original.headers)] == original.headers
        assert [key for key, _ in copy.headers[len(original.headers) :]] == [
            "recipient",
            "enqueued_at",
        ]
    daemon.close()


# --- (d) an inbox on another filesystem ----------------------------------------------------


@pytest.mark.parametrize("mounted", ["inbox", "inbox/new"])
def test_a_recipient_inbox_on_another_filesystem_is_delivered_atomically(
    scene: Scene, mounted: str
) -> None:
    """QA's inbox/ (or only its new/) is a tmpfs, another filesystem than the outbox, sent/
    and the journal: its copy is still staged inside new/ and renamed within it, so it
    arrives whole, with no temp left; with the whole inbox there, QA's helper takes it."""
    mount = Path(scene.roles["QA"].handoffs) / mounted
    mount.mkdir(parents=True)
    with tmpfs(mount, "1m") as cannot:
        if cannot:
            pytest.skip(cannot)
        assert os.stat(mount).st_dev != os.stat(scene.project.root).st_dev
        daemon, log = open_daemon(scene.project.root)
        daemon.step(T0)
        daemon.close()
        assert not log.named("deferred")
        assert_delivered_once(scene.project.root, scene.expect())
        if mounted == "inbox":
            taken = scene.project.run("ready_for_next", role="QA")
            assert taken.code == 0 and "TASK: " in taken.out, taken.err


def test_the_daemon_never_renames_into_new_from_another_directory(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs everywhere: any rename into a new/ from outside that same directory fails with
    EXDEV, as it would if the inbox were another filesystem; delivery does not notice."""
    real_rename = os.rename
    news = {scene.roles[name].path(Box.NEW) for name in RECIPIENTS}

    def rename(source: Any, target: Any, *args: Any, **kwargs: Any) -> None:
        into = os.path.dirname(os.fsdecode(target))
        if into in news and os.path.dirname(os.fsdecode(source)) != into:
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), source)
        real_rename(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "rename", rename)
    daemon, log = open_daemon(scene.project.root)
    daemon.step(T0)
    daemon.close()
    assert not log.named("deferred") and not log.named("pass_failed")
    assert_delivered_once(scene.project.root, scene.expect())


# --- the journal commit --------------------------------------------------------------------

JOURNAL_FAULTS = {
    "write": ("write", errno.ENOSPC, lambda path: path.endswith(JOURNAL)),
    "fsync": ("fsync", errno.EIO, lambda path: path.endswith(JOURNAL)),
    "close": ("close", errno.EIO, lambda path: path.endswith(JOURNAL)),
    "directory fsync": ("fsync", errno.EIO, lambda path: path.endswith("/.swarmforge/daemon")),
}


@pytest.mark.parametrize("step", list(JOURNAL_FAULTS))
def test_an_io_error_committing_the_journal_defers_the_whole_pass_with_nothing_visible(
    project: Project, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """Two originals in one pass, the journal's write, fsync, close or directory fsync
    fails: both are deferred, no copy is in view, no temp and no journal stay behind;
    the next pass delivers each exactly once."""
    roles = roles_of(project.root)
    queued = [
        queue_note(roles, "coder", ["cleaner", "QA"], message="one"),
        queue_note(roles, "QA", ["coder"], message="two"),
    ]
    expected = {ident_of(queued[0]): ["cleaner", "QA"], ident_of(queued[1]): ["coder"]}
    daemon, log = open_daemon(project.root)
    call, code, where = JOURNAL_FAULTS[step]
    faults = Faults(monkeypatch)
    faults.fail(call, code, when={1}, where=where)
    daemon.step(T0)
    assert faults.injected, "the fault never fired"
    assert {fields["file"] for fields in log.named("deferred")} == {
        os.path.basename(path) for path in queued
    }
    assert all(os.path.lexists(path) for path in queued)
    for role in roles.values():
        assert [n for n in os.listdir(role.path(Box.NEW)) if hf.is_visible(n)] == []
    assert hidden_temps(roles) == []
    assert journal.load(str(project.root / JOURNAL)) is None, "a failed commit reads as committed"
    faults.clear()
    daemon.step(LATER)
    assert_delivered_once(project.root, expected)
    daemon.close()


# --- retry timers ----------------------------------------------------------------------------


def test_a_deferred_original_taken_back_by_its_sender_leaves_no_retry_timer(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deferred original that disappears from the outbox (its sender took it back) must
    not keep a timer: a timer in the past makes the daemon's loop wait 0 s, forever."""
    daemon, _ = open_daemon(scene.project.root)
    faults = Faults(monkeypatch)
    faults.fail("fsync", errno.EIO, when={1}, where=in_project(scene))
    daemon.step(T0)
    assert daemon.courier.next_retry() is not None
    os.unlink(scene.roles["architect"].path(Box.OUTBOX, scene.original[0]))
    daemon.step(LATER)
    assert daemon.courier.next_retry() is None
    assert daemon._timeout(LATER + 1, None) > 0
    daemon.close()


def test_a_deferred_original_delivered_by_recovery_leaves_no_retry_timer(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deferred once (fsync EIO), then committed by a pass whose publish fails (rename
    EIO: the entry is stuck, not the pass), then finished from the journal by the next
    pass: no timer may outlive it."""
    daemon, log = open_daemon(scene.project.root)
    faults = Faults(monkeypatch)
    faults.fail("fsync", errno.EIO, when={1}, where=in_project(scene))
    daemon.step(T0)
    faults.clear()
    faults = Faults(monkeypatch)
    faults.fail("rename", errno.EIO, when={1}, where=in_project(scene))
    daemon.guarded_step(LATER)
    assert log.named("publish_stuck") and not log.named("pass_failed")
    faults.clear()
    daemon.guarded_step(LATER + 1)
    assert_delivered_once(scene.project.root, scene.expect())
    assert daemon.courier.next_retry() is None
    daemon.close()


# --- an unreadable folder ------------------------------------------------------------------


def test_an_unreadable_outbox_holds_up_no_other_role(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA's outbox cannot be listed (EACCES, as for a worktree the daemon's user may not
    read): coder's handoff is still delivered, QA's waits in its outbox, logged, and goes
    out once the outbox is readable again."""
    roles = roles_of(project.root)
    daemon, log = open_daemon(project.root)
    from_coder = queue_note(roles, "coder", ["cleaner"], message="one")
    from_qa = queue_note(roles, "QA", ["coder"], message="two")
    faults = Faults(monkeypatch)
    faults.fail("scandir", errno.EACCES, where=lambda path: path == roles["QA"].path(Box.OUTBOX))
    daemon.guarded_step(T0)
    assert faults.injected
    assert not log.named("pass_failed"), log.named("pass_failed")
    assert [fields["file"] for fields in log.named("delivered")] == [os.path.basename(from_coder)]
    assert log.named("outbox_unreadable")
    assert os.path.lexists(from_qa)
    faults.clear()
    daemon.guarded_step(LATER)
    assert_delivered_once(
        project.root, {ident_of(from_coder): ["cleaner"], ident_of(from_qa): ["coder"]}
    )
    daemon.close()


def test_an_unreadable_inbox_at_start_up_does_not_stop_the_daemon(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA's new/ cannot be listed while the daemon starts and sweeps temp files: it still
    starts, and delivers once the folder is readable."""
    qa_new = scene.roles["QA"].path(Box.NEW)
    os.makedirs(qa_new)
    faults = Faults(monkeypatch)
    faults.fail("listdir", errno.EACCES, where=lambda path: path == qa_new)
    daemon, log = open_daemon(scene.project.root)
    assert faults.injected and log.named("sweep_failed")
    faults.clear()
    daemon.step(T0)
    assert_delivered_once(scene.project.root, scene.expect())
    daemon.close()


# --- (e) the whole project on a full disk, against a real daemon ---------------------------


def test_a_daemon_on_a_full_disk_starts_keeps_running_and_delivers_once_space_returns(
    tmp_path: Path,
) -> None:
    """The whole project on a 4 MiB tmpfs filled to the last byte: `handoffd run` starts
    (the lock writes nothing; the pid file that cannot be written is no reason to stop),
    defers every delivery and keeps running while handoffs keep arriving; once the filler
    is removed it delivers each exactly once within its retry backoff, puts its pid file
    back, and its log holds only whole JSON lines."""
    disk = tmp_path / "disk"
    disk.mkdir()
    with tmpfs(disk, "4m") as cannot:
        if cannot:
            pytest.skip(cannot)
        project = make_project(disk)
        roles = roles_of(project.root)
        early = [queue_note(roles, "coder", ["QA"], message=f"early {n}") for n in range(5)]
        drafts = Path(roles["cleaner"].path(Box.DRAFTS))
        late = [queue_note(roles, "cleaner", ["QA"], message=f"late {n}") for n in range(5)]
        for path in late:  # held back, whole, until the disk is full
            os.rename(path, drafts / os.path.basename(path))
        new = Path(roles["QA"].path(Box.NEW))
        new.mkdir(parents=True)
        filler = fill(disk)
        attempts = _changes(new)
        next(attempts)
        process = spawn(project)
        try:
            wait_for(lambda: lifecycle.holder(str(project.root)) == process.pid, what="the lock")
            wait_for(lambda: next(attempts), what="a first try at a copy")  # it tried: ENOSPC
            for path in late:
                os.rename(drafts / os.path.basename(path), path)
            wait_for(lambda: next(attempts), what="another try")
            assert process.poll() is None, process.communicate()
            assert all(os.path.exists(path) for path in early + late)

            os.unlink(filler)

            wait_for(lambda: len(inbox(project, "QA")) == 10, timeout=LAST_RETRY, what="delivery")
            assert process.poll() is None
            wait_for(lambda: running_pid(project) == process.pid, what="the pid file put back")
            expected = {ident_of(path): ["QA"] for path in early + late}
            process.send_signal(signal.SIGTERM)
            assert finish(process)[0] == 0
            assert_delivered_once(project.root, expected)
            read_log(project)  # every line parses: no torn line
        finally:
            terminate(process)


def _changes(directory: Path) -> Iterator[bool]:
    """Each `next` says whether `directory` changed (an entry made or removed) since the last."""
    seen = os.stat(directory).st_mtime_ns
    while True:
        now = os.stat(directory).st_mtime_ns
        yield now != seen
        seen = now
