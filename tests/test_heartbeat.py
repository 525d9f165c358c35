"""The heartbeat file: two lines, rewritten only when they change, otherwise touched."""

from __future__ import annotations

import os
from pathlib import Path

from handoffd import heartbeat


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
