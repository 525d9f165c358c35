"""`handoffd status` end to end: a real project with real worktrees, the installed
command, a real daemon and a real terminal (docs/protocol.md §8)."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from handoffd.board import status as board_status
from handoffd.core import handoff as hf
from handoffd.snapshot.snapshot import take_snapshot
from tests.conftest import Project
from tests.daemon_support import handoffd, queue, running_pid, stopping
from tests.swarm_support import HANDOFFD, command_env

FIELDS = [
    "card",
    "id",
    "role",
    "state",
    "color",
    "detail",
    "from",
    "to",
    "priority",
    "type",
    "task",
    "blocked_reason",
    "claim",
    "depends_on",
    "latest_report",
    "age_s",
    "path",
    "wakes",
    "tokens",
]


def name(n: int, sender: str = "coder", to: str = "QA") -> str:
    return f"50_20260101T000000Z_{n:06d}_from_{sender}_to_{to}.handoff"


def ident(n: int, sender: str = "coder") -> str:
    return f"20260101T000000Z_{n:06d}_from_{sender}"


def put(project: Project, n: int, role: str = "QA", box: str = "inbox/new", **headers: str) -> Path:
    """A delivered copy of handoff `n` from coder, in `role`'s `box`."""
    return project.put(
        role, name(n, to=role), box=box, id=ident(n), to=role, recipient=role,
        enqueued_at="2026-01-01T00:00:00Z", **headers,
    )  # fmt: skip


def cards(project: Project, *args: str) -> list[dict[str, Any]]:
    result = handoffd("status", "--json", "--root", str(project.root), *args)
    assert result.returncode == 0, result.stderr
    data: list[dict[str, Any]] = json.loads(result.stdout)
    return data


def by_card(project: Project, *args: str) -> dict[str, dict[str, Any]]:
    return {card["card"]: card for card in cards(project, *args)}


def test_json_lists_every_open_card_with_exactly_the_contracts_fields(project: Project) -> None:
    put(project, 1, task="parser-slice-3")
    path = put(project, 2, role="cleaner", box="inbox/in_process/batch_20260101T000000Z_000001")
    [first, second] = sorted(cards(project), key=lambda card: card["id"])
    assert list(first) == FIELDS
    assert (first["card"], first["state"], first["color"], first["task"]) == (
        f"{ident(1)}@QA", "new", "orange", "parser-slice-3",
    )  # fmt: skip
    assert (first["from"], first["to"], first["priority"], first["claim"]) == (
        "coder", ["QA"], "50", None,
    )  # fmt: skip
    assert second["state"] == "in_process" and second["path"] == str(path)
    assert second["claim"]["role"] == "cleaner" and second["claim"]["live"] is False


def test_a_failed_original_is_red_with_its_reason(project: Project) -> None:
    failed = queue(project, "coder", ["nobody"])
    target = project.box("coder", "failed") / failed.name
    target.parent.mkdir(parents=True)
    failed.rename(target)
    (target.parent / (target.name + ".error")).write_text("Unknown recipient role 'nobody'.\n")
    [card] = cards(project)
    assert (card["state"], card["color"]) == ("failed", "red")
    assert card["detail"] == "failed: Unknown recipient role 'nobody'."


def test_an_outbox_file_older_than_the_stall_threshold_with_no_daemon_is_red(
    project: Project,
) -> None:
    stalled = queue(project, "coder", ["QA"])
    fresh = queue(project, "coder", ["cleaner"])
    old = time.time() - 61
    os.utime(stalled, (old, old))
    found = {card["path"]: card for card in cards(project)}
    assert found[str(stalled)]["color"] == "red"
    assert "daemon NOT RUNNING" in found[str(stalled)]["detail"]
    assert found[str(fresh)]["color"] == "orange"


def test_a_hand_made_cycle_is_reported_and_never_looped_on(project: Project) -> None:
    put(project, 1, depends_on=ident(2))
    put(project, 2, depends_on=ident(1))
    text = handoffd("status", str(project.root), timeout=20)
    assert text.returncode == 0
    cycle = f"DEPENDENCY_CYCLE: {ident(1)} -> {ident(2)} -> {ident(1)}"
    assert board_lines(text.stdout)[1] == cycle
    as_json = handoffd("status", "--json", str(project.root), timeout=20)
    assert as_json.stderr.strip() == cycle and len(json.loads(as_json.stdout)) == 2


def test_a_blocked_dependency_makes_its_dependents_red_down_the_chain(project: Project) -> None:
    put(project, 1, blocked_reason="waiting for the operator to merge PR 7")
    put(project, 2, role="cleaner", depends_on=ident(1))
    put(project, 3, role="coder", depends_on=ident(2))
    found = by_card(project)
    assert {card["color"] for card in found.values()} == {"red"}
    assert found[f"{ident(3)}@coder"]["detail"] == (
        f"inherits from {ident(1)}@QA: waiting for the operator to merge PR 7"
    )


def test_a_completed_dependency_is_looked_up_in_history(project: Project) -> None:
    put(project, 1, box="inbox/completed", blocked_reason="stale", depends_on=ident(3))
    put(project, 3, role="cleaner", blocked_reason="needs a key")
    put(project, 2, role="coder", depends_on=ident(1))
    found = by_card(project)
    # through the green card to the red one beyond it: the closure is transitive
    assert found[f"{ident(2)}@coder"]["detail"].startswith(f"inherits from {ident(3)}@cleaner")
    assert f"{ident(1)}@QA" not in found  # green only with --all
    assert by_card(project, "--all")[f"{ident(1)}@QA"]["color"] == "green"


def test_rows_are_red_then_yellow_then_orange_under_a_daemon_line(project: Project) -> None:
    put(project, 1)
    put(project, 2, blocked_reason="need a decision on the schema")
    result = handoffd("status", str(project.root))
    lines = board_lines(result.stdout)
    assert lines[0] == "daemon: NOT RUNNING · red 1 · yellow 0 · orange 1"
    assert lines[1].split() == ["STATUS", "CARD", "FROM", "TO", "PRI", "TYPE", "TASK", "AGE",
                                "DETAIL"]  # fmt: skip
    assert lines[2].split()[:5] == ["RED", f"{ident(2)}@QA", "coder", "QA", "50"]
    assert lines[2].endswith("need a decision on the schema")
    assert lines[3].split()[0] == "ORANGE" and len(lines) == 4
    assert "\033[" not in result.stdout  # not a terminal: no colour codes


def test_role_filters_the_board(project: Project) -> None:
    put(project, 1)
    put(project, 2, role="cleaner")
    assert [card["role"] for card in cards(project, "--role", "cleaner")] == ["cleaner"]
    unknown = handoffd("status", "--role", "nobody", str(project.root))
    assert unknown.returncode == 1 and "nobody" in unknown.stderr


def test_the_board_is_rendered_from_the_scan_alone_reading_no_file(project: Project) -> None:
    """docs/protocol.md §8: `board` reads (the snapshot, the harness lines), `render` is a
    pure function of what it read: it opens and lists nothing, whatever the cards show."""
    from tests.conftest import touched

    put(project, 1)
    put(project, 2, role="cleaner")
    result = board_status.board(str(project.root), None, True, 60.0)
    with touched() as seen:
        lines = board_status.render(result, time.time(), True, False)
    assert seen == [] and len(lines) > 4


def test_an_empty_board_says_so_under_a_line_per_role(project: Project) -> None:
    result = handoffd("status", str(project.root))
    assert result.stdout.splitlines() == [
        "daemon: NOT RUNNING · red 0 · yellow 0 · orange 0",
        "coder    unknown  last wake never  last take never",  # no daemon watches the panes
        "cleaner  unknown  last wake never  last take never",
        "QA       unknown  last wake never  last take never",
        "no open cards",
    ]


ROLE_LINE = re.compile(r"^\S+ +(idle \S+|busy \S+|gone|unknown)  last wake .*  last take .*$")


def board_lines(out: str) -> list[str]:
    """The board's lines without the one per role under the first (pinned above)."""
    lines = out.splitlines()
    return lines[:1] + [line for line in lines[1:] if not ROLE_LINE.match(line)]


def on_a_terminal(project: Project, **env: str) -> str:
    """What `handoffd status` writes when its stdout is a real terminal (a pty)."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [HANDOFFD, "status", str(project.root)],
        stdout=slave, stderr=slave, env=command_env(**env),
    )  # fmt: skip
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert process.wait(timeout=30) == 0
    return b"".join(chunks).decode()


def test_colour_codes_only_on_a_terminal_and_never_under_no_color(project: Project) -> None:
    put(project, 1, blocked_reason="x")
    put(project, 2)
    coloured = on_a_terminal(project)
    assert "\033[1;31mRED   \033[0m" in coloured and "\033[38;5;208mORANGE\033[0m" in coloured
    plain = on_a_terminal(project, NO_COLOR="1")
    assert "\033[" not in plain and "RED" in plain


@pytest.fixture
def daemon_project(project: Project) -> Iterator[Project]:
    yield from stopping(project)


def test_the_daemon_line_names_a_running_daemon_and_ignores_a_stale_pid_file(
    daemon_project: Project,
) -> None:
    root = str(daemon_project.root)
    assert handoffd("start", root).returncode == 0
    pid = running_pid(daemon_project)
    line = handoffd("status", root).stdout.splitlines()[0]
    assert line.startswith(f"daemon: running (pid {pid}, up ")
    assert handoffd("stop", root).returncode == 0
    pid_file = daemon_project.root / ".swarmforge" / "daemon" / "handoffd.pid"
    pid_file.write_text(f"{os.getpid()}\n")  # stale: names a live process, holds no lock
    assert handoffd("status", root).stdout.startswith("daemon: NOT RUNNING ·")


def test_orange_detail_counts_the_wake_ups_in_the_daemons_log_since_the_card_arrived(
    project: Project,
) -> None:
    put(project, 1)  # enqueued 2026-01-01T00:00:00Z
    log = project.root / ".swarmforge" / "daemon" / "handoffd.log"
    log.parent.mkdir()
    events = [("2025-12-31T23:59:00Z", "wake", "QA"), ("2026-01-01T00:02:00Z", "wake", "QA"),
              ("2026-01-01T00:04:00Z", "renotify", "QA"), ("2026-01-01T00:04:00Z", "wake", "QA"),
              ("2026-01-01T00:05:00Z", "wake", "cleaner")]  # fmt: skip
    lines = [json.dumps({"timestamp": t, "event": e, "role": r}) for t, e, r in events]
    log.write_text("\n".join([*lines, '{"cut short']) + "\n")
    [card] = cards(project)
    assert card["detail"].endswith(", 2 wake-ups")


def test_watch_redraws_until_interrupted_and_then_exits_0(project: Project) -> None:
    put(project, 1)
    process = subprocess.Popen(
        [HANDOFFD, "status", "--watch", str(project.root)],
        stdout=subprocess.PIPE, text=True, env=command_env(),
    )  # fmt: skip
    assert process.stdout is not None
    first = process.stdout.readline()
    assert first.startswith("daemon: NOT RUNNING · red 0 · yellow 0 · orange 1")
    put(project, 2, blocked_reason="stop")  # the next redraw shows it, with no restart
    while not (line := process.stdout.readline()).startswith("daemon:") and line:
        pass
    assert line.startswith("daemon: NOT RUNNING · red 1 · yellow 0 · orange 1"), line
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=10) == 0


def test_a_dependency_found_in_history_is_painted_green_in_its_dependents_closure(
    project: Project,
) -> None:
    """Views that show a card's dependencies (the web board's rows) read their colours from
    the closure: one looked up in history is green (rule 1), never an unpainted default."""
    from handoffd.board import cards

    put(project, 1, box="inbox/completed")
    put(project, 2, role="coder", depends_on=ident(1))
    board = cards.project(take_snapshot(str(project.root)), time.time())
    (dependent,) = [card for card in board.cards if card.id == ident(2)]
    assert [(dep.id, dep.colour) for dep in dependent.closure] == [(ident(1), "green")]


def test_a_dependency_done_by_one_recipient_and_open_at_another_has_both_in_the_closure(
    project: Project,
) -> None:
    """docs/protocol.md §8: the closure is every card of every handoff depended on — the
    copy one recipient completed as well as the one another still holds (the web board's
    dependency rows are read from it)."""
    from handoffd.board import cards

    both = {"to": "QA,cleaner", "enqueued_at": "2026-01-01T00:00:00Z"}
    project.put("QA", name(1, to="QA_cleaner"), box="inbox/completed", id=ident(1),
                recipient="QA", **both)  # fmt: skip
    project.put("cleaner", name(1, to="QA_cleaner"), id=ident(1), recipient="cleaner", **both)
    put(project, 2, role="coder", depends_on=ident(1))
    board = cards.project(take_snapshot(str(project.root)), time.time())
    (dependent,) = [card for card in board.cards if card.id == ident(2)]
    assert sorted((dep.card, dep.colour) for dep in dependent.closure) == [
        (f"{ident(1)}@QA", "green"),
        (f"{ident(1)}@cleaner", "orange"),
    ]
    assert f"{ident(1)}@QA" not in by_card(project)  # history still shows only under --all


def test_a_root_given_in_place_wins_over_the_environments(project: Project) -> None:
    """`status ROOT` reads ROOT even when $HANDOFFD_ROOT names another place, as every
    command with a positional ROOT does; `--root` alone works too."""
    put(project, 1)
    env = {**os.environ, "HANDOFFD_ROOT": str(project.root / "elsewhere")}
    in_place = subprocess.run([HANDOFFD, "status", "--json", str(project.root)], env=env,
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert in_place.returncode == 0, in_place.stderr
    assert [card["id"] for card in json.loads(in_place.stdout)] == [ident(1)]
    by_option = handoffd("status", "--json", "--root", str(project.root))
    # the same cards; their ages may be a second apart (two calls)
    assert [card["path"] for card in json.loads(by_option.stdout)] == [
        card["path"] for card in json.loads(in_place.stdout)
    ]


# --- hostile files (docs/protocol.md Part II) -------------------------------------------------

SECRET = "TOP-SECRET-LINE"


def plant_links(project: Project, tmp_path: Path) -> dict[str, str]:
    """A failed original whose `.error`, and a card whose one report, are links to a file
    outside the project holding a secret; the cards by what they carry."""
    secret = tmp_path / "secret.md"
    secret.write_text(f"---\nstatus: RUNNING\n---\n{SECRET}\n")
    (tmp_path / "secret.txt").write_text(f"{SECRET}\n")
    failed = project.put("coder", name(1, to="nobody"), box="failed", id=ident(1), to="nobody")
    (failed.parent / f"{failed.name}.error").symlink_to(tmp_path / "secret.txt")
    put(project, 2)
    folder = project.handoffs("QA") / "reports" / ident(2)
    folder.mkdir(parents=True)
    (folder / "20260101T000001.000000Z_RUNNING.md").symlink_to(secret)
    return {"error": f"{ident(1)}@coder", "report": f"{ident(2)}@QA"}


def test_a_report_or_error_linked_outside_never_puts_its_target_on_the_board(
    project: Project, tmp_path: Path
) -> None:
    planted = plant_links(project, tmp_path)
    shown = by_card(project, "--all")
    assert shown[planted["error"]]["color"] == "red"
    detail = shown[planted["error"]]["detail"]
    assert SECRET not in detail and "its .error is not read: a symbolic link" in detail
    assert shown[planted["report"]]["latest_report"] is None
    for args in (("--json", "--all"), ("--all",)):
        printed = handoffd("status", "--root", str(project.root), *args)
        assert printed.returncode == 0, printed.stderr
        assert SECRET not in printed.stdout


# --- text from files never drives the terminal (docs/protocol.md, Part II "Hostile files") --

ERASE_AND_REDRAW = "X\033[2K\033[1G\033[32mGREEN all fine"
TITLE = "\033]0;all good\007note"


def test_control_characters_from_files_are_printed_escaped_never_obeyed(
    project: Project,
) -> None:
    """A blocked reason that would erase its RED row and redraw it green, a note that would
    set the window's title, a C1 CSI and a right-to-left override all print as escapes."""
    put(project, 1, blocked_reason=ERASE_AND_REDRAW)
    put(project, 2, message=TITLE)
    put(project, 3, task="evil\u202etxt.exe\x9b2J")
    for env in ({}, {"NO_COLOR": "1"}):
        shown = on_a_terminal(project, **env)
        rows = {n: next(row for row in shown.splitlines() if ident(n) in row) for n in (1, 2, 3)}
        assert "X\\x1b[2K\\x1b[1G\\x1b[32mGREEN all fine" in rows[1]
        assert "\\x1b]0;all good\\x07note" in rows[2]
        assert "evil\\u202etxt.exe\\x9b2J" in rows[3]
        codes = shown.replace("\033[1;31m", "").replace("\033[38;5;208m", "")
        codes = codes.replace("\033[0m", "").replace("\r\n", "\n")  # the pty's line ends
        assert not any(char in codes for char in "\033\007\x9b\u202e\r"), repr(codes)


def test_a_crlf_file_named_with_a_carriage_return_keeps_the_columns(project: Project) -> None:
    """A file dropped by hand with CRLF line ends and a CR in its name: its card and every
    header value print escaped, so the row stays one row of aligned columns."""
    box = project.box("QA", "inbox/new")
    box.mkdir(parents=True, exist_ok=True)
    crlf = b"from: coder\r\ntype: note\r\nmessage: hi\r\n\r\nbody\r\n"
    (box / "by-hand\r.handoff").write_bytes(crlf)
    out = subprocess.run(
        [HANDOFFD, "status", str(project.root)], capture_output=True, timeout=30, check=False
    )
    assert out.returncode == 0 and b"\r" not in out.stdout
    header, row = board_lines(out.stdout.decode())[1:3]
    assert row.split()[1] == "by-hand\\r.handoff@QA"
    assert row.index("coder\\r") == header.index("FROM")


def test_a_folder_behind_a_link_is_a_warning_line_saying_what_stops(
    project: Project, tmp_path: Path
) -> None:
    """Nothing is delivered into, taken from or written through such a folder: the board
    says so under its first line (on stderr with --json, whose stdout stays a list)."""
    for n, (role, box) in enumerate([("coder", "failed"), ("QA", "inbox"),
                                     ("cleaner", "inbox/in_process/batch_x")]):  # fmt: skip
        folder = project.box(role, box)
        if folder.is_dir():
            folder.rmdir()
        folder.parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / str(n)).mkdir()
        folder.symlink_to(tmp_path / str(n))
    warnings = [
        "WARNING: coder's failed/ is a symbolic link, not a folder: handoffd never follows it, "
        "so its outbox is not delivered; replace it with a real folder",
        "WARNING: cleaner's inbox/in_process/batch_x/ is a symbolic link, not a folder: "
        "handoffd never follows it, so that batch is never shown, taken or finished; replace "
        "it with a real folder",
        "WARNING: QA's inbox/ is a symbolic link, not a folder: handoffd never follows it, so "
        "mail to it waits in its senders' outboxes and it cannot take work; replace it with a "
        "real folder",
    ]
    shown = handoffd("status", str(project.root))
    assert board_lines(shown.stdout)[1:] == [*warnings, "no open cards"]
    as_json = handoffd("status", "--json", str(project.root))
    assert (json.loads(as_json.stdout), as_json.stderr.splitlines()) == ([], warnings)
    only = handoffd("status", "--role", "QA", str(project.root))
    assert only.stdout.splitlines()[1] == "QA  unknown  last wake never  last take never"
    assert board_lines(only.stdout)[1:] == [warnings[2], "no open cards"]


def test_each_role_line_says_its_pane_since_when_and_its_last_wake_and_take() -> None:
    now = 1_800_000_000.0
    at = lambda seconds: hf.iso_now(now - seconds)  # noqa: E731
    rows: list[dict[str, object]] = [
        {"role": "coder", "pane": "idle", "pane_since": at(125), "last_wake_at": at(190),
         "last_take_at": at(61)},
        {"role": "QA", "pane": "busy", "pane_since": at(840), "last_wake_at": None,
         "last_take_at": at(5)},
        {"role": "cleaner", "pane": "gone", "pane_since": None, "last_wake_at": at(3),
         "last_take_at": None},
        {"role": "x\x1b", "pane": "unknown", "pane_since": None, "last_wake_at": None,
         "last_take_at": None},
    ]  # fmt: skip
    assert board_status.role_lines(rows, now) == [
        "coder    idle 2m  last wake 3m ago  last take 1m ago",
        "QA       busy 14m  last wake never  last take 5s ago",
        "cleaner  gone  last wake 3s ago  last take never",
        "x\\x1b    unknown  last wake never  last take never",  # a name from a file, escaped
    ]


def test_a_role_whose_input_box_holds_a_persons_text_says_so_on_its_line() -> None:
    """docs/protocol.md §17: no wake-up goes into it, and the board says why."""
    now = 1_800_000_000.0
    row: dict[str, object] = {"role": "coder", "pane": "busy", "pane_since": hf.iso_now(now - 30),
                              "last_wake_at": None, "last_take_at": None, "harness": "claude",
                              "box_holds_text": True}  # fmt: skip
    assert board_status.role_lines([row], now) == [
        "coder  claude busy 30s  input box holds text  last wake never  last take never"
    ]


def test_a_role_line_says_when_its_harness_screen_is_not_recognised() -> None:
    """Driven as generic (docs/protocol.md §17): the release is said, escaped as a file's."""
    now = 1_800_000_000.0
    rows: list[dict[str, object]] = [
        {"role": "cleaner", "harness": "codex", "pane": "idle", "pane_since": hf.iso_now(now - 5),
         "last_wake_at": None, "last_take_at": None, "unrecognised": "codex 0.150.0"},
        {"role": "coder", "harness": "claude", "pane": "unknown", "pane_since": None,
         "last_wake_at": None, "last_take_at": None, "unrecognised": "claude\x1b[2J"},
    ]  # fmt: skip
    assert board_status.role_lines(rows, now) == [
        "cleaner  codex idle 5s  last wake never  last take never"
        "  screen not recognised: codex 0.150.0",
        "coder    claude unknown  last wake never  last take never"
        "  screen not recognised: claude\\x1b[2J",
    ]


# --- the board without click ------------------------------------------------------------

PROBE_CLICK = (
    "import sys; sys.argv = ['handoffd', *sys.argv[1:]]\nfrom handoffd.entry import main\nmain()"
)


def _probe(project: Project, *args: str, env: dict[str, str] | None = None) -> tuple[str, str]:
    """`handoffd <args>` through the console script's entry: what it printed, and a line
    saying its exit code and whether click was imported (`-X importtime` names each
    module; the plain path ends the process without a teardown, so nothing else can)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", PROBE_CLICK, *args], cwd=project.root,
        capture_output=True, text=True, timeout=60, env={**command_env(), **(env or {})},
        check=False,
    )  # fmt: skip
    imported = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}  # fmt: skip
    return done.stdout, f"exit={done.returncode} click={'click' in imported}"


def test_status_with_only_its_flags_runs_without_click_and_prints_what_click_prints(
    project: Project,
) -> None:
    """The board a person watches starts without click: its text, its JSON and its exit
    code are the click command's to the byte (the same `run`, the table's defaults)."""
    put(project, 1, blocked_reason="waiting for the merge")
    put(project, 2, depends_on=ident(1))
    shown = {}
    for flags in ([], ["--json"], ["--all"], ["--roles", "--json"]):
        plain, said = _probe(project, "status", *flags)
        assert said == "exit=0 click=False", flags
        parsed, said = _probe(project, "status", *flags, "--root", str(project.root))
        assert said == "exit=0 click=True", flags
        assert plain == parsed, flags
        shown[tuple(flags)] = plain
    assert "waiting for the merge" in shown[()]
    assert [card["blocked_reason"] for card in json.loads(shown[("--json",)])][:1] == [
        "waiting for the merge"]  # fmt: skip


@pytest.mark.parametrize(
    "args", [["--window", "5"], ["--help"], ["--json", "--json"], ["--jsn"], ["."]]
)
def test_status_with_anything_but_its_own_flags_is_parsed_by_click(
    project: Project, args: list[str]
) -> None:
    """An option with a value, `--help`, a repeat, a typo, a ROOT: click parses it, as ever
    (a typo is its usage error, exit 2)."""
    _, said = _probe(project, "status", *args)
    assert said.endswith("click=True"), said
    if args == ["--jsn"]:
        assert said.startswith("exit=2")


def test_status_under_handoffd_root_is_parsed_by_click(project: Project, tmp_path: Path) -> None:
    """`HANDOFFD_ROOT` is click's to read (the `--root` option's variable): set, the board
    goes through click and shows that project, wherever it is run from."""
    _, said = _probe(project, "status", env={"HANDOFFD_ROOT": str(project.root)})
    assert said == "exit=0 click=True"
