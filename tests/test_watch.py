"""Filesystem events (docs/protocol.md §5.6): which changes wake the loop, and watches on real
directories that are re-armed when a directory is replaced."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoffd.delivery import settle
from handoffd.delivery.watch import MARKER, Watcher, is_trigger
from tests.daemon_support import wait_for

OUTBOX = "/w/coder/.swarmforge/handoffs/outbox"


@pytest.mark.parametrize(
    ("path", "trigger"),
    [
        (f"{OUTBOX}/50_x_from_coder_to_QA.handoff", True),
        ("/p/.swarmforge/roles.tsv", True),
        ("/p/.swarmforge/daemon/stop", True),
        (f"{OUTBOX}/.50_x.handoff.123.0.tmp", False),
        (f"{OUTBOX}/.hidden.handoff", False),
        (f"{OUTBOX}/notes.txt", False),
        (f"{OUTBOX}/tmp/50_x.handoff", False),
        ("/w/coder/.swarmforge/handoffs/sent/50_x.handoff", False),
        ("/w/coder/.swarmforge/handoffs/inbox/new/50_x.handoff", False),
        ("/p/.swarmforge/daemon/handoffd.log", False),
    ],
)
def test_only_outbox_handoffs_roles_tsv_and_the_stop_file_trigger_a_pass(
    path: str, trigger: bool
) -> None:
    assert is_trigger(path) is trigger


class Events:
    def __init__(self) -> None:
        self.fired = threading.Event()

    def __call__(self) -> None:
        self.fired.set()

    def wait(self, timeout: float = 2.0) -> bool:
        fired = self.fired.wait(timeout)
        self.fired.clear()
        return fired


@pytest.fixture
def watching() -> Iterator[tuple[Watcher, Events]]:
    events = Events()
    watcher = Watcher(events)
    yield watcher, events
    watcher.stop()


def drop(directory: Path, name: str = "50_x_from_coder_to_QA.handoff") -> None:
    temp = directory / "tmp" / f".{name}.tmp"
    temp.parent.mkdir(exist_ok=True)
    temp.write_text("x")
    os.rename(temp, directory / name)  # as swarm_handoff does: a rename into outbox/


def test_a_handoff_renamed_into_a_watched_outbox_fires(
    tmp_path: Path, watching: tuple[Watcher, Events]
) -> None:
    watcher, events = watching
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    assert watcher.update([str(outbox)]) == [str(outbox)]

    drop(outbox)

    assert events.wait()


def test_a_missing_directory_is_armed_once_it_exists(
    tmp_path: Path, watching: tuple[Watcher, Events]
) -> None:
    watcher, events = watching
    outbox = tmp_path / "outbox"
    assert watcher.update([str(outbox)]) == []
    outbox.mkdir()
    assert watcher.update([str(outbox)]) == [str(outbox)]
    assert watcher.update([str(outbox)]) == []  # already armed: left alone

    drop(outbox)

    assert events.wait()


def test_a_deleted_and_recreated_directory_is_re_armed_and_fires_again(
    tmp_path: Path, watching: tuple[Watcher, Events]
) -> None:
    watcher, events = watching
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    watcher.update([str(outbox)])
    shutil.rmtree(outbox)
    outbox.mkdir()  # on ext4 this often gets the deleted directory's inode number back

    # The old watch notices its directory's deletion on its own thread, so the rescan
    # right after may still miss it; a following one re-arms.
    wait_for(lambda: watcher.update([str(outbox)]) == [str(outbox)], 2, "the watch re-armed")
    drop(outbox)

    assert events.wait()


def test_a_directory_moved_away_and_replaced_is_re_armed(
    tmp_path: Path, watching: tuple[Watcher, Events]
) -> None:
    watcher, events = watching
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    watcher.update([str(outbox)])
    os.rename(outbox, tmp_path / "old-outbox")
    outbox.mkdir()

    assert watcher.update([str(outbox)]) == [str(outbox)]
    drop(outbox)

    assert events.wait()


def test_a_directory_no_longer_asked_for_is_unwatched(
    tmp_path: Path, watching: tuple[Watcher, Events]
) -> None:
    watcher, events = watching
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    watcher.update([str(outbox)])
    watcher.update([])

    drop(outbox)

    assert not events.wait(0.5)


def test_a_handoff_arriving_just_after_an_archive_is_not_held_back(
    tmp_path: Path, watching: tuple[Watcher, Events]
) -> None:
    """Archiving moves a file out of the watched outbox into sent/, an unwatched folder.
    watchdog would hold that half-move 0.5 s and queue every later outbox event behind
    it, so each handoff following a delivery would be seen half a second late."""
    import time

    watcher, events = watching
    outbox, sent = tmp_path / "outbox", tmp_path / "sent"
    outbox.mkdir()
    sent.mkdir()
    watcher.update([str(outbox)])
    drop(outbox, "50_a_from_coder_to_QA.handoff")
    assert events.wait()
    os.rename(outbox / "50_a_from_coder_to_QA.handoff", sent / "50_a_from_coder_to_QA.handoff")

    start = time.monotonic()
    drop(outbox, "50_b_from_coder_to_QA.handoff")
    assert events.wait()
    assert time.monotonic() - start < 0.3, "held behind the archive's half-move"


# --- how a file arrived (settle.py reads it) --------------------------------------------


def said(watcher: Watcher, path: Path) -> str | None:
    return watcher.said(str(path), os.lstat(path))


def armed_outbox(tmp_path: Path, watcher: Watcher) -> Path:
    outbox = tmp_path / "handoffs" / "outbox"
    (outbox / "tmp").mkdir(parents=True)
    watcher.update([str(outbox)])
    return outbox


def test_a_rename_from_an_unwatched_folder_is_said_moved_and_a_link_created(
    tmp_path: Path, watching: tuple[Watcher, Events]
) -> None:
    watcher, events = watching
    outbox = armed_outbox(tmp_path, watcher)
    drop(outbox, "50_a_from_coder_to_QA.handoff")  # outbox/tmp/ is not watched
    linked = outbox / "50_b_from_coder_to_QA.handoff"
    (outbox / "tmp" / "b").write_text("x")
    os.link(outbox / "tmp" / "b", linked)

    assert watcher.sync([str(outbox)]) == {str(outbox)}
    assert said(watcher, outbox / "50_a_from_coder_to_QA.handoff") == settle.MOVED
    assert said(watcher, linked) == settle.CREATED
    assert events.wait()


def test_a_file_written_in_place_is_said_written_once_the_watcher_caught_up(
    tmp_path: Path, watching: tuple[Watcher, Events]
) -> None:
    watcher, _ = watching
    outbox = armed_outbox(tmp_path, watcher)
    path = outbox / "50_a_from_coder_to_QA.handoff"
    path.write_text("x")

    assert watcher.sync([str(outbox)]) == {str(outbox)}
    assert said(watcher, path) == settle.WRITTEN


def test_a_file_changed_since_its_event_is_never_taken_on_that_events_word(
    tmp_path: Path, watching: tuple[Watcher, Events]
) -> None:
    watcher, _ = watching
    outbox = armed_outbox(tmp_path, watcher)
    drop(outbox)
    path = outbox / "50_x_from_coder_to_QA.handoff"
    watcher.sync([str(outbox)])
    before = os.lstat(path)
    watcher.stop()  # what happens next is never heard: its events are lost
    path.write_text("longer now")  # the identity tells

    assert watcher.said(str(path), before) == settle.MOVED
    assert said(watcher, path) == settle.WRITTEN


def test_a_file_moved_out_of_the_outbox_is_forgotten_and_brings_no_pass(
    tmp_path: Path, watching: tuple[Watcher, Events]
) -> None:
    """Archiving (outbox/ → sent/) is a move out of the watch: reported whole, it would
    look like a file landing in the outbox, and start a pass after every delivery."""
    watcher, events = watching
    outbox = armed_outbox(tmp_path, watcher)
    sent = tmp_path / "handoffs" / "sent"
    sent.mkdir()
    drop(outbox)
    assert events.wait()
    os.rename(outbox / "50_x_from_coder_to_QA.handoff", sent / "50_x_from_coder_to_QA.handoff")

    assert watcher.sync([str(outbox)]) == {str(outbox)}
    assert not events.wait(0.3)
    assert watcher.said(str(outbox / "50_x_from_coder_to_QA.handoff"), os.lstat(sent)) is None
    assert [n for n in os.listdir(outbox) if n.startswith(".")] == []  # no marker left


def test_sync_answers_only_for_directories_it_watches(
    tmp_path: Path, watching: tuple[Watcher, Events]
) -> None:
    watcher, _ = watching
    outbox = armed_outbox(tmp_path, watcher)
    other = tmp_path / "other"
    other.mkdir()

    assert watcher.sync([str(outbox), str(other)]) == {str(outbox)}
    assert os.listdir(other) == []


def test_a_marker_a_killed_daemon_left_is_swept_when_the_outbox_is_armed(
    tmp_path: Path, watching: tuple[Watcher, Events]
) -> None:
    watcher, _ = watching
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    (outbox / f"{MARKER}999.0").write_bytes(b"")

    watcher.update([str(outbox)])

    assert os.listdir(outbox) == []
