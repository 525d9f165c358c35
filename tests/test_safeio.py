"""The careful reader (docs/protocol.md Part II, "Hostile files"): what it refuses and how
little it reads; then every command that reads under `.swarmforge/`, run as the installed
command against a project where a FIFO stands in for the heartbeat, the live file, a
report and an `.error`: each must answer at once (a hang fails within 10 s)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from handoffd.core import safeio
from tests.conftest import Project, helper_env

FIFO_WAIT = 10  # seconds: a command that blocks on a FIFO fails here, never stalls the suite


# --- the reader --------------------------------------------------------------------------------


def test_a_regular_file_is_read_whole_up_to_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    assert safeio.read_regular(str(path), 10) == b"x" * 10


def test_a_file_over_the_limit_is_refused_after_reading_one_byte_more(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 11)
    with pytest.raises(safeio.TooLarge, match="10-byte limit"):
        safeio.read_regular(str(path), 10)


def test_a_device_is_refused_without_reading_it() -> None:
    with pytest.raises(safeio.NotRegular, match="a device"):
        safeio.read_regular("/dev/zero", 10)


def test_a_symlink_to_a_readable_file_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("password\n")
    (tmp_path / "link").symlink_to(secret)
    with pytest.raises(safeio.NotRegular, match="a symbolic link"):
        safeio.read_regular(str(tmp_path / "link"), 100)
    with pytest.raises(safeio.NotRegular, match="a symbolic link"):
        safeio.read_line(str(tmp_path / "link"))


def test_a_fifo_is_refused_at_once_and_never_opened(tmp_path: Path) -> None:
    """A FIFO with no writer would block a plain open forever; a writer waiting in its own
    open would be woken by ours.  The writer here must still be waiting afterwards."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"echo hi > {fifo}"])
    try:
        with pytest.raises(safeio.NotRegular, match="a FIFO"):
            safeio.read_regular(str(fifo), 100)
        with pytest.raises(subprocess.TimeoutExpired):
            writer.wait(timeout=0.3)  # still blocked in its open: we never opened the FIFO
    finally:
        writer.kill()
        writer.wait()


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(safeio.NotRegular, match="a directory"):
        safeio.read_regular(str(tmp_path), 100)


def test_a_refusal_is_an_os_error_so_a_reader_that_skips_unreadable_files_skips_it() -> None:
    assert issubclass(safeio.Refused, OSError)


def test_read_line_reads_the_first_line_and_never_what_follows(tmp_path: Path) -> None:
    path = tmp_path / "x.error"
    path.write_bytes(b"  Unknown recipient.  \n" + b"y" * 100_000)
    assert safeio.read_line(str(path)) == "Unknown recipient."


def test_read_line_refuses_a_line_longer_than_4_kib(tmp_path: Path) -> None:
    path = tmp_path / "x.error"
    path.write_bytes(b"y" * 4097)
    with pytest.raises(safeio.TooLarge):
        safeio.read_line(str(path))
    path.write_bytes(b"y" * 4096)
    assert safeio.read_line(str(path)) == "y" * 4096


def test_below_walks_every_folder_without_following_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "r.md").write_text("secret\n")
    base = tmp_path / "base"
    (base / "real").mkdir(parents=True)
    (base / "real" / "r.md").write_text("ours\n")
    (base / "link").symlink_to(outside)
    assert safeio.read_regular(str(base / "real" / "r.md"), 100, below=str(base)) == b"ours\n"
    with pytest.raises(safeio.NotRegular, match="a symbolic link"):
        safeio.read_regular(str(base / "link" / "r.md"), 100, below=str(base))
    with pytest.raises(safeio.NotRegular):
        safeio.open_dir(str(base / "link"), below=str(base))


def test_below_refuses_a_path_outside_it_even_spelled_with_dot_dot(tmp_path: Path) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "base-2").mkdir()
    (tmp_path / "base-2" / "f").write_text("x")
    for path in (tmp_path / "base" / ".." / "base-2" / "f", tmp_path / "base-2" / "f"):
        with pytest.raises(safeio.Outside):
            safeio.read_regular(str(path), 100, below=str(tmp_path / "base"))


def test_linked_folders_names_each_link_on_the_way_once_and_nothing_else(tmp_path: Path) -> None:
    """A link above several folders is named once for all of them; a missing folder (made
    later, as a real one) and a file in a folder's place (nothing is written through it)
    are not links."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "inbox").symlink_to(tmp_path / "outside")
    (tmp_path / "outbox").mkdir()
    (tmp_path / "outbox" / "tmp").symlink_to(tmp_path / "outside")
    (tmp_path / "sent").write_text("a file\n")
    folders = ("inbox/new", "inbox/completed", "outbox", "outbox/tmp", "sent", "failed")
    assert safeio.linked_folders(str(tmp_path), folders) == ["inbox", "outbox/tmp"]


def test_inside_compares_whole_names_not_a_raw_prefix() -> None:
    assert safeio.inside("/w/a/b", "/w/a") == "b"
    assert safeio.inside("/w/ab/c", "/w/a") is None
    assert safeio.inside("/w/a", "/w/a") is None
    assert safeio.inside("/w/a/../b", "/w/a") is None


# --- every command, with FIFOs where its files should be (docs/protocol.md Part II) --------------

TAKEN = "20260101T000000Z_000001_from_QA"
TAKEN_NAME = f"50_{TAKEN}_to_coder.handoff"
FAILED = "50_20260101T000000Z_000002_from_coder_to_ghost.handoff"


def plant_fifos(project: Project) -> None:
    """coder holds one blocked task; a FIFO is its heartbeat, its live file, a report on
    that task and the `.error` of a failed original."""
    handoffs = project.handoffs("coder")
    project.put("coder", TAKEN_NAME, box="inbox/in_process", id=TAKEN, task="t-1",
                blocked_reason="waiting", dequeued_at="2026-01-01T00:00:00Z")  # fmt: skip
    project.put("coder", FAILED, box="failed", id="20260101T000000Z_000002_from_coder", to="ghost")
    os.mkfifo(handoffs / "failed" / f"{FAILED}.error")
    os.mkfifo(handoffs / "heartbeat")
    (handoffs / "reports" / TAKEN).mkdir(parents=True)
    os.mkfifo(handoffs / "reports" / TAKEN / "20260101T000001.000000Z_RUNNING.md")
    os.mkfifo(project.worktrees["coder"] / ".swarmforge" / "HANDOFF.md")


def within(project: Project, *command: str) -> subprocess.CompletedProcess[str]:
    """Run an installed command as coder; blocking on a FIFO fails the test in 10 s."""
    return subprocess.run(
        list(command), cwd=project.worktrees["coder"], env=helper_env("coder"),
        capture_output=True, text=True, timeout=FIFO_WAIT, check=False,
    )  # fmt: skip


COMMANDS = {
    "ready_for_next": (("ready_for_next",), "TASK: "),
    "heartbeat": (("handoffd", "heartbeat"), "HEARTBEAT: "),
    "status": (("handoffd", "status"), "daemon: "),
    "status-json-all": (("handoffd", "status", "--json", "--all"), "["),
    "resume": (("handoffd", "resume"), "RESUMING: coder"),
    "unblock": (("handoffd", "unblock"), "UNBLOCKED: "),
    "digest": (("handoffd", "digest", TAKEN), "# Task t-1"),
    "carry-forward": (("handoffd", "carry-forward"), ""),
    "report": (("handoffd", "report", "--status", "RUNNING"), "REPORTED: "),
    "note": (("handoffd", "note", "--decision", "keep it"), "NOTED: "),
}


@pytest.mark.parametrize(("command", "prints"), COMMANDS.values(), ids=COMMANDS)
def test_no_command_blocks_on_a_fifo_where_a_file_should_be(
    project: Project, command: tuple[str, ...], prints: str
) -> None:
    plant_fifos(project)
    done = within(project, *command)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(prints), done.stdout
    assert "Traceback" not in done.stderr


def test_a_rewrite_replaces_a_fifo_heartbeat_and_live_file_with_files_of_its_own(
    project: Project,
) -> None:
    plant_fifos(project)
    assert within(project, "ready_for_next").returncode == 0
    assert (project.handoffs("coder") / "heartbeat").is_file()
    live = project.worktrees["coder"] / ".swarmforge" / "HANDOFF.md"
    assert live.is_file() and live.read_text().startswith("# HANDOFF — ")


def test_is_regular_says_yes_of_a_regular_file_alone_never_following_a_link(
    tmp_path: Path,
) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "file")
    shown = {name: safeio.is_regular(str(tmp_path / name))
             for name in ("file", "folder", "fifo", "link", "nothing")}  # fmt: skip
    assert shown == {"file": True, "folder": False, "fifo": False, "link": False, "nothing": False}
