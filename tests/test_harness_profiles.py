"""What the harness profiles read off a pane (docs/protocol.md §16), pure: screens as
`capture-pane -p -e` gives them (escapes and all) for Claude Code 2.1.332 and Codex 0.171.0,
and the wait for a harness to take a line, stepped with the time as a parameter."""

from __future__ import annotations

import pytest

from handoffd.harness import keys, profiles
from handoffd.harness.profiles import CLAUDE, CODEX, Screen

CP, XP = profiles.PROFILES[CLAUDE].prompt, profiles.PROFILES[CODEX].prompt  # their prompts
RULE = "\x1b[38;5;244m" + "─" * 60
CLAUDE_IDLE = "\n".join([
    " ▐▛███▛█   Claude Code v2.1.332", f"{CP} an earlier prompt", "● Done.",
    "✻ Baked for 3s · done 10:31 PM", "", RULE, f"\x1b[39m{CP}\u00a0\x1b[7m \x1b[0m", RULE,
    "  \x1b[38;5;211m⏵⏵ bypass permissions on\x1b[38;5;246m (shift+tab to cycle)",
])  # fmt: skip
CODEX_IDLE = "\n".join([
    "  >_ OpenAI Codex (v0.171.0)", f"{XP} an earlier prompt", "• Done.", "  Worked for 1s",
    f"\x1b[1m{XP}\x1b[0m\x1b[39m\x1b[49m \x1b[2mAsk Codex to do anything", "\x1b[0m",
    "  \x1b[38;5;223mscripted default\x1b[39m · /w/cleaner",
    "  \x1b[1m←\x1b[0m for agents · \x1b[1m?\x1b[0m for shortcuts",
])  # fmt: skip
WAKE = "You have new handoff mail. If idle, run ready_for_next.sh."


def screen(text: str, title: str = "") -> Screen:
    return Screen.parse(text, title)


def test_an_empty_box_is_idle_for_both_harnesses_whatever_its_placeholder() -> None:
    """Codex draws its placeholder dimmed: what is dim is not typed text."""
    assert profiles.box_text(screen(CLAUDE_IDLE), profiles.PROFILES[CLAUDE]) == ""
    assert profiles.box_text(screen(CODEX_IDLE), profiles.PROFILES[CODEX]) == ""
    for name, shown in ((CLAUDE, CLAUDE_IDLE), (CODEX, CODEX_IDLE)):
        assert profiles.state(screen(shown), profiles.PROFILES[name]) == profiles.IDLE


def test_a_line_typed_in_the_box_is_read_from_the_box_not_from_the_last_line() -> None:
    """Codex draws its footer under the box: the line typed is not the pane's last line."""
    typed = CODEX_IDLE.replace("\x1b[2mAsk Codex to do anything", WAKE)
    codex = profiles.PROFILES[CODEX]
    assert profiles.holds(screen(typed), codex, WAKE)
    assert profiles.state(screen(typed), codex, (WAKE,)) == profiles.UNSENT  # its Enter owed
    claude = profiles.PROFILES[CLAUDE]
    wrapped = CLAUDE_IDLE.replace(
        f"{CP}\u00a0\x1b[7m \x1b[0m",
        f"{CP} You have new handoff mail. If idle,\n  run ready_for_next.sh.",
    )
    assert profiles.holds(screen(wrapped), claude, WAKE)  # a narrow pane wraps it
    assert not profiles.holds(screen(CLAUDE_IDLE), claude, WAKE)


def test_a_line_is_taken_when_it_left_the_box_for_the_conversation_not_when_it_vanished() -> None:
    """A harness still starting may draw its box afresh: the line is gone, but not sent."""
    claude = profiles.PROFILES[CLAUDE]
    assert not profiles.sent(screen(CLAUDE_IDLE), claude, WAKE)
    shown = CLAUDE_IDLE.replace(f"{CP} an earlier prompt", f"{CP} {WAKE}")
    assert profiles.sent(screen(shown), claude, WAKE)
    spinning = CLAUDE_IDLE.replace("✻ Baked for 3s · done 10:31 PM", "✶ Brewing… (0s)")
    assert profiles.sent(screen(spinning), claude, WAKE)


HALF = "please refactor the par"  # a person's half sentence, typed into the box


@pytest.mark.parametrize("name", [CLAUDE, CODEX])
def test_a_box_holding_text_handoffd_did_not_type_is_held_busy_or_not(name: str) -> None:
    """A person's text is theirs (docs/protocol.md §17): never idle, never merely busy
    (a busy pane gets its line after --idle-wait), whatever else the screen shows; a box
    holding exactly one of handoffd's lines is unsent (§16's one more Enter applies)."""
    prof, idle = profiles.PROFILES[name], CLAUDE_IDLE if name == CLAUDE else CODEX_IDLE
    empty = f"{CP}\u00a0\x1b[7m \x1b[0m" if name == CLAUDE else "\x1b[2mAsk Codex to do anything"
    typed = f"{CP} {HALF}" if name == CLAUDE else HALF
    person = idle.replace(empty, typed)
    assert profiles.box_text(screen(person), prof) == HALF
    assert profiles.state(screen(person), prof, (WAKE,)) == profiles.HELD
    busy_row = "✶ Brewing… (2s)" if name == CLAUDE else "• Working (3s • esc to interrupt)"
    finished = "✻ Baked for 3s · done 10:31 PM" if name == CLAUDE else "  Worked for 1s"
    working = person.replace(finished, busy_row)
    assert profiles.state(screen(working), prof, (WAKE,)) == profiles.HELD
    both = idle.replace(empty, typed.replace(HALF, HALF + WAKE))  # the old bug's box
    assert profiles.state(screen(both), prof, (WAKE,)) == profiles.HELD
    ours = idle.replace(empty, typed.replace(HALF, WAKE))
    assert profiles.state(screen(ours), prof, (WAKE,)) == profiles.UNSENT
    assert profiles.state(screen(ours), prof) == profiles.HELD  # not a line it says it typed
    assert profiles.state(screen(ours.replace(finished, busy_row)), prof, (WAKE,)) == profiles.BUSY


def test_each_harness_is_busy_only_while_its_own_marker_shows() -> None:
    claude, codex = profiles.PROFILES[CLAUDE], profiles.PROFILES[CODEX]
    spinning = CLAUDE_IDLE.replace("✻ Baked for 3s · done 10:31 PM", "✶ Brewing… (2s · ↓ 5 tokens)")
    assert profiles.state(screen(spinning), claude) == profiles.BUSY
    quoted = CLAUDE_IDLE.replace("● Done.", "●  * Loading… was printed by the model")
    assert profiles.state(screen(quoted), claude) == profiles.IDLE  # not at the row's start
    working = CODEX_IDLE.replace("  Worked for 1s", "• Working (3s • esc to interrupt)")
    assert profiles.state(screen(working), codex) == profiles.BUSY
    assert profiles.state(screen(CODEX_IDLE, "⠙ cleaner"), codex) == profiles.BUSY
    assert profiles.state(screen(CODEX_IDLE, "cleaner"), codex) == profiles.IDLE


def test_a_harness_still_drawing_itself_or_showing_a_dialog_is_not_ready() -> None:
    """Claude Code's trust dialog has a prompt-like choice, but no box between rules."""
    claude, codex = profiles.PROFILES[CLAUDE], profiles.PROFILES[CODEX]
    dialog = screen(
        f"Do you trust the files in this folder?\n\n{CP} 1. Yes, proceed\n  2. No, exit"
    )
    assert not profiles.ready(dialog, claude)
    assert profiles.state(dialog, claude) == profiles.STARTING
    logo = screen("  >_ OpenAI Codex (v0.171.0)\n\n   ⣀⣤⣤⣤⣀⣀\n")
    assert profiles.state(logo, codex) == profiles.STARTING
    assert profiles.ready(screen(CLAUDE_IDLE), claude) and profiles.ready(screen(CODEX_IDLE), codex)


@pytest.mark.parametrize(("agent", "command", "override", "harness"), [
    ("claude", None, None, "claude"),
    ("cc", "env HOME=/h /opt/npm/bin/claude --dangerously-skip-permissions", None, "claude"),
    ("x", "exec env A=1 codex --model o", None, "codex"),
    ("claude", None, "generic", "generic"),
    ("shell", "/bin/bash", None, "generic"),
    ("bot", "sh -c 'exec claude'", None, "generic"),  # the first word is the program
    ("bot", "codex 'unclosed", None, "generic"),
])  # fmt: skip
def test_a_roles_harness_is_its_agent_name_or_its_commands_program_unless_the_conf_says(
    agent: str, command: str | None, override: str | None, harness: str
) -> None:
    assert profiles.resolve(agent, command, override) == harness


# --- the wait for a harness to take a line ----------------------------------------------


def test_a_wake_up_waits_for_the_harness_to_be_ready_without_counting_it_as_idle_wait() -> None:
    watch = keys.Watch(started=100.0, idle_wait=5.0)
    assert watch.see(profiles.STARTING, 130.0, False, None, False) == keys.WAIT
    assert watch.see(profiles.BUSY, 140.0, False, None, False) == keys.WAIT  # ready, working
    assert watch.see(profiles.BUSY, 144.0, False, None, False) == keys.WAIT
    assert watch.see(profiles.IDLE, 144.5, False, None, False) == keys.TYPE
    assert watch.waited(144.5) == 4.5


def test_a_harness_never_ready_in_60_s_gets_the_line_anyway_saying_not_ready() -> None:
    watch = keys.Watch(started=100.0, idle_wait=300.0)
    assert watch.see(profiles.STARTING, 159.0, False, None, False) == keys.WAIT
    assert watch.see(profiles.STARTING, 160.0, False, None, False) == keys.FORCED
    assert watch.reason == keys.NOT_READY


def test_a_busy_pane_is_forced_after_idle_wait_unless_the_role_is_hooked() -> None:
    plain = keys.Watch(started=0.0, idle_wait=5.0)
    assert plain.see(profiles.BUSY, 1.0, False, None, False) == keys.WAIT
    assert plain.see(profiles.BUSY, 6.0, False, None, False) == keys.FORCED
    hooked = keys.Watch(started=0.0, idle_wait=5.0)
    assert all(hooked.see(profiles.BUSY, t, True, None, False) == keys.WAIT for t in range(1, 900))


def test_a_hooked_pane_that_turns_idle_gives_its_stop_hook_time_to_speak_first() -> None:
    watch = keys.Watch(started=0.0, idle_wait=300.0)
    watch.see(profiles.BUSY, 10.0, True, 2.0, False)
    assert watch.see(profiles.IDLE, 10.5, True, 2.0, False) == keys.WAIT  # no end of turn yet
    assert watch.see(profiles.IDLE, 10.7, True, 10.6, False) == keys.TYPE  # the hook ran, silent
    late = keys.Watch(started=0.0, idle_wait=300.0)
    late.see(profiles.BUSY, 10.0, True, 2.0, False)
    late.see(profiles.IDLE, 10.5, True, 2.0, False)
    assert late.see(profiles.IDLE, 10.5 + keys.HOOK_GRACE, True, 2.0, False) == keys.TYPE
    told = keys.Watch(started=0.0, idle_wait=300.0)
    assert told.see(profiles.BUSY, 10.0, True, 2.0, True) == keys.CANCEL  # it announced the mail


def test_codex_whose_notify_cannot_tell_the_agent_is_typed_into_as_soon_as_its_turn_ends() -> None:
    watch = keys.Watch(started=0.0, idle_wait=300.0)
    watch.see(profiles.BUSY, 10.0, True, 9.9, False, tells=False)
    assert watch.see(profiles.IDLE, 10.1, True, 9.9, False, tells=False) == keys.TYPE


def test_an_idle_pane_gets_the_line_at_once_without_any_quiet_time() -> None:
    watch = keys.Watch(started=50.0, idle_wait=300.0)
    assert watch.see(profiles.IDLE, 50.0, True, 40.0, False) == keys.TYPE


def test_a_persons_text_holds_the_line_past_idle_wait_and_the_clock_restarts_after_it() -> None:
    """Never forced in while the box holds a person's text, hooked or not; once they
    submit it their own turn runs, and --idle-wait counts from then, not from the start."""
    watch = keys.Watch(started=0.0, idle_wait=5.0)
    assert watch.see(profiles.IDLE, 0.0, False, None, False) == keys.TYPE
    assert all(watch.see(profiles.HELD, t, False, None, False) == keys.HELD
               for t in range(1, 900))  # fmt: skip
    assert watch.see(profiles.BUSY, 900.0, False, None, False) == keys.WAIT  # their turn
    assert watch.see(profiles.BUSY, 903.9, False, None, False) == keys.WAIT  # 5 s from 899
    assert watch.see(profiles.BUSY, 904.0, False, None, False) == keys.FORCED
    cleared = keys.Watch(started=0.0, idle_wait=5.0)
    cleared.see(profiles.HELD, 1.0, True, None, False)
    assert cleared.see(profiles.IDLE, 2.0, True, None, False) == keys.TYPE  # emptied: typed
    unsent = keys.Watch(started=0.0, idle_wait=5.0)
    assert unsent.see(profiles.UNSENT, 1.0, False, None, False) == keys.TYPE  # Enter owed


class Box:
    """A harness's box for `type_line` and `submitted`: what it shows, and the keys sent."""

    def __init__(self, prof: profiles.Profile, shows: str) -> None:
        self.prof, self.shows, self.keys = prof, shows, []  # type: list[tuple[str, ...]]

    def look(self) -> Screen:
        return screen(CLAUDE_IDLE.replace(f"{CP}\u00a0\x1b[7m \x1b[0m", f"{CP} {self.shows}"))

    def send(self, *typed: str) -> None:
        self.keys.append(typed)


def test_no_key_goes_into_a_box_holding_a_persons_text_and_an_unsent_line_gets_its_enter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Between the wait and the keys a person may start typing: nothing is sent then, not
    even the clearing.  A box left holding handoffd's own line gets only its Enter, and
    one holding the line and more is a person's: no more Enter, no clearing."""
    monkeypatch.setattr(keys, "TAKEN_WITHIN", 0.1)
    claude = profiles.PROFILES[CLAUDE]
    person = Box(claude, HALF)
    with pytest.raises(keys.BoxHeld):
        keys.type_line(person.send, person.look, claude, WAKE, (WAKE,))
    assert person.keys == []
    unsent = Box(claude, WAKE)
    keys.type_line(unsent.send, unsent.look, claude, WAKE, (WAKE,))
    assert unsent.keys == [("Enter",)]  # not typed twice
    older = Box(claude, WAKE)
    keys.type_line(older.send, older.look, claude, "another line", (WAKE, "another line"))
    assert older.keys[:2] == [("C-u",), ("-l", "--", "another line")]  # handoffd's: emptied
    joined = Box(claude, HALF + WAKE)
    assert keys.submitted(joined.look, joined.send, claude, WAKE) == (False, False)
    assert joined.keys == []
