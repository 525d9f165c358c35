"""What the daemon sees of each role's pane (docs/protocol.md §14): the states read from
successive captures (pure), and the state file, written atomically and read back as
untrusted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from handoffd.wakeups import panes
from tests.conftest import HOSTILE, plant


def test_a_pane_is_busy_while_it_changes_and_idle_once_still_for_idle_after() -> None:
    seen = panes.Panes(idle_after=2.0)
    assert seen.observe("QA", "s", "a", True, 100.0).pane == "idle"  # first read: no change seen
    busy = seen.observe("QA", "s", "b", True, 101.0)
    assert (busy.pane, busy.since) == ("busy", 101.0)
    assert seen.observe("QA", "s", "c", True, 102.0).since == 101.0  # busy since it started
    still = seen.observe("QA", "s", "c", True, 104.0)
    assert (still.pane, still.since) == ("idle", 102.0)  # idle since its last change


def test_a_mark_after_the_last_change_makes_a_pane_idle_at_once() -> None:
    seen = panes.Panes(idle_after=10.0)
    seen.observe("QA", "s", "a", True, 100.0)
    assert seen.observe("QA", "s", "b", True, 101.0, idle_mark=100.5).pane == "busy"  # older
    marked = seen.observe("QA", "s", "b", True, 102.0, idle_mark=101.5)
    assert (marked.pane, marked.since, marked.last_idle_at) == ("idle", 101.5, 101.5)


def test_an_unreadable_pane_is_gone_if_the_server_answers_else_unknown() -> None:
    seen = panes.Panes(idle_after=2.0)
    assert seen.observe("QA", "s", None, True, 100.0).pane == "gone"
    assert seen.observe("QA", "s", None, False, 101.0).pane == "unknown"
    assert seen.observe("QA", "s", "back", True, 102.0).pane == "idle"


def test_the_state_file_is_written_on_change_only_and_reads_back(tmp_path: Path) -> None:
    (tmp_path / ".swarmforge" / "daemon").mkdir(parents=True)
    seen = panes.Panes(idle_after=2.0)
    seen.observe("QA", "s", "a", True, 100.0)
    seen.woken("QA", 103.0)
    seen.save(str(tmp_path))
    file = Path(panes.path(str(tmp_path)))
    assert panes.load(str(tmp_path)) == {"QA": {
        "pane": "idle", "session": "s", "since": 100.0, "last_wake_at": 103.0,
        "last_idle_at": None, "last_take_at": None, "harness": "generic",
        "held": False,
    }}  # fmt: skip
    before = file.stat().st_mtime_ns
    seen.observe("QA", "s", "a", True, 104.0)  # nothing changed: nothing written
    seen.save(str(tmp_path))
    assert file.stat().st_mtime_ns == before


@pytest.mark.parametrize("what", HOSTILE)
def test_a_state_file_that_is_no_regular_file_reads_as_none(tmp_path: Path, what: str) -> None:
    plant(Path(panes.path(str(tmp_path))), what, tmp_path)
    assert panes.load(str(tmp_path)) == {}


@pytest.mark.parametrize("value", ["Infinity", "-Infinity", "1e308", "-1e308", "1e20", "-1"])
def test_a_time_no_daemon_could_have_written_is_no_time(tmp_path: Path, value: str) -> None:
    """A pane's times read back from a planted file: infinite, huge, before the epoch or
    far ahead of the clock are none (`status` failed on `1e308`, `1e20` and `Infinity`,
    which no date can show, and printed a 300-digit span for `-1e308`)."""
    file = Path(panes.path(str(tmp_path)))
    file.parent.mkdir(parents=True)
    fields = ", ".join(f'"{field}": {value}' for field in panes.TIMES)
    file.write_text(f'{{"QA": {{"pane": "idle", "session": "QA", {fields}}}}}')
    assert panes.load(str(tmp_path))["QA"] == {
        "pane": "idle", "session": "QA", "since": None, "last_wake_at": None,
        "last_idle_at": None, "last_take_at": None, "harness": "generic",
        "held": False,
    }  # fmt: skip


def test_a_state_file_with_bad_fields_keeps_only_what_checks(tmp_path: Path) -> None:
    file = Path(panes.path(str(tmp_path)))
    file.parent.mkdir(parents=True)
    rows = {"QA": {"pane": "idle", "since": "soon", "session": 7, "last_wake_at": True},
            "coder": {"pane": "on fire"}, "cleaner": []}  # fmt: skip
    file.write_text(json.dumps(rows))
    assert panes.load(str(tmp_path)) == {"QA": {
        "pane": "idle", "session": "", "since": None, "last_wake_at": None,
        "last_idle_at": None, "last_take_at": None, "harness": "generic",
        "held": False,
    }}  # fmt: skip
    file.write_bytes(b"[" * (panes.LIMIT + 1))
    assert panes.load(str(tmp_path)) == {}
    file.write_bytes(b"[" * (panes.LIMIT - 1))  # read whole, nested past the parser's depth
    assert panes.load(str(tmp_path)) == {}


def test_a_change_of_state_is_told_at_once_and_a_repeat_read_is_not():
    """The daemon saves a pane's new state at once (its loop is poked), so `status` is not
    a pass behind the pane (docs/protocol.md §14); a read that changes nothing pokes nothing."""
    told = []
    seen = panes.Panes(2.0)
    seen.changed = lambda: told.append(1)
    seen.observe("QA", "s", "a", True, 100.0)  # first read: idle
    seen.observe("QA", "s", "a", True, 100.5)
    assert len(told) == 1
    seen.observe("QA", "s", "b", True, 101.0)  # changed: busy
    assert len(told) == 2
    seen.observe("QA", "s", None, True, 102.0)  # gone
    seen.observe("QA", "s", None, True, 103.0)
    assert len(told) == 3


def test_the_daemon_pokes_its_loop_when_a_pane_changes(tmp_path):
    from handoffd.daemon.daemon import Daemon
    from tests.fault_support import RecordingLog

    (tmp_path / ".swarmforge").mkdir()
    daemon = Daemon(str(tmp_path), RecordingLog())
    daemon.poke.clear()
    daemon.panes.observe("QA", "s", "a", True, 100.0)
    assert daemon.poke.is_set()
