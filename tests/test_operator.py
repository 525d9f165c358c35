"""An operator's actions end to end (docs/protocol.md §13): `answer`, `retry`, `dismiss`,
`reopen` as installed commands in a real project with real worktrees, run from the
project root as an operator does (no SWARMFORGE_ROLE), each refusal by its token, and the
wake-up typed into the role's real tmux session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from handoffd import reports
from tests.conftest import Project, Result
from tests.daemon_support import Tmux, tmux_server, use_socket
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


def test_a_failed_wake_up_is_one_line_on_stderr_and_the_answer_stands(project: Project) -> None:
    blocked_in_process(project)  # the project has no tmux socket file at all
    done = operator(project, "answer", CARD, REPLY)
    assert done.code == 0 and done.out.startswith("ANSWERED: ")
    assert done.err.startswith("WAKE_FAILED: coder: ") and done.err.count("\n") == 1


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
    assert (done.code, done.out, done.err) == (2, "", f"UNKNOWN_CARD: {card}\n")
    assert not (project.handoffs("coder") / "reports").exists()


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
