"""A screen its harness's profile does not recognise (docs/protocol.md §17, "Releases move"):
Codex 0.150 draws no `? for shortcuts` footer, so its idle pane never looks idle to the
profile.  Pure, with the time a parameter; then the daemon's waker on a real tmux pane
drawing that screen: driven as generic once 60 s (shortened here) pass unrecognised, the
wake-up typed, and `status` saying so."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoffd.harness import pane, profiles, recognise
from handoffd.harness.profiles import CLAUDE, CODEX, Screen
from handoffd.harness.recognise import RECOGNISE_WITHIN, Recognition
from handoffd.wakeups import panes
from handoffd.wakeups.wake import TEXT
from tests.conftest import Project, wait_for
from tests.daemon_support import Tmux, events, open_daemon, queue, tmux_server, use_socket
from tests.test_harness_profiles import CLAUDE_IDLE, CODEX_IDLE

XP = profiles.PROFILES[CODEX].prompt
DIM, BOLD, RESET = "\x1b[2m", "\x1b[1m", "\x1b[0m\x1b[39m\x1b[49m"
# Codex 0.150.0's idle screen as `capture-pane -e` gave it (offline, its model scripted):
# the box and its dim placeholder as 0.171 draws them, but no `? for shortcuts` footer
CODEX_150_IDLE = "\n".join([
    f"│ >_ {BOLD}OpenAI Codex{RESET}{DIM} (v0.150.0)                 │", "",
    f"  {BOLD}Tip:{RESET} Build faster with Codex.", "", "",
    f"{BOLD}{XP}{RESET} {DIM}Ask Codex to do anything", RESET,
    f"  \x1b[38;2;246;226;183mscripted default{DIM}\x1b[39m · {RESET}/tmp/w/cleaner",
])  # fmt: skip
CODEX_150_WORKING = "• Working (3s • esc to interrupt)\n" + CODEX_150_IDLE
CODEX_150_TYPING = CODEX_150_IDLE.replace(f"{DIM}Ask Codex to do anything", "please refac")
CODEX = profiles.PROFILES[profiles.CODEX]


def screen(text: str) -> Screen:
    return Screen.parse(text)


def test_codex_0_150s_idle_screen_is_driven_as_generic_after_60_s_and_0_171s_never() -> None:
    assert profiles.state(screen(CODEX_150_IDLE), CODEX) == profiles.STARTING  # never idle
    old, new = Recognition(), Recognition()
    for at in (0.0, 30.0, RECOGNISE_WITHIN - 0.1):
        assert old.see(screen(CODEX_150_IDLE), CODEX, 1000.0, 1000.0 + at)
    assert not old.see(screen(CODEX_150_IDLE), CODEX, 1000.0, 1000.0 + RECOGNISE_WITHIN)
    for at in (0.0, 61.0, 3600.0):
        assert new.see(screen(CODEX_IDLE), CODEX, 1000.0, 1000.0 + at)
    claude = Recognition()
    assert claude.see(screen(CLAUDE_IDLE), profiles.PROFILES[CLAUDE], 5.0, 5000.0)


def test_a_busy_marker_or_a_ready_box_holding_text_restarts_the_60_s() -> None:
    seen = Recognition()
    assert seen.see(screen(CODEX_150_IDLE), CODEX, 1000.0, 1000.0)
    assert seen.see(screen(CODEX_150_WORKING), CODEX, 1000.0, 1050.0)  # a turn runs
    assert seen.see(screen(CODEX_150_IDLE), CODEX, 1000.0, 1109.0)
    assert not seen.see(screen(CODEX_150_IDLE), CODEX, 1000.0, 1110.0)
    # once driven as generic, a turn's busy marker does not bring the profile back: after
    # the turn the pane would look busy to it again
    assert not seen.see(screen(CODEX_150_WORKING), CODEX, 1000.0, 1200.0)
    assert not seen.see(screen(CODEX_150_IDLE), CODEX, 1000.0, 1201.0)
    typed = CODEX_IDLE.replace(f"{DIM}Ask Codex to do anything", "please refac")
    held = Recognition()  # a person types into 0.171's box from the start: recognised
    for at in (0.0, 59.0, 118.0, 177.0):
        assert held.see(screen(typed), CODEX, 1000.0, 1000.0 + at)
    unready = Recognition()  # text in 0.150's box: no footer, nothing known
    assert unready.see(screen(CODEX_150_TYPING), CODEX, 1000.0, 1000.0)
    assert not unready.see(screen(CODEX_150_TYPING), CODEX, 1000.0, 1000.0 + RECOGNISE_WITHIN)


def test_once_read_a_dialog_keeps_the_profile_but_a_box_never_ready_does_not() -> None:
    """A dialog in the box's place (Claude Code's permission question) is waited on by the
    profile however long it stands, never typed into as generic; Codex 0.150, idle for a
    moment as it starts, then shows a box the profile never reads as ready: generic 60 s
    later.  A new pane starts afresh; seen idle, a pane is the profile's again."""
    claude, seen = profiles.PROFILES[CLAUDE], Recognition()
    dialog = screen(
        f"Do you want to proceed?\n\n{profiles.PROFILES[CLAUDE].prompt} 1. Yes\n  2. No"
    )
    assert seen.see(screen(CLAUDE_IDLE), claude, 1000.0, 1000.0)
    for at in (1.0, 600.0, 3600.0):
        assert seen.see(dialog, claude, 1000.0, 1000.0 + at)
    assert seen.see(dialog, claude, 5000.0, 5000.0)  # a new pane: not read idle yet, 60 s
    assert not seen.see(dialog, claude, 5000.0, 5000.0 + RECOGNISE_WITHIN)

    old = Recognition()
    assert old.see(screen(CODEX_IDLE), CODEX, 1000.0, 1000.0)  # its footer, for a moment
    assert old.see(screen(CODEX_150_IDLE), CODEX, 1000.0, 1001.0)
    assert old.see(screen(CODEX_150_IDLE), CODEX, 1000.0, 1000.0 + RECOGNISE_WITHIN - 0.1)
    assert not old.see(screen(CODEX_150_IDLE), CODEX, 1000.0, 1000.0 + RECOGNISE_WITHIN)
    assert old.see(screen(CODEX_IDLE), CODEX, 1000.0, 1100.0)  # idle after all: the profile's
    assert old.see(screen(CODEX_150_IDLE), CODEX, 1000.0, 1100.0 + RECOGNISE_WITHIN - 0.1)


# --- the waker on a real pane -----------------------------------------------------------

# Codex 0.150 as far as its screen goes: busy (its `Working` row) for argv[2] seconds, then
# idle, drawn as that release draws it; every byte typed into it recorded as `<ns> <byte>`.
OLD_CODEX = """
import os, sys, threading, time, tty
out = open(sys.argv[1], "w", buffering=1)
busy, idle = float(sys.argv[2]), sys.argv[3].encode()
working = "\\u2022 Working (1s \\u2022 esc to interrupt)\\n".encode() + idle
tty.setraw(0)
def draw(text):
    os.write(1, b"\\x1b[H\\x1b[2J" + text.replace(b"\\n", b"\\r\\n"))
draw(working if busy else idle)
def settle():
    time.sleep(busy)
    draw(idle)
threading.Thread(target=settle, daemon=True).start()
while True:
    byte = os.read(0, 1)
    if not byte:
        break
    out.write(f"{time.monotonic_ns()} {byte[0]}\\n")
"""


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    yield from tmux_server()


def old_codex(tmux: Tmux, busy: float) -> Path:
    """QA's session running the stand-in, recorded by `up` as Codex 0.150.0."""
    path = Path(tmux.dir) / "QA.bytes"
    tmux.run("new-session", "-d", "-s", "QA", "-x", "120", "-y", "30", sys.executable, "-c",
             OLD_CODEX, str(path), str(busy), CODEX_150_IDLE)  # fmt: skip
    wait_for(lambda: "Ask Codex" in tmux.capture("QA"), what="the stand-in to draw")
    pane.record(tmux.socket, "QA", "codex", version="0.150.0")
    return path


def typed(path: Path) -> bytes:
    lines = path.read_text().splitlines() if path.exists() else []
    return bytes(int(line.split()[1]) for line in lines)


def test_a_hooked_pane_whose_screen_is_not_recognised_gets_its_wake_up_typed_as_generic(
    project: Project, tmux: Tmux, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in is busy a moment (its `Working` row: the profile knows that much), then
    idle as Codex 0.150 draws it, which the profile never reads as idle; its notify ran
    (the role is hooked).  The wake-up used to wait for ever; now the pane is driven as
    generic once its screen went unrecognised (1.5 s here, 60 s in the daemon): typed at
    §5's cadence after the quiet time, submitted, and `status` says why."""
    monkeypatch.setattr(recognise, "RECOGNISE_WITHIN", 1.5)
    path = old_codex(tmux, busy=1.0)
    idle_mark = project.handoffs("QA") / "idle"
    idle_mark.parent.mkdir(parents=True, exist_ok=True)
    idle_mark.touch()
    now = time.time() + 1
    os.utime(idle_mark, (now, now))  # its notify ran since the pane started: hooked
    use_socket(project, tmux.socket)
    queue(project, "coder", ["QA"])
    daemon = open_daemon(project, record=False, idle_after=1.0, idle_wait=300.0)
    try:
        asked = time.monotonic()
        daemon.step(1000.0)
        got = wait_for(lambda: (lambda b: b if b.endswith(b"\r\n") else None)(typed(path)), 15,
                       "the wake-up typed")  # fmt: skip
        assert got == TEXT.encode() + b"\r\n"  # §5's cadence: text, C-m, C-j
        assert time.monotonic() - asked >= 1.0 + 1.5  # busy, then unrecognised for 1.5 s
        assert daemon.waker.drain(10)
        [woke] = events(project, "wake")
        assert (woke["role"], woke["submitted"], woke["forced"]) == ("QA", True, False)
        assert "via" not in woke and events(project, "wake_forced") == []
        daemon.step(1001.0)  # saves what `status` shows of the panes
        seen = panes.load(str(project.root))["QA"]
        assert (seen["harness"], seen["unrecognised"]) == ("codex", "codex 0.150.0")
    finally:
        daemon.close()
