"""The daemon's log (docs/protocol.md §6): whole JSON lines, a failed write never fatal and
counted, reopened on SIGHUP.  The full disk is a real tmpfs filled to the last byte."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from handoffd.core import log as logging
from handoffd.core.log import LogFile
from tests.conftest import BIN, Project, make_project, wait_for
from tests.daemon_support import (
    events,
    handoff_bytes,
    handoff_name,
    inbox,
    log_path,
    queue,
    read_log,
    spawn,
    terminate,
    wait_event,
)
from tests.fault_support import fill, tmpfs

BIN_HANDOFFD = os.path.join(BIN, "handoffd")
LINE = json.dumps({"event": "deferred", "file": "x" * 150, "reason": "ENOSPC"})


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KiB tmpfs (skipped, with the reason, where mounting is not allowed)."""
    mount = tmp_path / "fs"
    mount.mkdir()
    with tmpfs(mount, "64k") as cannot:
        if cannot:
            pytest.skip(cannot)
        yield mount


def parsed(path: Path) -> list[dict[str, Any]]:
    """Every line of the file as JSON (fails on a torn line); the file ends with a newline."""
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), f"unterminated last line: {data[-80:]!r}"
    return [json.loads(line) for line in data.decode().splitlines()]


# --- the file, in-process ---------------------------------------------------------------


def test_lines_that_do_not_fit_are_counted_never_torn_and_reported_once_space_returns(
    small_fs: Path,
) -> None:
    """The disk fills part-way through a line: the fragment is taken back off, every line
    in the file parses, and once space returns one `log_dropped` line gives the count."""
    log = LogFile(str(small_fs / "handoffd.log"))
    assert log.write(LINE)
    filler = fill(small_fs)
    written = [log.write(LINE) for _ in range(40)]  # the log's last page fills, then no more
    lost = written.count(False)
    assert lost and written.index(False) + lost == 40, "once full, every write fails"
    slack, size = 4096 - (len(LINE) + 1), len(LINE) + 1  # room left in the page, one line
    assert written.count(True) == slack // size and slack % size, "one write was cut short"
    before = parsed(small_fs / "handoffd.log")
    assert len(before) == 1 + written.count(True)

    os.unlink(filler)
    assert log.write(json.dumps({"event": "delivered"}))
    after = parsed(small_fs / "handoffd.log")
    assert after[: len(before)] == before
    assert [(e["event"], e.get("dropped")) for e in after[len(before) :]] == [
        ("log_dropped", lost),
        ("delivered", None),
    ]
    assert log.write(LINE) and parsed(small_fs / "handoffd.log")[-1]["event"] == "deferred"
    log.close()


def test_a_log_reopened_where_its_folder_is_gone_drops_lines_then_resumes_when_it_is_back(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "daemon"
    folder.mkdir()
    log = LogFile(str(folder / "handoffd.log"))
    shutil.rmtree(folder)
    log.reopen()
    assert not log.write(LINE) and not log.write(LINE)  # no file to write to: no exception
    folder.mkdir()
    assert log.write(LINE)
    assert [e["event"] for e in parsed(folder / "handoffd.log")] == ["log_dropped", "deferred"]
    assert parsed(folder / "handoffd.log")[0]["dropped"] == 2
    log.close()


def test_reopen_writes_to_a_new_file_after_the_old_one_was_renamed_away(tmp_path: Path) -> None:
    path = tmp_path / "handoffd.log"
    logger = logging.configure(str(path), console=False)
    logger.info("before")
    path.rename(tmp_path / "handoffd.log.1")
    logger.info("still the old file")
    logging.reopen()
    logger.info("after")
    assert [e["event"] for e in parsed(tmp_path / "handoffd.log.1")] == [
        "before",
        "still the old file",
    ]
    assert [e["event"] for e in parsed(path)] == ["after"]


def test_an_unwritable_stderr_never_raises_into_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console copy goes to a stderr that fails (a pipe nobody reads): the line still
    lands in the file and the call returns."""
    read, write = os.pipe()
    os.close(read)
    stream = os.fdopen(write, "w")
    monkeypatch.setattr(sys, "stderr", stream)
    logger = logging.configure(str(tmp_path / "handoffd.log"), console=True)
    logger.warning("deferred", file="x")
    monkeypatch.undo()
    with contextlib.suppress(OSError):
        stream.close()
    assert [e["event"] for e in parsed(tmp_path / "handoffd.log")] == ["deferred"]


# --- hard links (docs/protocol.md §15, Part III) --------------------------------------------


def test_a_hard_link_at_the_log_is_moved_aside_and_a_log_of_our_own_written(
    tmp_path: Path,
) -> None:
    """A hard link planted where the log goes, to a file outside: appending to it would
    write the daemon's lines into that file.  It is moved aside unwritten, a new log is
    made, and its first line says where the other went (`linked_file_moved`)."""
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"precious\n")
    path = tmp_path / "handoffd.log"
    os.link(outside, path)
    log = LogFile(str(path))
    assert log.write(LINE)
    log.close()
    assert outside.read_bytes() == b"precious\n"
    moved, line = parsed(path)
    assert (moved["event"], moved["file"]) == ("linked_file_moved", str(path))
    assert (
        moved["moved_to"] == str(tmp_path / "handoffd.log.linked") and line["event"] == "deferred"
    )


def test_a_hard_link_made_to_the_open_log_gets_none_of_its_later_lines(tmp_path: Path) -> None:
    """A name given to the log while the daemon writes it (`ln handoffd.log elsewhere`):
    the next line goes into a log begun anew, never through the name shared."""
    path = tmp_path / "handoffd.log"
    log = LogFile(str(path))
    assert log.write(LINE)
    os.link(path, tmp_path / "elsewhere")
    assert log.write(json.dumps({"event": "delivered"}))
    log.close()
    assert [e["event"] for e in parsed(tmp_path / "elsewhere")] == ["deferred"]
    assert [e["event"] for e in parsed(path)] == ["linked_file_moved", "delivered"]


def test_the_daemon_writes_through_no_hard_link_at_its_journal_or_its_log(project: Project) -> None:
    """`run --once` delivering with a hard link planted at `daemon/handoffd.journal` and at
    `daemon/handoffd.log`, each to a file outside: both outside files are as they were
    (the journal's would have been emptied, the log's appended to), the mail is
    delivered, and the log names both moves."""
    daemon = project.root / ".swarmforge" / "daemon"
    daemon.mkdir(parents=True, exist_ok=True)
    outside = {name: project.root.parent / f"{name}.outside" for name in ("journal", "log")}
    for name, path in outside.items():
        path.write_bytes(b"precious\n")
        os.link(path, daemon / f"handoffd.{name}")
    queue(project, "coder", ["QA"])
    done = subprocess.run([BIN_HANDOFFD, "run", "--once", str(project.root)], capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert {name: path.read_bytes() for name, path in outside.items()} == {
        "journal": b"precious\n",
        "log": b"precious\n",
    }
    assert len(inbox(project, "QA")) == 1
    moved = {e["file"]: e["moved_to"] for e in events(project, "linked_file_moved")}
    assert moved == {
        str(daemon / "handoffd.log"): str(daemon / "handoffd.log.linked"),
        str(daemon / "handoffd.journal"): str(daemon / "handoffd.journal.linked"),
    }


# --- the daemon on a full disk ------------------------------------------------------------


def test_a_daemon_on_a_full_disk_stays_up_and_delivers_once_space_is_freed(
    tmp_path: Path,
) -> None:
    """The whole project on a 2 MiB tmpfs, filled to the last byte while 40 handoffs wait:
    every delivery and log line fails.  The daemon stays up; once the filler is removed it
    delivers all 40 without a restart, says how many log lines it lost, and every line of
    its log parses."""
    mount = tmp_path / "fs"
    mount.mkdir()
    with tmpfs(mount, "2m") as cannot:
        if cannot:
            pytest.skip(cannot)
        project = make_project(mount)
        process = spawn(project)
        try:
            full_disk_then_freed(project, process)
        finally:
            terminate(process)


def full_disk_then_freed(project: Project, process: subprocess.Popen[str]) -> None:
    wait_event(project, "started", where=lambda e: e["pid"] == process.pid)
    drafts = [queue_hidden(project, n) for n in range(40)]  # written while there is space
    new = project.box("QA", "inbox/new")
    new.mkdir(parents=True, exist_ok=True)
    filler = fill(project.root)
    # Stopped while all 40 arrive, the daemon's first pass takes them all, and logs 40
    # `deferred` lines: more than the room left in the log's last page.
    process.send_signal(signal.SIGSTOP)
    wait_for(lambda: process_state(process.pid) == "T", what="the daemon to stop")
    for draft in drafts:
        draft.rename(draft.parent.parent / draft.name[1:-4])
    with staged_copies(new) as staged:
        process.send_signal(signal.SIGCONT)
        # Each try stages a copy in new/ (and removes it): a 41st means the retry began,
        # so the first pass, with its 40 log lines, is over.
        wait_for(lambda: staged.count > 40, what="the first pass to end and a retry to start")
    assert process.poll() is None, process.communicate()
    assert inbox(project, "QA") == []

    os.unlink(filler)
    wait_for(lambda: len(inbox(project, "QA")) == 40, timeout=20, what="40 deliveries")
    assert process.poll() is None
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=15) == 0
    entries = parsed(log_path(project))
    assert entries == read_log(project)
    [dropped] = events(project, "log_dropped")
    assert dropped["dropped"] >= 1
    assert len(events(project, "delivered")) == 40 and entries[-1]["event"] == "stopped"


class StagedCopies(FileSystemEventHandler):
    """Counts the hidden temp files created in a folder: the daemon's staged copies."""

    def __init__(self) -> None:
        self.count = 0

    def on_created(self, event: FileSystemEvent) -> None:
        if os.fsdecode(event.src_path).endswith(".tmp"):
            self.count += 1


@contextlib.contextmanager
def staged_copies(folder: Path) -> Iterator[StagedCopies]:
    handler, observer = StagedCopies(), Observer()
    observer.schedule(handler, str(folder))
    observer.start()
    try:
        yield handler
    finally:
        observer.stop()
        observer.join()


def process_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="ascii") as file:
        return file.read().rsplit(")", 1)[1].split()[0]


def queue_hidden(project: Project, n: int) -> Path:
    """A handoff for QA, complete but hidden in coder's outbox/tmp/, ready to rename in."""
    name = handoff_name("coder", ["QA"])
    drafts = project.box("coder", "outbox/tmp")
    drafts.mkdir(parents=True, exist_ok=True)
    hidden = drafts / f".{name}.tmp"
    hidden.write_bytes(handoff_bytes(name, "coder", "QA", message=f"note {n}"))
    return hidden


# --- SIGHUP ------------------------------------------------------------------------------------


@pytest.fixture
def daemon_process(project: Project) -> Iterator[subprocess.Popen[str]]:
    process = spawn(project)
    wait_event(project, "started", where=lambda e: e["pid"] == process.pid)
    yield process
    terminate(process)


def test_sighup_reopens_the_log_and_rereads_roles_tsv_and_the_daemon_lives_on(
    project: Project, daemon_process: subprocess.Popen[str]
) -> None:
    """As an external rotator does it: rename the log away, then HUP.  The daemon stays up,
    writes its next lines to a new file at the old path, reads roles.tsv again though it
    did not change, and keeps delivering."""
    rotated = log_path(project).with_name("handoffd.log.1")
    log_path(project).rename(rotated)

    daemon_process.send_signal(signal.SIGHUP)
    wait_event(project, "reloaded", where=lambda e: e["pid"] == daemon_process.pid)
    name = queue(project, "coder", ["QA"]).name
    wait_event(project, "delivered", where=lambda e: e["file"] == name)

    assert daemon_process.poll() is None
    after = [e["event"] for e in parsed(log_path(project))]
    reloaded = after.index("reloaded")  # (a rescan may have put a log back before the HUP)
    assert after[reloaded + 1] == "config_loaded" and "delivered" in after[reloaded:]
    before = [e["event"] for e in parsed(rotated)]
    assert "started" in before and "reloaded" not in before and "delivered" not in before
    daemon_process.send_signal(signal.SIGTERM)
    assert daemon_process.wait(timeout=15) == 0
    assert parsed(log_path(project))[-1]["event"] == "stopped"


def test_configuring_the_log_again_keeps_the_count_of_lines_lost_before(tmp_path: Path) -> None:
    """The daemon configures its log anew when the file was removed; lines the old file
    lost are still reported in the new one."""
    folder = tmp_path / "daemon"
    folder.mkdir()
    logger = logging.configure(str(folder / "handoffd.log"), console=False)
    shutil.rmtree(folder)
    logging.reopen()  # no folder: the next lines are lost
    logger.warning("deferred")
    logger.warning("deferred")
    folder.mkdir()
    logger = logging.configure(str(folder / "handoffd.log"), console=False)
    logger.info("log_reopened")
    entries = parsed(folder / "handoffd.log")
    assert [(e["event"], e.get("dropped")) for e in entries] == [
        ("log_dropped", 2),
        ("log_reopened", None),
    ]


# --- failures met again at every pass -----------------------------------------------------


def test_a_repeated_failure_is_logged_once_per_cause_until_it_changes_or_clears() -> None:
    said = logging.Repeats()
    assert said.first("reclaim_failed", "cleaner-2", "linked")
    assert not said.first("reclaim_failed", "cleaner-2", "linked")  # the next pass: quiet
    assert said.first("reclaim_failed", "cleaner-3", "linked")  # another subject
    assert said.first("wake_failed", "cleaner-2", "linked")  # another event
    assert said.first("reclaim_failed", "cleaner-2", "INBOX_BUSY")  # the cause changed
    assert said.first("reclaim_failed", "cleaner-2", "linked")  # and changed back
    said.cleared("reclaim_failed", "cleaner-2")
    assert said.first("reclaim_failed", "cleaner-2", "linked")  # cleared, then failed again
    said.cleared("never_failed", "x")  # nothing to clear: nothing happens
