"""Durable writes: complete or absent, never over an existing file, nothing left behind."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from handoffd import durable


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
