"""An operator's actions end to end (docs/protocol.md §13): `answer`, `retry`, `dismiss`,
`reopen` as installed commands in a real project with real worktrees, run from the
project root as an operator does (no SWARMFORGE_ROLE), each refusal by its token, and the
wake-up typed into the role's real tmux session."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from handoffd.core.lifecycle import Lock
from handoffd.queue import reports
from handoffd.wakeups import wakeup
from tests.conftest import Project, Result, snapshot
from tests.daemon_support import Tmux, events, open_daemon, tmux_server, use_socket
from tests.mcp_support import agent, texts
from tests.test_board_commands import ID1, ID2, headers, name, put, run, stored

CARD = f"{ID1}@coder"
QUESTION = "Should f(a,) and f(a, ) parse the same?"
REPLY = "Yes: both parse as f(a).\n\nTrailing blanks are not significant."
WOKEN = "An operator answered you on parse. Run ready_for_next.sh to see it."


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    yield from tmux_server()


def operator(project: Project, *args: str, stdin: bytes = b"") -> Result:
    """`handoffd ARGS` as an operator: from the project root, no calling role."""
    return run(project, *args, role=None, cwd=project.root, stdin=stdin,
               env={"USER": "ann"})  # fmt: skip


def blocked_in_process(project: Project) -> Path:
    put(project, ID1, task="parse")
    assert run(project, "ready_for_next").code == 0
    assert run(project, "block", "--reason", QUESTION).code == 0
    return project.box("coder", "inbox/in_process") / name(ID1)


# --- answer --------------------------------------------------------------------------------


def test_answer_stores_the_reply_lifts_the_block_and_wakes_the_role(
    project: Project, tmux: Tmux
) -> None:
    path = blocked_in_process(project)
    use_socket(project, tmux.socket)
    tmux.session("coder")
    done = operator(project, "answer", CARD, REPLY)
    [report] = stored(project, ID1)
    assert (done.code, done.err) == (0, "")
    assert done.out == f"ANSWERED: {report.path}\nUNBLOCKED: {path}\n"
    assert (report.status, report.role, report.agent, report.conversation) == (
        "ANSWER", "coder", "ann", "",
    )  # fmt: skip
    assert report.question == QUESTION and report.text == REPLY
    assert "blocked_reason" not in headers(path)
    assert tmux.typed("coder", WOKEN) == 1


TOUCHED: list[str] | None = None  # what the audit hook records while a test arms it


def _record(event: str, args: tuple[Any, ...]) -> None:
    if TOUCHED is not None and event in ("open", "os.listdir", "os.scandir") and args:
        TOUCHED.append(os.fsdecode(args[0]) if isinstance(args[0], (str, bytes)) else "")


def test_answer_reads_the_named_roles_folders_alone(project: Project) -> None:
    """`answer <id>@coder` turns the card into a file name from coder's open folders: it
    neither lists nor opens another role's files (it used to scan every role, the daemon's
    log and every report, and project the whole board, to find one copy)."""
    global TOUCHED
    from handoffd.ops import operator
    from handoffd.ops.context import resolve_context

    blocked_in_process(project)
    put(project, ID2, to="QA")
    put(project, ID2, to="cleaner", box="inbox/in_process")
    context = resolve_context(str(project.root), needs_role=False)
    sys.addaudithook(_record)
    TOUCHED = []
    try:
        done = operator.answer(context, CARD, REPLY, by="ann")
    finally:
        touched, TOUCHED = TOUCHED, None
    assert done.code == 0, done.err
    others = [str(project.handoffs(role)) for role in ("QA", "cleaner")]
    assert [path for path in touched if path.startswith(tuple(others))] == []
    assert any(path.startswith(str(project.handoffs("coder"))) for path in touched)


def test_answer_lists_the_roles_folders_once_for_the_look_up_the_change_and_the_live_file(
    project: Project,
) -> None:
    """The look-up, the check and the live file are one listing, under the role's lock:
    nothing can move the copy between finding it and changing it (it used to list
    `in_process/` six times and `new/` four, and each of `outbox/` and `failed/` once)."""
    from handoffd.ops import operator
    from handoffd.ops.context import resolve_context
    from tests.conftest import touched

    blocked_in_process(project)
    put(project, ID2, task="lex")
    context = resolve_context(str(project.root), needs_role=False)
    with touched() as seen:
        done = operator.answer(context, CARD, REPLY, by="ann")
    assert done.code == 0, done.err
    inbox = str(project.handoffs("coder") / "inbox")
    listed = [path for event, path in seen if event != "open" and path.startswith(inbox)]
    assert sorted(listed) == sorted({f"{inbox}/new", f"{inbox}/in_process"})
    assert "working on parse" in (project.root / ".swarmforge" / "HANDOFF.md").read_text()


@pytest.mark.parametrize("header", ["a/b", "decoy", "../../x", "20260101T000000Z_000009_from_QA"])
def test_an_id_header_the_name_does_not_spell_is_never_the_cards_name_nor_its_key(
    project: Project, header: str
) -> None:
    """docs/protocol.md §15, "Names": the card, its reports and its answer all go by the id
    the file's name spells; an `id` header that differs (a `/`, a decoy, another card's
    id) is shown, never a name, a path or a key.  The answer is stored under the name's
    id, and the agent sees it in its TASK block (it used to be printed `ANSWERED:` and
    never seen: stored under one id, looked up under the other)."""
    project.put("coder", name(ID1), id=header, task="parse")
    assert run(project, "ready_for_next").code == 0
    assert run(project, "block", "--reason", QUESTION).code == 0
    shown = json.loads(operator(project, "status", "--json").out)
    assert [(c["card"], c["color"]) for c in shown] == [(CARD, "red")]
    done = operator(project, "answer", CARD, REPLY)
    assert done.code == 0, done.err
    [report] = stored(project, ID1)
    assert done.out.startswith(f"ANSWERED: {report.path}\n")
    again = run(project, "ready_for_next")
    assert f"ANSWER: {REPLY.splitlines()[0]} (ann, " in again.out, again.out
    assert f"ANSWER_FILE: {report.path}\n" in again.out
    folders = sorted(p.name for p in (project.handoffs("coder") / "reports").iterdir())
    assert folders == [ID1]


@contextlib.contextmanager
def daemon_running(project: Project) -> Iterator[Any]:
    """A daemon stepped by the test, with the project's lock held as `handoffd run` holds
    it: the commands see a running daemon and leave their wake-up requests to it."""
    daemon = open_daemon(project)
    lock = Lock(str(project.root))
    lock.acquire()
    try:
        yield daemon
    finally:
        lock.release()
        daemon.close()


def test_with_a_daemon_running_the_answer_is_typed_by_it_once_the_pane_is_idle(
    project: Project, tmux: Tmux
) -> None:
    """docs/protocol.md §14: a wake-up never goes into a working agent's pane.  With the
    daemon running, `answer` leaves its line in `H/wake`; the daemon's next pass hands it
    to its waker (idle first, submission checked) and takes the file, so it is typed once;
    the command itself types nothing."""
    blocked_in_process(project)
    use_socket(project, tmux.socket)
    tmux.session("coder")
    with daemon_running(project) as daemon:
        done = operator(project, "answer", CARD, REPLY)
        assert (done.code, done.err) == (0, "")
        assert tmux.typed("coder", WOKEN) == 0
        daemon.step(time.time() + 60)  # a rescan pass
        daemon.step(time.time() + 120)  # and the next: the request was taken
    assert daemon.waker.texts == [("coder", WOKEN)]  # type: ignore[attr-defined]
    assert not (project.handoffs("coder") / "wake").exists()


def test_with_a_daemon_watching_the_answer_is_typed_on_its_file_event_not_its_rescan(
    project: Project, tmux: Tmux
) -> None:
    """docs/protocol.md §14: the daemon watches each role's handoff directory, so the
    `H/wake` an `answer` leaves wakes it and the pass that follows types the line; it never
    waits for the next rescan (up to 30 s later)."""
    blocked_in_process(project)
    use_socket(project, tmux.socket)
    tmux.session("coder")
    daemon = open_daemon(project, watch=True)
    lock = Lock(str(project.root))
    lock.acquire()
    try:
        daemon.step(time.time())  # the first pass rescans: the watches are armed
        daemon.poke.clear()
        done = operator(project, "answer", CARD, REPLY)
        assert (done.code, done.err) == (0, "")
        assert daemon.poke.wait(10)  # the request's file event
        daemon.step(time.time())  # not a rescan: the next is a rescan period away
        assert daemon.waker.texts == [("coder", WOKEN)]  # type: ignore[attr-defined]
    finally:
        lock.release()
        daemon.close()
    assert not (project.handoffs("coder") / "wake").exists()


PLANTED = {"control": "empty, or a control character in it", "fifo": "a FIFO, not a file",
           "link": "a symbolic link, not a file", "folder": "a directory, not a file",
           "oversized": "over 512 bytes", "command": "not a line handoffd types",
           "label": "an answer's line whose label is not one handoffd makes"}  # fmt: skip


@pytest.mark.parametrize("planted", list(PLANTED))
def test_a_planted_wake_request_is_never_typed(
    project: Project, tmp_path: Path, planted: str
) -> None:
    """Hostile files: `H/wake` is untrusted.  A line with a terminal control sequence, a
    FIFO, a link to an outside file, a folder or an oversized file is taken away and never
    typed (a folder left there would stand in the way of every later request); so is a
    printable line the daemon would never build (a command for the shell in the pane), or
    an answer's line whose label keeps what `wake.label` takes out (docs/protocol.md §15)."""
    wake_file = project.handoffs("coder") / "wake"
    wake_file.parent.mkdir(parents=True, exist_ok=True)
    if planted == "command":
        wake_file.write_text(f"touch {tmp_path}/PWNED $(id)\n")
    elif planted == "label":
        wake_file.write_text(f"An operator answered you on x; touch {tmp_path}/PWNED. Run "
                             "ready_for_next.sh to see it.\n")  # fmt: skip
    elif planted == "control":
        wake_file.write_bytes(b"rm -rf ~\x1b[2K\n")
    elif planted == "fifo":
        os.mkfifo(wake_file)
    elif planted == "link":
        (tmp_path / "outside").write_text("echo pwned\n")
        wake_file.symlink_to(tmp_path / "outside")
    elif planted == "folder":
        wake_file.mkdir()
    else:
        wake_file.write_text("x" * 600 + "\n")
    daemon = open_daemon(project)
    try:
        daemon.step(time.time() + 60)
    finally:
        daemon.close()
    assert daemon.waker.texts == []  # type: ignore[attr-defined]
    assert not os.path.lexists(wake_file)
    if planted == "link":
        assert (tmp_path / "outside").read_text() == "echo pwned\n"
    [refused] = events(project, "wake_refused")  # each said, an oversized one too
    assert refused["role"] == "coder" and refused["error"] == PLANTED[planted]


def test_a_folder_planted_as_the_wake_request_never_blocks_the_requests_after_it(
    project: Project,
) -> None:
    """A folder in place of `H/wake` is removed and never followed; the next real request
    (as `answer` writes it) is typed at the next pass all the same."""
    handoffs = project.handoffs("coder")
    (handoffs / "wake").mkdir(parents=True)
    daemon = open_daemon(project)
    try:
        daemon.step(time.time() + 60)
        wakeup.ask_wake(str(handoffs), WOKEN)
        daemon.step(time.time() + 120)
    finally:
        daemon.close()
    assert daemon.waker.texts == [("coder", WOKEN)]  # type: ignore[attr-defined]
    assert sorted(p.name for p in handoffs.iterdir() if "wake" in p.name) == []


def test_the_agent_sees_the_answer_in_its_task_block_resume_and_live_file(
    project: Project,
) -> None:
    path = blocked_in_process(project)
    operator(project, "answer", CARD, REPLY, "--by", "lead")
    [report] = stored(project, ID1)
    when = report.reported_at
    taken = run(project, "ready_for_next")
    assert taken.out == (
        f"TASK: {path}\nFROM: coder\nTYPE: note\nPRIORITY: 50\nTASK_NAME: parse\n"
        f"ANSWER: Yes: both parse as f(a). (lead, {when})\nANSWER_FILE: {report.path}\n"
        "PAYLOAD:\nDo the thing.\n"
    )
    lines = run(project, "resume").out.splitlines()
    assert lines[1] == f"ANSWER: Yes: both parse as f(a). (lead, {when})"
    live = (project.worktrees["coder"] / ".swarmforge" / "HANDOFF.md").read_text()
    assert f"- {QUESTION} → answered: Yes: both parse as f(a).\n" in live


def test_the_answer_lines_go_once_the_role_reports_again(project: Project) -> None:
    blocked_in_process(project)
    operator(project, "answer", CARD, REPLY)
    run(project, "report", "--status", "RUNNING", "--file", "-", stdin=b"On it.\n")
    assert "ANSWER" not in run(project, "ready_for_next").out
    assert "ANSWER" not in run(project, "resume").out


def test_an_answered_copy_waiting_blocked_in_new_becomes_ready(project: Project) -> None:
    put(project, ID1, task="parse", blocked_reason=QUESTION)
    assert run(project, "ready_for_next").out == "NO_TASK\n"
    done = operator(project, "answer", CARD, "--file", "-", stdin=b"Ship it.\n")
    assert done.code == 0, done.err
    taken = run(project, "ready_for_next")
    assert taken.out.startswith(f"TASK: {project.box('coder', 'inbox/in_process') / name(ID1)}")
    assert "ANSWER: Ship it. (ann, " in taken.out


def test_an_answer_on_a_card_not_blocked_keeps_it_as_it_is(project: Project) -> None:
    put(project, ID1)
    before = (project.box("coder", "inbox/new") / name(ID1)).read_bytes()
    done = operator(project, "answer", CARD, "FYI: the API moved.")
    assert done.code == 0 and "UNBLOCKED" not in done.out
    assert (project.box("coder", "inbox/new") / name(ID1)).read_bytes() == before
    assert stored(project, ID1)[0].question == ""


HOSTILE_TASK = "evil\x1b[2J\x1b]0;t\x07 clear $(touch pwned) `id`"
SAFE_TASK = "evil__2J__0_t_ clear __touch pwned_ _id_"


def test_a_task_header_with_control_characters_wakes_the_role_with_a_line_made_safe(
    project: Project, tmux: Tmux
) -> None:
    """A hand-made copy's `task` is untrusted, and the line is typed into a pane that may
    hold a shell: an escape sequence, a BEL, a `$(…)` or a backquote never reach it."""
    put(project, ID1, task=HOSTILE_TASK, blocked_reason=QUESTION)
    use_socket(project, tmux.socket)
    tmux.session("coder")
    done = operator(project, "answer", CARD, REPLY)
    assert (done.code, done.err) == (0, "")
    assert tmux.typed("coder", WOKEN.replace("parse", SAFE_TASK)) == 1
    assert "\x1b" not in tmux.capture("coder")


def test_with_a_daemon_running_a_long_hostile_task_is_asked_for_and_typed_made_safe(
    project: Project,
) -> None:
    """However long the task header, the request fits `H/wake` (over 512 bytes the daemon
    would take it for a planted file and type nothing)."""
    put(project, ID1, task=HOSTILE_TASK + "é" * 600, blocked_reason=QUESTION)
    with daemon_running(project) as daemon:
        done = operator(project, "answer", CARD, REPLY)
        asked = (project.handoffs("coder") / "wake").read_bytes()
        daemon.step(time.time() + 60)
    assert (done.code, done.err) == (0, "")
    line = WOKEN.replace("parse", SAFE_TASK + "é" * (79 - len(SAFE_TASK)) + "…")
    assert asked == line.encode() + b"\n" and len(asked) <= wakeup.WAKE_LIMIT
    assert daemon.waker.texts == [("coder", line)]  # type: ignore[attr-defined]
    assert events(project, "wake_refused") == []


def test_with_a_daemon_running_a_request_that_cannot_be_left_is_wake_failed_and_leaves_no_temp(
    project: Project,
) -> None:
    """A folder with something in it at `H/wake` (nothing removes a person's files): the
    command says where and what to do, and leaves no temp file of its own behind."""
    blocked_in_process(project)
    handoffs = project.handoffs("coder")
    (handoffs / "wake" / "inside").mkdir(parents=True)
    with daemon_running(project):
        done = operator(project, "answer", CARD, REPLY)
    assert done.code == 0 and done.out.startswith("ANSWERED: ")
    said = f"{handoffs / 'wake'} is a folder, not a wake-up request: remove it"
    assert done.err == f"WAKE_FAILED: coder: {said} (the change is made; tell the agent yourself)\n"
    assert sorted(p.name for p in handoffs.iterdir() if "wake" in p.name) == ["wake"]


@pytest.mark.parametrize("planted", ["fifo", "link", "empty folder"])
def test_with_a_daemon_running_a_planted_wake_file_never_stops_the_answers_request(
    project: Project, tmp_path: Path, planted: str
) -> None:
    blocked_in_process(project)
    wake_file = project.handoffs("coder") / "wake"
    if planted == "fifo":
        os.mkfifo(wake_file)
    elif planted == "link":
        wake_file.symlink_to(tmp_path / "outside")
    else:
        wake_file.mkdir()
    with daemon_running(project):
        done = operator(project, "answer", CARD, REPLY)
    assert (done.code, done.err) == (0, "")
    assert wake_file.read_bytes() == WOKEN.encode() + b"\n" and not wake_file.is_symlink()
    assert not (tmp_path / "outside").exists()


def test_a_failed_wake_up_is_one_line_on_stderr_and_the_answer_stands(project: Project) -> None:
    blocked_in_process(project)  # the project has no tmux socket file at all
    done = operator(project, "answer", CARD, REPLY)
    assert done.code == 0 and done.out.startswith("ANSWERED: ")
    assert done.err.startswith("WAKE_FAILED: coder: ") and done.err.count("\n") == 1


def test_two_answers_at_once_are_both_kept_and_the_second_learns_of_the_first(
    project: Project,
) -> None:
    """Two operators answer one blocked card at the same moment.  The role's lock orders
    them: both answers are stored (an answer is never lost), both with the question they
    answer, and the one that came second says, on stderr, who answered first; the agent
    is shown the newest."""
    from concurrent.futures import ThreadPoolExecutor

    blocked_in_process(project)
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(operator, project, "answer", CARD, f"{who} says", "--by", who)
                for who in ("alice", "bob")]  # fmt: skip
        done = {who: run.result() for who, run in zip(("alice", "bob"), runs, strict=True)}
    assert [r.code for r in done.values()] == [0, 0], [r.err for r in done.values()]
    first, second = sorted(stored(project, ID1), key=lambda r: r.reported_at)
    late = done[second.agent]
    said = (f"ALREADY_ANSWERED: {CARD}: {first.agent} answered it at {first.reported_at} "
            f"({first.path}); both answers are kept")  # fmt: skip
    # its own line, wherever it stands: with no daemon and no tmux here, a WAKE_FAILED line
    # about telling the agent may come before it when the two runs interleave
    assert any(line.startswith(said) for line in late.err.splitlines()), late.err
    assert "ALREADY_ANSWERED" not in done[first.agent].err
    assert first.question == second.question == QUESTION
    taken = run(project, "ready_for_next")
    assert f"ANSWER: {second.agent} says ({second.agent}, {second.reported_at})" in taken.out


@pytest.mark.parametrize(
    ("card", "setup"),
    [("20990101T000000Z_000009_from_QA@coder", "none"), ("garbage", "none"),
     (f"{ID1}@nobody", "none"), (CARD, "completed"), ("../../etc@coder", "none")],
)  # fmt: skip
def test_answer_refuses_a_card_that_is_not_open_as_unknown(
    project: Project, card: str, setup: str
) -> None:
    if setup == "completed":
        put(project, ID1, box="inbox/completed", completed_at="2026-01-01T00:00:00Z")
    done = operator(project, "answer", card, REPLY)
    assert (done.code, done.out) == (2, "")
    assert done.err.splitlines()[0] == f"UNKNOWN_CARD: {card}"
    # a second line says what the card is, or that its role is none of the project's
    assert len(done.err.splitlines()) == (2 if setup == "completed" or "@nobody" in card else 1)
    assert not (project.handoffs("coder") / "reports").exists()


def test_answering_a_completed_card_says_it_is_completed(project: Project) -> None:
    """The token stays the contract's `UNKNOWN_CARD`, and a second line says what the card
    is instead of leaving the person to guess: completed, and how to open it again."""
    put(project, ID1, box="inbox/completed", completed_at="2026-01-01T00:00:00Z")
    done = operator(project, "answer", CARD, REPLY)
    assert done.err == (
        f"UNKNOWN_CARD: {CARD}\n{CARD} is completed (a green card), not open: nothing to act "
        "on; `handoffd reopen` puts it back in its role's new/\n"
    )


@pytest.mark.parametrize(
    ("args", "stdin", "said"),
    [(("",), b"", "INVALID_ANSWER: the answer is empty; give its text"),
     (("--file", "-"), b" \n\n", "INVALID_ANSWER: the answer is empty; give its text"),
     (("--file", "-"), b"x" * (16 * 1024 + 1),
      "INVALID_ANSWER: more than 16384 bytes; at most 16384"),
     (("inline", "--file", "-"), b"and a file",
      "INVALID_ANSWER: give the answer as TEXT or with --file, not both")],
)  # fmt: skip
def test_answer_refuses_an_empty_or_oversized_text_and_stores_nothing(
    project: Project, args: tuple[str, ...], stdin: bytes, said: str
) -> None:
    path = blocked_in_process(project)
    done = operator(project, "answer", CARD, *args, stdin=stdin)
    assert (done.code, done.err) == (2, said + "\n")
    assert headers(path)["blocked_reason"] == QUESTION and stored(project, ID1) == []


NOT_UTF8 = os.fsdecode(b"ok \xc3")  # as Python hands a command line's bytes on


@pytest.mark.parametrize(
    ("args", "stdin", "said"),
    [((NOT_UTF8,), b"", "INVALID_ANSWER: TEXT is not UTF-8 (it holds the byte 0xc3)"),
     (("--file", "-"), b"ok \xff\n", "INVALID_ANSWER: the text is not UTF-8 (it holds the byte "
      "0xff)"),
     (("ok", "--by", NOT_UTF8), b"", "INVALID_ARGUMENTS: --by is not UTF-8 (it holds the byte "
      "0xc3)")],
)  # fmt: skip
def test_answer_refuses_text_that_is_not_utf8_and_stores_nothing(
    project: Project, args: tuple[str, ...], stdin: bytes, said: str
) -> None:
    """Never a traceback, never U+FFFD stored in place of what the person typed."""
    path = blocked_in_process(project)
    done = operator(project, "answer", CARD, *args, stdin=stdin)
    assert (done.code, done.out, done.err) == (2, "", said + "; give it as UTF-8 text\n")
    assert headers(path)["blocked_reason"] == QUESTION and stored(project, ID1) == []


def test_dismiss_refuses_a_reason_that_is_not_utf8_saying_so(project: Project) -> None:
    card, path = refused_original(project)
    done = operator(project, "dismiss", card, "--reason", NOT_UTF8)
    assert (done.code, done.err) == (2, "INVALID_REASON: --reason is not UTF-8 (it holds the "
                                        "byte 0xc3); give it as UTF-8 text\n")  # fmt: skip
    assert path.exists()


@pytest.mark.parametrize("kind", ["missing", "fifo"])
def test_answer_refuses_a_file_it_cannot_read_as_an_answer_refusal(
    project: Project, tmp_path: Path, kind: str
) -> None:
    """docs/protocol.md §13: every refusal of `answer` is exit 2, and says `INVALID_ANSWER`."""
    blocked_in_process(project)
    given = tmp_path / "answer.md"
    if kind == "fifo":
        os.mkfifo(given)
    done = operator(project, "answer", CARD, "--file", str(given))
    why = "cannot read {}: No such file or directory" if kind == "missing" else (
        "{}: a FIFO, not a file; give '-' to pipe a text")  # fmt: skip
    assert (done.code, done.err) == (2, f"INVALID_ANSWER: {why.format(given)}\n")
    assert stored(project, ID1) == []


def test_an_answer_of_exactly_16_kib_is_taken(project: Project) -> None:
    blocked_in_process(project)
    done = operator(project, "answer", CARD, "--file", "-", stdin=b"y" * (16 * 1024))
    assert done.code == 0, done.err


def test_a_lead_agent_answers_another_through_the_tool(project: Project, tmp_path: Path) -> None:
    blocked_in_process(project)
    with agent(project, "QA", tmp_path / "server.log") as lead:
        result = lead.call("answer", card=CARD, text=REPLY, by="QA-lead")
        refused = lead.call("answer", card="nope@coder", text=REPLY)
    [report] = stored(project, ID1)
    assert not result.is_error and texts(result)[0].startswith(f"ANSWERED: {report.path}\n")
    assert report.agent == "QA-lead"
    assert refused.is_error and texts(refused) == ["UNKNOWN_CARD: nope@coder\n"]


def test_retention_keeps_every_answer_of_an_open_card_whatever_the_count(
    project: Project,
) -> None:
    handoffs = str(project.handoffs("coder"))
    first = reports.store(handoffs, ID2, "ANSWER", "coder", "ann", "", "Use v2.", 1.0,
                          {"question": "which?"})  # fmt: skip
    for n in range(reports.KEEP + 5):
        reports.store(handoffs, ID2, "RUNNING", "coder", "claude", "", f"step {n}", 2.0 + n)
    paths = reports.report_paths(handoffs, ID2)
    assert first in paths
    assert sum(1 for p in paths if p.endswith("_RUNNING.md")) == reports.KEEP


# --- retry, dismiss -----------------------------------------------------------------------


def refused_original(project: Project, to: str = "designer") -> tuple[str, Path]:
    """A handoff from QA the daemon refused (an unknown recipient): its card and path."""
    from tests.daemon_support import queue

    queued = queue(project, "QA", [to])
    assert run(project, "run", "--once", str(project.root), role=None, cwd=project.root).code == 0
    path = project.box("QA", "failed") / queued.name
    assert path.exists() and Path(f"{path}.error").exists()
    ident = queued.name.split("_", 1)[1].split("_to_")[0]
    return f"{ident}@QA", path


def board(project: Project, *args: str) -> dict[str, dict[str, object]]:
    import json

    done = operator(project, "status", "--json", *args)
    return {card["card"]: card for card in json.loads(done.out)}


def test_retry_sends_a_refused_original_back_and_the_daemon_delivers_it_once_fixed(
    project: Project, tmp_path: Path
) -> None:
    from tests.daemon_support import add_role

    card, path = refused_original(project)
    (tmp_path / "designer").mkdir()
    add_role(project, "designer", tmp_path / "designer")  # what the refusal said was missing
    done = operator(project, "retry", card)
    outbox = project.box("QA", "outbox") / path.name
    assert (done.code, done.out) == (0, f"RETRIED: {outbox}\n")
    # no daemon runs: nothing checks the original until one starts, as swarm_handoff says
    assert done.err == (f"WARNING: no handoffd daemon is running for {project.root}; this "
                        "handoff waits in outbox/ until one does. Start it with: handoffd "
                        f"start {project.root}\n")  # fmt: skip
    assert not path.exists() and not Path(f"{path}.error").exists() and outbox.exists()
    assert run(project, "run", "--once", str(project.root), role=None, cwd=project.root).code == 0
    assert (tmp_path / "designer/.swarmforge/handoffs/inbox/new" / path.name).exists()
    assert (project.box("QA", "sent") / path.name).exists()


def test_retry_of_a_file_that_would_be_refused_again_is_still_invalid_and_moves_nothing(
    project: Project,
) -> None:
    card, path = refused_original(project)
    before = sorted(os.listdir(path.parent)), sorted(os.listdir(project.box("QA", "outbox")))
    done = operator(project, "retry", card)
    assert (done.code, done.out) == (2, "")
    assert done.err == (
        "STILL_INVALID: unknown recipient role 'designer' (not in roles.tsv); nobody got a "
        f"copy\nFix what it says, or move it anyway: handoffd retry --force {card}\n"
    )
    after = sorted(os.listdir(path.parent)), sorted(os.listdir(project.box("QA", "outbox")))
    assert after == before
    assert board(project)[card]["state"] == "failed"


def test_retry_force_moves_a_file_that_would_be_refused_again(project: Project) -> None:
    card, path = refused_original(project)
    done = operator(project, "retry", "--force", card)
    outbox = project.box("QA", "outbox") / path.name
    assert (done.code, done.out) == (0, f"RETRIED: {outbox}\n")
    assert outbox.exists() and not path.exists()


def test_retry_checks_the_file_as_it_is_now_a_broken_header_too(project: Project) -> None:
    """§5's whole check on the bytes in failed/: mending the roles is not enough when the
    file itself has gone bad since."""
    from tests.daemon_support import add_role

    card, path = refused_original(project)
    (project.root / "designer").mkdir()
    add_role(project, "designer", project.root / "designer")
    path.write_text(path.read_text().replace("from: QA", "from: coder"))
    done = operator(project, "retry", card)
    assert (done.code, done.err.splitlines()[0]) == (
        2, "STILL_INVALID: header 'from: coder' does not match the sending role 'QA'",
    )  # fmt: skip
    assert path.exists()


def test_dismiss_puts_a_refused_original_aside_as_a_green_card(project: Project) -> None:
    card, path = refused_original(project)
    assert board(project)[card]["color"] == "red"
    done = operator(project, "dismiss", card, "--reason", "sent to a role we dropped")
    aside = project.box("QA", "failed/dismissed") / path.name
    assert (done.code, done.out) == (0, f"DISMISSED: {aside}\n")
    assert aside.exists() and Path(f"{aside}.error").exists() and not path.exists()
    note = Path(f"{aside}.dismissed").read_text()
    assert note.startswith("dismissed by ann at ") and note.endswith(
        ": sent to a role we dropped\n"
    )
    assert card not in board(project) and card not in operator(project, "status").out
    shown = board(project, "--all")[card]
    assert (shown["state"], shown["color"]) == ("dismissed", "green")
    assert shown["detail"] == note.strip()


def test_a_dismissed_cards_age_runs_from_its_dismissal_and_it_is_counted_apart(
    project: Project,
) -> None:
    """docs/protocol.md §15: `status --all` says how long ago it was put aside (never `?`)
    and counts it apart from the completed cards."""
    card, _ = refused_original(project)
    put(project, ID1, box="inbox/completed", completed_at="2026-01-01T00:00:00Z")
    assert operator(project, "dismiss", card, "--reason", "sent in error").code == 0
    shown = board(project, "--all")[card]
    assert isinstance(shown["age_s"], int) and 0 <= shown["age_s"] < 60, shown
    text = operator(project, "status", "--all").out.splitlines()
    assert text[0].endswith("green 2 (1 completed, 1 dismissed)"), text[0]
    [row] = [line for line in text if card in line]
    assert " ? " not in row and "dismissed by ann at " in row and row.endswith(": sent in error")
    assert "dismissed" not in operator(project, "status").out.splitlines()[0]


@pytest.mark.parametrize(
    ("line", "when"),
    [("dismissed by ann at 2026-12-01T10:00:00.000000Z: sent in error", "2026-12-01T10:00:00Z"),
     ("dismissed by bo at home at 2026-12-01T10:00:00Z: at 2026-01-01T00:00:00Z: x",
      "2026-12-01T10:00:00Z"),
     ("dismissed by ann: no time", None), ("", None)],
)  # fmt: skip
def test_the_time_of_a_dismissal_is_read_from_its_note(line: str, when: str | None) -> None:
    from handoffd.core import handoff as hf
    from handoffd.queue import failed

    assert failed.dismissed_at(line) == (hf.epoch(when) if when else None)


def test_a_folder_planted_as_a_dismissal_temp_never_stops_a_dismissal(project: Project) -> None:
    """A killed dismissal's temp files are swept; a folder of that shape is not one."""
    card, _ = refused_original(project)
    planted = project.box("QA", "failed/dismissed") / ".x.tmp"
    (planted / "inside").mkdir(parents=True)
    done = operator(project, "dismiss", card, "--reason", "sent by mistake")
    assert done.code == 0 and done.out.startswith("DISMISSED: "), done
    assert (planted / "inside").is_dir()


def test_dismiss_without_a_reason_says_dismissed_by_the_name_given(project: Project) -> None:
    card, path = refused_original(project)
    assert operator(project, "dismiss", card, "--by", "bo").code == 0
    note = (project.box("QA", "failed/dismissed") / f"{path.name}.dismissed").read_text()
    assert note.startswith("dismissed by bo at ") and note.endswith(": dismissed\n")


@pytest.mark.parametrize("command", ["retry", "dismiss"])
def test_retry_and_dismiss_refuse_a_card_that_is_not_a_failed_original(
    project: Project, command: str
) -> None:
    put(project, ID1)
    for card in (CARD, "nope@QA", "garbage"):
        done = operator(project, command, card)
        assert (done.code, done.out, done.err) == (2, "", f"NOT_FAILED: {card}\n")


def test_answering_a_refused_original_says_what_to_do_with_it(project: Project) -> None:
    card, _ = refused_original(project)
    done = operator(project, "answer", card, REPLY)
    assert done.err == (
        f"UNKNOWN_CARD: {card}\n{card} is a refused original in its sender's failed/, no "
        "agent's copy: `handoffd retry` or `handoffd dismiss` it\n"
    )


def test_a_second_retry_of_the_same_card_is_refused_and_moves_nothing(project: Project) -> None:
    card, _ = refused_original(project)
    assert operator(project, "retry", "--force", card).code == 0
    assert operator(project, "retry", card).err == f"NOT_FAILED: {card}\n"


# --- reopen --------------------------------------------------------------------------------


def test_reopen_puts_a_completed_copy_back_orange_and_wakes_the_role(
    project: Project, tmux: Tmux
) -> None:
    put(project, ID1, blocked_reason="x", task="parse")
    operator(project, "unblock", ID1, "--role", "coder")
    run(project, "ready_for_next")
    run(project, "done_with_current")
    use_socket(project, tmux.socket)
    tmux.session("coder")
    done = operator(project, "reopen", CARD, "--reason", "the fix regressed")
    target = project.box("coder", "inbox/new") / name(ID1)
    assert (done.code, done.out, done.err) == (0, f"REOPENED: {target}\n", "")
    fields = headers(target)
    assert {"completed_at", "dequeued_at", "blocked_reason"} & set(fields) == set()
    assert fields["reopened_reason"] == "the fix regressed" and "reopened_at" in fields
    assert board(project)[CARD]["color"] == "orange"
    assert tmux.typed("coder", "You have new handoff mail. If idle, run ready_for_next.sh.") == 1
    assert run(project, "ready_for_next").out.startswith(f"TASK: {target.parent.parent}")


def test_reopen_takes_a_copy_out_of_a_completed_batch(project: Project) -> None:
    put(project, ID1, to="cleaner")
    put(project, ID2, to="cleaner")
    run(project, "ready_for_next", role="cleaner")
    run(project, "done_with_current", role="cleaner")
    done = operator(project, "reopen", f"{ID2}@cleaner")
    assert done.code == 0, done.err
    assert (project.box("cleaner", "inbox/new") / name(ID2, "cleaner")).exists()
    [batch] = list(project.box("cleaner", "inbox/completed").iterdir())
    assert [p.name for p in batch.iterdir()] == [name(ID1, "cleaner")]


def test_reopen_refuses_a_card_not_green_and_a_name_already_waiting(project: Project) -> None:
    put(project, ID1)
    assert operator(project, "reopen", CARD).err == f"NOT_COMPLETED: {CARD}\n"
    assert operator(project, "reopen", "nope@nobody").err == (
        "NOT_COMPLETED: nope@nobody\nUnknown role: nobody (known roles: QA, cleaner, coder)\n"
    )
    put(project, ID1, box="inbox/completed", completed_at="2026-01-01T00:00:00Z")
    done = operator(project, "reopen", CARD)
    assert (done.code, done.err) == (2, f"REOPEN_CONFLICT: {CARD}\n")
    assert (project.box("coder", "inbox/completed") / name(ID1)).exists()


def test_reopen_finds_a_card_whose_id_its_file_name_does_not_spell(project: Project) -> None:
    """A hand-made file named `10_manual.handoff` with `id: manual-1` is the green card
    `manual-1@coder` on the board once done: reopen finds it by that name, as the board
    (and answer, retry, dismiss) does, not by file names alone."""
    project.put("coder", "10_manual.handoff", id="manual-1", task="by hand")
    run(project, "ready_for_next")
    assert run(project, "done_with_current").code == 0
    assert board(project, "--all")["manual-1@coder"]["color"] == "green"
    done = operator(project, "reopen", "manual-1@coder")
    target = project.box("coder", "inbox/new") / "10_manual.handoff"
    assert (done.code, done.out) == (0, f"REOPENED: {target}\n"), done.err
    assert board(project)["manual-1@coder"]["color"] == "orange"


# --- what a reopened copy tells its agent (docs/protocol.md §15) ------------------------------

AGAIN = "tests for quoted commas are missing"


def completed_then_reopened(project: Project, *args: str) -> Path:
    """ID1, taken and completed by the coder, then reopened with `args`; its path in new/."""
    put(project, ID1, task="parse")
    run(project, "ready_for_next")
    run(project, "done_with_current")
    done = operator(project, "reopen", CARD, *args)
    assert done.code == 0, done.err
    return project.box("coder", "inbox/new") / name(ID1)


def test_a_reopened_copy_says_so_right_after_task_name_with_why_who_and_when(
    project: Project,
) -> None:
    path = completed_then_reopened(project, "--reason", AGAIN, "--by", "bo")
    fields = headers(path)
    assert (fields["reopened_by"], fields["reopened_reason"]) == ("bo", AGAIN)
    taken = run(project, "ready_for_next")
    in_process = project.box("coder", "inbox/in_process") / name(ID1)
    assert taken.out == (
        f"TASK: {in_process}\nFROM: coder\nTYPE: note\nPRIORITY: 50\nTASK_NAME: parse\n"
        f"REOPENED: {AGAIN} (bo, {fields['reopened_at']})\nPAYLOAD:\nDo the thing.\n"
    )
    # a block set since comes after it, as §13's lines all do
    assert run(project, "block", "--reason", QUESTION).code == 0
    lines = run(project, "ready_for_next").out.splitlines()
    assert lines[4:8] == ["TASK_NAME: parse", f"REOPENED: {AGAIN} (bo, {fields['reopened_at']})",
                          f"BLOCKED_REASON: {QUESTION}", "PAYLOAD:"]  # fmt: skip


def test_reopen_without_a_reason_or_a_name_says_reopened_by_the_user(project: Project) -> None:
    path = completed_then_reopened(project)
    when = headers(path)["reopened_at"]
    assert f"\nREOPENED: reopened (ann, {when})\nPAYLOAD:" in run(project, "ready_for_next").out


def test_a_copy_reopened_twice_keeps_only_the_last_who_and_why(project: Project) -> None:
    completed_then_reopened(project, "--reason", "first", "--by", "bo")
    run(project, "ready_for_next")
    run(project, "done_with_current")
    path = project.box("coder", "inbox/new") / name(ID1)
    assert operator(project, "reopen", CARD).code == 0
    fields = headers(path)
    assert "reopened_reason" not in fields and fields["reopened_by"] == "ann"


def test_an_answer_from_before_the_reopen_is_not_shown_again_a_new_one_is(
    project: Project,
) -> None:
    blocked_in_process(project)
    operator(project, "answer", CARD, REPLY)
    assert "ANSWER: " in run(project, "ready_for_next").out
    run(project, "done_with_current")
    assert operator(project, "reopen", CARD, "--reason", AGAIN).code == 0
    taken = run(project, "ready_for_next")
    assert "REOPENED: " in taken.out and "ANSWER" not in taken.out
    assert "ANSWER" not in run(project, "resume").out
    assert operator(project, "answer", CARD, "Add them to test_parse.py.").code == 0
    assert "\nANSWER: Add them to test_parse.py. (ann, " in run(project, "ready_for_next").out


def test_resume_says_reopened_second_while_that_work_is_in_process(project: Project) -> None:
    path = completed_then_reopened(project, "--reason", AGAIN, "--by", "bo")
    when = headers(path)["reopened_at"]
    run(project, "ready_for_next")
    lines = run(project, "resume").out.splitlines()
    assert lines[1] == f"REOPENED: {AGAIN} (bo, {when})"
    assert run(project, "resume", "--json").out.count(f'"reopened": "{AGAIN} (bo, {when})"') == 1
    run(project, "done_with_current")
    assert "REOPENED" not in run(project, "resume").out


def test_a_reopened_copy_in_a_batch_says_so_in_its_batch_item(project: Project) -> None:
    put(project, ID1, to="cleaner", task="parse")
    run(project, "ready_for_next", role="cleaner")
    run(project, "done_with_current", role="cleaner")
    assert operator(project, "reopen", f"{ID1}@cleaner", "--reason", AGAIN).code == 0
    taken = run(project, "ready_for_next", role="cleaner").out
    assert "\nBATCH_ITEM: 1\n" in taken
    assert f"\nTASK_NAME: parse\nREOPENED: {AGAIN} (ann, " in taken


def test_a_reopen_reason_with_control_characters_is_shown_escaped(project: Project) -> None:
    path = completed_then_reopened(project)
    text = path.read_text().replace("reopened_by: ann", "reopened_by: ann\x1b[2J")
    path.write_text(text)
    out = run(project, "ready_for_next").out
    assert "\x1b" not in out and "(ann\\x1b[2J, " in out


# --- a held lock (docs/protocol.md §15, Part III) ----------------------------------------------

HOLD = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def inbox_locked(project: Project, role: str) -> Iterator[None]:
    """Another process holding `role`'s inbox lock until the block ends (a hung helper, or
    one that takes it to hang everyone else)."""
    folder = project.handoffs(role) / "inbox"
    folder.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield
    finally:
        holder.kill()
        holder.wait(timeout=10)


@pytest.mark.parametrize("command", ["answer", "ready_for_next"])
def test_a_held_inbox_lock_is_waited_on_for_5_seconds_then_refused_inbox_busy(
    project: Project, command: str
) -> None:
    """`answer` (an operator's) and `ready_for_next` (an agent's) wait for the role's inbox
    lock at most 5 s, then refuse with exit 2 and change nothing; they used to wait for
    ever.  Once the lock is free the same command goes through."""
    blocked_in_process(project)
    before = snapshot(project.handoffs("coder"))
    args = ("answer", CARD, REPLY) if command == "answer" else ("ready_for_next",)
    with inbox_locked(project, "coder"):
        started = time.monotonic()
        done = operator(project, *args) if command == "answer" else run(project, *args)
        waited = time.monotonic() - started
    busy = "INBOX_BUSY: coder's inbox is locked by another process; try again\n"
    assert (done.code, done.out, done.err) == (2, "", busy)
    assert waited >= 4.5, f"gave up after {waited:.1f}s"
    assert snapshot(project.handoffs("coder")) == before
    again = operator(project, *args) if command == "answer" else run(project, *args)
    assert again.code == 0, again.err
