"""Durable writes: complete or absent, never over an existing file, nothing left behind."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from handoffd.core import durable, safeio


def test_create_writes_every_byte_even_when_the_kernel_writes_a_few_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data[:3])))
    durable.create(str(tmp_path / "f"), b"0123456789" * 10)
    assert (tmp_path / "f").read_bytes() == b"0123456789" * 10


def test_create_never_replaces_an_existing_file_or_follows_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"old")
    os.symlink(tmp_path / "target", tmp_path / "link")
    with pytest.raises(FileExistsError):
        durable.create(str(tmp_path / "f"), b"new")
    with pytest.raises(FileExistsError):
        durable.create(str(tmp_path / "link"), b"new")
    assert (tmp_path / "f").read_bytes() == b"old"
    assert not (tmp_path / "target").exists()


def test_create_removes_the_partial_file_when_fsync_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="I/O error"):
        durable.create(str(tmp_path / "f"), b"data")
    assert os.listdir(tmp_path) == []


def test_replace_swaps_the_content_and_leaves_no_temp_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"old")
    durable.replace(str(tmp_path / "f"), b"new")
    assert (tmp_path / "f").read_bytes() == b"new"
    assert os.listdir(tmp_path) == ["f"]


def test_replace_that_cannot_rename_removes_its_temp_file(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_bytes(b"keeps the directory non-empty")
    with pytest.raises(OSError):
        durable.replace(str(tmp_path / "d"), b"new")
    assert os.listdir(tmp_path) == ["d"]


def test_temp_names_are_hidden_and_distinct(tmp_path: Path) -> None:
    first, second = (durable.temp_name(str(tmp_path), "x.handoff") for _ in range(2))
    assert first != second
    assert os.path.basename(first).startswith(".x.handoff.")
    assert first.endswith(".tmp")


def test_free_name_never_returns_a_name_already_present(tmp_path: Path) -> None:
    assert durable.free_name(str(tmp_path), "a.handoff") == "a.handoff"
    (tmp_path / "a.handoff").write_bytes(b"")
    os.symlink(tmp_path / "nowhere", tmp_path / "a.2.handoff")  # dangling still counts
    assert durable.free_name(str(tmp_path), "a.handoff") == "a.3.handoff"
    (tmp_path / "batch_x_000001").mkdir()
    assert durable.free_name(str(tmp_path), "batch_x_000001") == "batch_x_000001.2"


def test_unlink_quietly_accepts_a_file_already_gone(tmp_path: Path) -> None:
    durable.unlink_quietly(str(tmp_path / "never-there"))
    (tmp_path / "f").write_bytes(b"")
    durable.unlink_quietly(str(tmp_path / "f"))
    assert os.listdir(tmp_path) == []


def test_fsync_dir_accepts_a_directory_and_refuses_a_file(tmp_path: Path) -> None:
    durable.fsync_dir(str(tmp_path))
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        durable.fsync_dir(str(tmp_path / "f"))


def test_makedirs_flushes_the_parent_of_each_folder_it_makes_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new folder's entry lives in its parent: made durable there, outermost first, so a
    power cut cannot forget a folder (and all it will hold) that was reported made."""
    flushed: list[str] = []
    real = durable.fsync_dir
    monkeypatch.setattr(durable, "fsync_dir", lambda path: (flushed.append(path), real(path))[1])
    assert durable.makedirs(str(tmp_path / "a" / "b" / "c")) is True
    assert flushed == [str(tmp_path), str(tmp_path / "a"), str(tmp_path / "a" / "b")]
    flushed.clear()
    assert durable.makedirs(str(tmp_path / "a" / "b")) is False
    assert flushed == []  # one that exists costs no flush
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):
        durable.makedirs(str(tmp_path / "file"))


# --- files written in place: never through a hard link (docs/protocol.md §15, Part III) ---


def test_open_own_moves_a_hard_linked_file_aside_and_starts_one_of_its_own(
    tmp_path: Path,
) -> None:
    """A file appended to in place whose name shares its file with one outside (a hard
    link planted there) is moved aside, its other name untouched, and a new file made:
    what is written goes into a file nobody else has a name for."""
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"precious\n")
    os.link(outside, tmp_path / "x.log")
    fd, aside = durable.open_own(str(tmp_path / "x.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, b"ours\n")
    finally:
        os.close(fd)
    assert aside == str(tmp_path / "x.log.linked")
    assert outside.read_bytes() == b"precious\n" and Path(aside).read_bytes() == b"precious\n"
    assert (tmp_path / "x.log").read_bytes() == b"ours\n"
    assert os.stat(tmp_path / "x.log").st_nlink == 1 and os.stat(outside).st_nlink == 2


def test_open_own_opens_a_file_of_our_own_as_it_is_and_never_a_link_or_a_fifo(
    tmp_path: Path,
) -> None:
    (tmp_path / "mine").write_bytes(b"kept\n")
    fd, aside = durable.open_own(str(tmp_path / "mine"), os.O_WRONLY | os.O_APPEND)
    os.close(fd)
    assert aside is None and (tmp_path / "mine").read_bytes() == b"kept\n"  # never truncated
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "mine")
    for name in ("fifo", "link"):
        with pytest.raises(safeio.NotRegular):
            durable.open_own(str(tmp_path / name), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    with pytest.raises(FileNotFoundError):
        durable.open_own(str(tmp_path / "missing"), os.O_WRONLY | os.O_APPEND)


def test_a_temp_name_planted_as_a_hard_link_is_never_written_into(tmp_path: Path) -> None:
    """`replace` creates its temp exclusively: a hard link planted under the very name it
    would take (the pid and the counter are easy to guess) is passed over, never emptied
    or written, and the next name is taken."""
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"precious\n")
    following = next(durable._counter) + 1  # the names the next temps take, as guessed
    for n in range(following, following + 3):
        os.link(outside, tmp_path / f".f.{os.getpid()}.{n}.tmp")
    durable.replace(str(tmp_path / "f"), b"new\n")
    assert (tmp_path / "f").read_bytes() == b"new\n" and outside.read_bytes() == b"precious\n"


def test_the_folder_sweep_removes_dead_and_old_temps_and_never_a_link_or_a_live_writers(
    tmp_path: Path,
) -> None:
    """One rule for every temp sweep (reports' folders too): a dead writer's or an old temp
    goes, a live writer's and a link stay (`sweep_stale_at` reads the folder by descriptor)."""
    live = tmp_path / f".r_DONE.md.{os.getpid()}.1.tmp"
    dead = tmp_path / ".r_DONE.md.99999999999.1.tmp"  # no process can have that number
    old = tmp_path / f".r_DONE.md.{os.getpid()}.2.tmp"
    link = tmp_path / ".r_RUNNING.md.99999999999.3.tmp"
    for path in (live, dead, old):
        path.write_bytes(b"x")
    link.symlink_to(live)
    os.utime(old, (1, 1))
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        durable.sweep_stale_at(fd)
    finally:
        os.close(fd)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, link.name])
    assert durable.temp_pid(live.name) == os.getpid() and durable.temp_pid("x.md") is None
