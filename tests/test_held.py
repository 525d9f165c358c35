"""What the daemon holds back and why (docs/protocol.md §15, "A held original says why"):
the state file read back as untrusted input, the reasons in a person's words, and a
keeper that writes only when what it says changes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from handoffd.remote import held
from tests.conftest import HOSTILE, plant

DOWN = held.Link(held.DOWN, "connection refused", 1_700_000_000.0)


def state_file(root: Path) -> Path:
    path = root / ".swarmforge" / "daemon" / "state.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_what_the_keeper_saves_is_what_a_view_loads(tmp_path: Path) -> None:
    state_file(tmp_path)
    keeper = held.Keeper(str(tmp_path))
    keeper.update(DOWN, {"/p/outbox/a.handoff": (1_700_000_001.0, "nats: not connected to x")})
    loaded = held.load(str(tmp_path))
    assert loaded.link == DOWN
    assert loaded.deferred == {"/p/outbox/a.handoff": (1_700_000_001.0, "nats: not connected to x")}


def test_the_keeper_writes_only_on_a_change_and_nothing_for_a_project_with_nothing_to_say(
    tmp_path: Path,
) -> None:
    keeper = held.Keeper(str(tmp_path))
    keeper.update(None, {})
    assert not state_file(tmp_path).exists()  # no NATS, nothing deferred: no file at all
    keeper.update(DOWN, {})
    first = os.stat(state_file(tmp_path))
    keeper.update(held.Link(held.DOWN, "connection refused", 1_700_000_000.0), {})
    assert os.stat(state_file(tmp_path)).st_ino == first.st_ino  # the same: not rewritten
    keeper.update(None, {})  # what it said is over: said so
    assert held.load(str(tmp_path)).link is None


@pytest.mark.parametrize(
    "raw",
    [b"not json", b"[1, 2]", json.dumps({"nats": {"state": "sideways"}}).encode(),
     json.dumps({"nats": "up", "deferred": {"x": "y"}}).encode(),
     json.dumps({"deferred": {"p": [float("inf"), "r"], "q": [True, "r"], "s": [1, 2],
                              "t": [-1e308, "r"], "u": [time.time() + 3600, "r"]}}).encode(),
     b"{" + b" " * (held.LIMIT + 1) + b"}", b"[" * 60000],
    ids=["garbage", "a list", "an unknown state", "wrong types", "bad times", "oversized",
         "nested past the parser's depth"],
)  # fmt: skip
def test_a_state_file_of_the_wrong_shape_says_nothing(tmp_path: Path, raw: bytes) -> None:
    state_file(tmp_path).write_bytes(raw)
    loaded = held.load(str(tmp_path))
    assert (loaded.link, loaded.deferred) == (None, {})


@pytest.mark.parametrize("what", HOSTILE)
def test_a_state_file_that_is_no_regular_file_is_never_waited_on(tmp_path: Path, what: str) -> None:
    plant(state_file(tmp_path), what, tmp_path)
    started = time.monotonic()
    assert held.load(str(tmp_path)).link is None
    assert time.monotonic() - started < 2


def test_a_long_reason_is_cut_and_kept_as_text_to_be_escaped_where_shown(tmp_path: Path) -> None:
    state_file(tmp_path).write_text(json.dumps(
        {"nats": {"state": "down", "why": "\x1b[2J" + "x" * 900, "since": 1.0}}
    ))  # fmt: skip
    link = held.load(str(tmp_path)).link
    assert link is not None and len(link.why) == held.TEXT_LIMIT


@pytest.mark.parametrize(
    ("reason", "link", "said"),
    [("nats: not connected to nats://h:4222", DOWN, "NATS unreachable: connection refused"),
     ("nats: not connected to nats://h:4222", None, "NATS unreachable"),
     ("nats: not configured", None, "a role on another host, and no nats line in swarmforge.conf"),
     ("nats: timed out", DOWN, "NATS: timed out"),
     ("ENOSPC: No space left on device", DOWN, "ENOSPC: No space left on device")],
)  # fmt: skip
def test_a_reason_is_said_in_a_persons_words(
    reason: str, link: held.Link | None, said: str
) -> None:
    assert held.plain(reason, link) == said


def test_the_nats_line_is_said_only_while_the_servers_cannot_be_reached() -> None:
    assert held.nats_line(DOWN) == "NATS: unreachable (connection refused)"
    assert held.nats_line(held.Link(held.UP)) == held.nats_line(None) == ""
    assert held.link_line(held.Link(held.UP), "nats://h:4222") == "NATS: connected (nats://h:4222)"
    assert held.link_line(None, "u").startswith("NATS: still connecting to u")


def test_what_up_and_start_say_of_the_link_holds_no_control_character_of_the_file() -> None:
    """The why is read back from the state file, hostile like anything under `.swarmforge/`:
    `up` and `start` print it escaped, as `status` does, never for the terminal to obey."""
    planted = held.Link(held.DOWN, "\x1b]0;PWNED\x07\x1b[2J\u202eevil")
    said = held.link_line(planted, "nats://h:4222")
    assert said == "NATS: unreachable (\\x1b]0;PWNED\\x07\\x1b[2J\\u202eevil)"


def test_the_first_link_is_awaited_only_while_still_connecting(tmp_path: Path) -> None:
    state_file(tmp_path)
    keeper = held.Keeper(str(tmp_path))
    keeper.update(held.Link(held.CONNECTING), {})
    started = time.monotonic()
    assert held.first_link(str(tmp_path), timeout=0.3).state == held.CONNECTING  # type: ignore[union-attr]
    assert time.monotonic() - started >= 0.3
    keeper.update(DOWN, {})
    assert held.first_link(str(tmp_path), timeout=30) == DOWN
