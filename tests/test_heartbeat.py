"""The heartbeat file: two lines, rewritten only when they change, otherwise touched."""

from __future__ import annotations

import os
import time
from pathlib import Path

from handoffd import heartbeat
from tests.conftest import HANG, Project


def test_a_role_that_never_beat_has_no_heartbeat(tmp_path: Path) -> None:
    assert heartbeat.read(str(tmp_path)) is None


def test_renew_writes_agent_and_conversation(tmp_path: Path) -> None:
    heartbeat.renew(str(tmp_path), "claude", "c-42")
    assert (tmp_path / "heartbeat").read_text() == "agent: claude\nconversation: c-42\n"
    beat = heartbeat.read(str(tmp_path))
    assert beat is not None
    assert (beat.agent, beat.conversation) == ("claude", "c-42")


def test_an_empty_conversation_reads_back_empty(tmp_path: Path) -> None:
    heartbeat.renew(str(tmp_path), "codex", "")
    beat = heartbeat.read(str(tmp_path))
    assert beat is not None and (beat.agent, beat.conversation) == ("codex", "")


def test_same_content_only_touches_the_file(tmp_path: Path) -> None:
    heartbeat.renew(str(tmp_path), "claude", "c-1")
    path = tmp_path / "heartbeat"
    inode = path.stat().st_ino
    os.utime(path, (1_000_000, 1_000_000))
    heartbeat.renew(str(tmp_path), "claude", "c-1")
    assert path.stat().st_ino == inode  # not rewritten
    beat = heartbeat.read(str(tmp_path))
    assert beat is not None and beat.at > 1_000_000


def test_new_content_replaces_the_file_atomically(tmp_path: Path) -> None:
    heartbeat.renew(str(tmp_path), "claude", "c-1")
    inode = (tmp_path / "heartbeat").stat().st_ino
    heartbeat.renew(str(tmp_path), "claude", "c-2")
    assert (tmp_path / "heartbeat").stat().st_ino != inode  # a rename, not an in-place edit
    assert (tmp_path / "heartbeat").read_text() == "agent: claude\nconversation: c-2\n"
    assert sorted(os.listdir(tmp_path)) == ["heartbeat"]  # no temp file left


def test_at_is_the_files_mtime(tmp_path: Path) -> None:
    heartbeat.renew(str(tmp_path), "a", "")
    os.utime(tmp_path / "heartbeat", (1_700_000_000, 1_700_000_000))
    beat = heartbeat.read(str(tmp_path))
    assert beat is not None and beat.at == 1_700_000_000


def test_the_heartbeat_is_a_plain_readable_file_not_an_executable_one(tmp_path: Path) -> None:
    """Created like any data file (0644 before the umask), never with execute bits."""
    heartbeat.renew(str(tmp_path), "claude", "")
    assert (tmp_path / heartbeat.NAME).stat().st_mode & 0o111 == 0


# --- what a killed rewrite leaves ---------------------------------------------------------------

NO_PID = 4_194_305  # past the kernel's largest pid_max: no process ever has it


def test_a_rewrite_sweeps_a_killed_rewrites_temp_even_when_its_pid_is_reused(
    project: Project,
) -> None:
    """`.heartbeat.<pid>.tmp` is what a renewal killed between its write and its rename
    leaves.  The next rewrite removes it once its writer is gone: no process has that pid,
    or the temp is older than a minute, whoever has that pid now (pids are reused within
    minutes; pid 1 is always alive).  A live writer's fresh temp is left alone."""
    handoffs = project.handoffs("coder")
    handoffs.mkdir(parents=True, exist_ok=True)
    reused, dead, fresh = (handoffs / f".heartbeat.{pid}.tmp" for pid in (1, NO_PID, os.getpid()))
    for temp in (reused, dead, fresh):
        temp.write_text("agent: someone\n")
    old = time.time() - 10 * 60
    os.utime(reused, (old, old))
    beat = project.run("handoffd", "heartbeat", "--agent", "newcomer", role="coder", timeout=HANG)
    assert beat.code == 0, beat.err
    assert (handoffs / "heartbeat").read_text() == "agent: newcomer\nconversation:\n"
    assert sorted(n for n in os.listdir(handoffs) if n.startswith(".heartbeat.")) == [fresh.name]


def test_the_idle_mark_is_the_mtime_of_h_idle_and_a_link_there_is_no_mark(tmp_path: Path) -> None:
    assert heartbeat.idle_at(str(tmp_path)) is None
    target = tmp_path / "elsewhere"
    target.write_text("idle\n")
    (tmp_path / "idle").symlink_to(target)
    assert heartbeat.idle_at(str(tmp_path)) is None  # never followed

    before = time.time()
    path = heartbeat.mark_idle(str(tmp_path))  # replaces the link, never writes through it
    at = heartbeat.idle_at(str(tmp_path))
    assert path == str(tmp_path / "idle") and not os.path.islink(path)
    assert at is not None and at >= before - 1 and target.read_text() == "idle\n"
