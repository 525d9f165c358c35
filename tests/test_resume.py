"""`handoffd resume` (docs/protocol.md §10): each rung of the ladder and that it stops at the first
that yields state, the open question second, at most five lines over random queue states, an
honest cold start that writes nothing, the sibling-prefix boundary, `--json`, and `note`."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from handoffd.continuity import live, resume
from handoffd.core import config
from handoffd.core import handoff as hf
from tests.conftest import Project, Result, git, roles_tsv

COLD = "COLD_START: No prior session history found for this worktree.\n"
TAKEN = "50_20260615T140531Z_000001_from_coder_to_QA.handoff"
IDENT = "20260615T140531Z_000001_from_coder"


def resume_as(project: Project, role: str | None, *args: str, cwd: Path | None = None) -> Result:
    return project.run("resume", *args, role=role, cwd=cwd)


def write_live(project: Project, role: str, branch: str, stamp: str, step: str = "Do X.") -> Path:
    path = project.worktrees[role] / live.FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    state = live.State(stamp, branch, "working on slice-3", step, ["c@QA, slice-3"])
    path.write_text(live.render(state, {"Decisions": ["- keep the parser"]}))
    return path


def test_a_new_worktree_is_a_cold_start_and_nothing_is_written(project: Project) -> None:
    before = sorted(p.name for p in (project.worktrees["QA"]).iterdir())
    result = resume_as(project, "QA")
    assert (result.code, result.out, result.err) == (0, COLD, "")
    assert sorted(p.name for p in project.worktrees["QA"].iterdir()) == before
    assert not (project.worktrees["QA"] / live.FILE).exists()


def test_rung_one_a_fresh_live_file_wins_over_the_queue_and_git(project: Project) -> None:
    (project.worktrees["QA"] / "wip.txt").write_text("uncommitted\n")  # git would yield state
    project.put("QA", "60_20260615T150000Z_000002_from_coder_to_QA.handoff")  # so would the queue
    write_live(project, "QA", "QA", hf.iso_now(), step="Finish slice-3.")
    result = resume_as(project, "QA")
    assert result.out.splitlines() == [
        "RESUMING: QA on QA (from live file)",
        "STATE: working on slice-3; c@QA, slice-3 (HANDOFF.md: 1 decided, 0 ruled out)",
        "NEXT_STEP: Finish slice-3.",
    ]


def test_a_live_file_of_another_branch_is_passed_over(project: Project) -> None:
    write_live(project, "QA", "some-other-branch", hf.iso_now())
    result = resume_as(project, "QA")
    assert (result.code, result.out) == (0, COLD)


def test_a_live_file_older_than_the_queues_newest_event_is_passed_over(project: Project) -> None:
    write_live(project, "QA", "QA", "2026-06-15T14:00:00.000000Z")
    path = project.put("QA", TAKEN, task="slice-4", id=IDENT)
    assert hf.epoch("2026-06-15T14:00:00.000000Z") < os.stat(path.parent).st_mtime
    result = resume_as(project, "QA")
    assert result.out.startswith("RESUMING: QA on QA (from queue)\n")
    # and once the inbox folder is older than the header, the live file is fresh again
    os.utime(path.parent, (0, hf.epoch("2026-06-15T13:59:00Z")))
    assert resume_as(project, "QA").out.startswith("RESUMING: QA on QA (from live file)\n")


@pytest.mark.parametrize("torn", [b"", b"\0" * 300], ids=["empty", "zeros"])
def test_a_live_file_a_power_cut_tore_is_passed_over_and_rebuilt(
    project: Project, torn: bytes
) -> None:
    """A rewrite of handoffd's lines alone is not fsynced (docs/protocol.md §10): what a
    power cut may leave of it, an empty file or one of zeros, reads as none, and the next
    step rewrites it."""
    live_file = project.worktrees["QA"] / live.FILE
    live_file.parent.mkdir(exist_ok=True)
    live_file.write_bytes(torn)
    project.put("QA", TAKEN, task="slice-4", id=IDENT)
    assert resume_as(project, "QA").out.startswith("RESUMING: QA on QA (from queue)\n")
    assert project.run("ready_for_next", role="QA").out.startswith("TASK: ")
    assert live_file.read_text().startswith("# HANDOFF — ")
    assert resume_as(project, "QA").out.startswith("RESUMING: QA on QA (from live file)\n")


def test_rung_two_the_queue_leads_with_the_blocked_reason_and_names_the_report(
    project: Project,
) -> None:
    project.put("QA", TAKEN, box="inbox/in_process", task="slice-3", id=IDENT,
                dequeued_at="2026-06-15T14:06:02.000000Z")  # fmt: skip
    project.put("QA", "70_20260615T150000Z_000002_from_coder_to_QA.handoff")
    running = project.draft("Parser half done.\n", name="running.md")
    blocked = project.draft("Stuck.\nBlockers: which schema version?\n", name="blocked.md")
    for status, text in (("RUNNING", running), ("BLOCKED", blocked)):
        result = project.run("handoffd", "report", "--status", status, "--file", str(text),
                             role="QA")  # fmt: skip
        assert result.code == 0, result.err
    (project.worktrees["QA"] / live.FILE).unlink()  # what a crash before the rewrite leaves
    lines = resume_as(project, "QA").out.splitlines()
    assert lines[:2] == ["RESUMING: QA on QA (from queue)",
                         "OPEN_QUESTION: slice-3: which schema version?"]  # fmt: skip
    assert lines[2].startswith(f"STATE: blocked; {IDENT}@QA, slice-3, taken 2026-06-15 14:06Z; "
                               "latest report BLOCKED 20")  # fmt: skip
    assert lines[2].endswith("Z: Stuck.; 1 more waiting")
    assert lines[3:] == [
        "NEXT_STEP: Resolve the blocker under Open Questions, then run `handoffd unblock`."
    ]
    assert not (project.worktrees["QA"] / live.FILE).exists()  # only the git rung writes


def test_resume_looks_at_the_roles_queue_once_for_its_state_and_its_answer(
    project: Project,
) -> None:
    """The queue rung's state and the second line (an operator's answer) come from one look
    at the role's copies: `in_process/` is scanned once (it was scanned twice), after the
    one listing that finds it is not empty."""
    from tests.conftest import touched

    project.put("QA", TAKEN, box="inbox/in_process", task="slice-3", id=IDENT,
                dequeued_at="2026-06-15T14:06:02.000000Z")  # fmt: skip
    answered = project.run("handoffd", "answer", f"{IDENT}@QA", "Version 2.", "--by", "ann",
                           role=None, cwd=project.root)  # fmt: skip
    assert answered.code == 0, answered.err
    (project.worktrees["QA"] / live.FILE).unlink(missing_ok=True)
    role = config.load_roles(str(project.root))["QA"]
    with touched() as seen:
        found = resume.climb(role, str(project.root))
    assert (found.source, found.answer is not None) == ("queue", True), found
    assert found.answer.startswith("Version 2. (ann, ")
    listed = [(event, path) for event, path in seen if event != "open"]
    inbox = str(project.handoffs("QA") / "inbox")
    assert [e for e, path in listed if path == f"{inbox}/in_process"] == ["listdir", "scandir"]


def test_block_unblock_release_and_report_rewrite_the_live_file(project: Project) -> None:
    project.put("QA", TAKEN, box="inbox/in_process", task="slice-3", id=IDENT)
    assert project.run("handoffd", "block", "--reason", "need the schema", role="QA").code == 0
    parsed = live.read(str(project.worktrees["QA"]))
    assert parsed is not None and parsed.sections["Open Questions"] == [
        "- slice-3: need the schema"
    ]
    assert project.run("handoffd", "unblock", role="QA").code == 0
    parsed = live.read(str(project.worktrees["QA"]))
    assert parsed is not None and parsed.phase == "working on slice-3"
    assert project.run("handoffd", "release", role="QA").code == 0
    parsed = live.read(str(project.worktrees["QA"]))
    assert parsed is not None and parsed.phase == "idle"
    report = project.draft("Picked it up again.\n", name="report.md")
    taken = project.run("handoffd", "report", "--status", "RUNNING", "--file", str(report),
                        role="QA")  # fmt: skip
    assert taken.code == 0, taken.err
    parsed = live.read(str(project.worktrees["QA"]))
    assert parsed is not None and parsed.phase == "working on slice-3"
    done = project.run("handoffd", "report", "--status", "DONE", "--file", str(report), role="QA")
    assert done.code == 0, done.err
    parsed = live.read(str(project.worktrees["QA"]))
    assert parsed is not None and parsed.phase == "idle"


def test_rung_two_mail_waiting_and_nothing_taken(project: Project) -> None:
    project.put("QA", TAKEN, task="slice-3", id=IDENT)
    assert resume_as(project, "QA").out.splitlines()[1:] == [
        "STATE: idle",
        "NEXT_STEP: Run ready_for_next.sh: 1 handoff(s) waiting in the inbox.",
    ]


def test_rung_three_git_names_the_commits_and_writes_the_live_file(project: Project) -> None:
    worktree = project.worktrees["cleaner"]
    (worktree / "parser.py").write_text("def parse(): ...\n")
    git(worktree, "add", "parser.py")
    git(worktree, "commit", "-q", "-m", "Parser: accept trailing commas")
    sha = git(worktree, "rev-parse", "--short", "HEAD")
    first = resume_as(project, "cleaner")
    assert first.out.splitlines() == [
        "RESUMING: cleaner on cleaner (from git)",
        f"STATE: 1 commit(s) ahead of main (latest {sha} Parser: accept trailing commas)",
        "NEXT_STEP: Check that the 1 commit(s) on cleaner were handed on (swarm_handoff.sh) or "
        "finish them.",
    ]
    assert (worktree / live.FILE).exists()
    second = resume_as(project, "cleaner")
    assert second.out.splitlines()[0] == "RESUMING: cleaner on cleaner (from live file)"
    assert second.out.splitlines()[2] == first.out.splitlines()[2]


def test_rung_three_uncommitted_changes_outside_swarmforge(project: Project) -> None:
    (project.worktrees["QA"] / ".swarmforge").mkdir(exist_ok=True)
    (project.worktrees["QA"] / ".swarmforge" / "scratch").write_text("runtime state\n")
    assert resume_as(project, "QA").out == COLD  # handoffd's own files are no one's work
    (project.worktrees["QA"] / "src" / "app.txt").write_text("changed\n")
    lines = resume_as(project, "QA").out.splitlines()
    assert lines[1:] == [
        "STATE: 1 uncommitted path(s)",
        "NEXT_STEP: Review the 1 uncommitted path(s) (git status), then commit them.",
    ]


def test_rung_three_the_last_handoff_completed(project: Project) -> None:
    project.put("QA", TAKEN, box="inbox/completed", task="slice-3", id=IDENT,
                completed_at="2026-06-15T15:00:00.000000Z")  # fmt: skip
    assert resume_as(project, "QA").out.splitlines()[1] == (
        "STATE: last handoff: received slice-3 from coder (2026-06-15 15:00Z)"
    )


def test_rung_three_after_sending_the_role_waits_for_the_recipients(project: Project) -> None:
    draft = project.draft(project.note_draft(to="cleaner,QA", message="parser is ready"))
    assert project.run("swarm_handoff", str(draft), role="coder").code == 0
    sent = project.box("coder", "sent")
    sent.mkdir(parents=True)
    for queued in project.box("coder", "outbox").glob("*.handoff"):
        queued.rename(sent / queued.name)  # what the daemon does after delivering
    lines = resume_as(project, "coder").out.splitlines()
    assert lines[0] == "RESUMING: coder on main (from git)"
    assert lines[1].startswith('STATE: last handoff: sent note "parser is ready" to cleaner,QA (')
    assert lines[2] == "NEXT_STEP: Wait for cleaner,QA; run ready_for_next.sh when woken."
    parsed = live.read(str(project.root))
    assert parsed is not None and parsed.phase == "waiting for cleaner,QA"


def test_a_role_whose_worktree_is_gone_is_a_cold_start(project: Project) -> None:
    project.write_roles(roles_tsv([("coder", "coder", str(project.root), "c", "C", "a", "task"),
                                   ("ghost", "ghost", str(project.root / "gone"), "g", "G", "a",
                                    "task")]))  # fmt: skip
    result = project.run("resume", "--role", "ghost", role=None, cwd=project.root)
    assert (result.code, result.out) == (0, COLD)


def test_json_carries_the_same_answer(project: Project) -> None:
    project.put("QA", TAKEN, box="inbox/in_process", task="slice-3", id=IDENT,
                blocked_reason="which schema?")  # fmt: skip
    text = resume_as(project, "QA").out
    data = json.loads(resume_as(project, "QA", "--json").out)
    assert data["lines"] == text.splitlines()
    assert data["source"] == "queue" and data["role"] == "QA" and data["branch"] == "QA"
    assert data["open_question"] == "slice-3: which schema?"
    assert set(data) == {"source", "role", "branch", "open_question", "state", "next_step",
                         "answer", "reopened", "lines"}  # fmt: skip
    assert data["answer"] is None
    cold = json.loads(resume_as(project, "cleaner", "--json").out)
    assert cold["source"] == "cold_start" and cold["lines"] == [COLD.strip()]


def test_role_option_and_working_directory(project: Project) -> None:
    project.put("QA", TAKEN, task="slice-3", id=IDENT)
    below = project.worktrees["QA"] / "src"
    by_directory = resume_as(project, None, cwd=below)
    by_option = project.run("resume", "--role", "QA", role=None, cwd=project.root)
    assert by_directory.out == by_option.out
    assert by_directory.out.startswith("RESUMING: QA on QA (from queue)\n")


def test_a_sibling_prefix_worktree_never_resumes_its_neighbour(tmp_path: Path) -> None:
    base = tmp_path.resolve()
    coder = base / "w" / "coder"
    coder.parent.mkdir()
    git(base, "init", "-q", "-b", "main", str(coder))
    git(coder, "commit", "-q", "--allow-empty", "-m", "start")
    git(coder, "worktree", "add", "-q", str(base / "w" / "coder-b"), "-b", "coder-b")
    (coder / ".swarmforge").mkdir()
    (coder / ".swarmforge" / "roles.tsv").write_text(roles_tsv([
        ("coder", "coder", str(coder), "coder", "Coder", "a", "task"),
        ("coder-b", "coder-b", str(base / "w" / "coder-b"), "b", "B", "a", "task"),
    ]))  # fmt: skip
    project = Project(coder, {"coder": coder, "coder-b": base / "w" / "coder-b"})
    project.put("coder", TAKEN, task="coder's own work", id=IDENT)
    result = project.run("resume", "--root", str(coder), role=None, cwd=base / "w" / "coder-b")
    assert (result.code, result.out) == (0, COLD)
    stranger = base / "w" / "coder-bx"
    stranger.mkdir()
    lost = project.run("resume", "--root", str(coder), role=None, cwd=stranger)
    assert (lost.code, lost.err) == (1, "Set SWARMFORGE_ROLE.\n")


# --- at most five lines, whatever the queue holds ------------------------------------------

texts = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=300)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    new=st.integers(0, 3),
    in_process=st.sampled_from(["none", "file", "batch"]),
    blocked=st.none() | texts,
    report=st.none() | texts,
    live_file=st.sampled_from(["none", "fresh", "stale", "other-branch", "garbled"]),
    question=st.none() | texts,
    changed=st.booleans(),
    completed=st.booleans(),
)
def test_every_answer_is_at_most_five_lines_and_a_question_comes_second(
    project: Project,
    new: int,
    in_process: str,
    blocked: str | None,
    report: str | None,
    live_file: str,
    question: str | None,
    changed: bool,
    completed: bool,
) -> None:
    role = config.load_roles(str(project.root))["QA"]
    worktree = project.worktrees["QA"]
    shutil.rmtree(project.handoffs("QA"), ignore_errors=True)
    shutil.rmtree(worktree / ".swarmforge", ignore_errors=True)
    (worktree / "wip.txt").unlink(missing_ok=True)
    for n in range(new):
        project.put("QA", f"50_20260615T14053{n}Z_00000{n}_from_coder_to_QA.handoff", task=f"t{n}")
    extra = {"blocked_reason": " ".join(blocked.split()) or "x"} if blocked else {}
    if in_process == "file":
        project.put("QA", TAKEN, box="inbox/in_process", id=IDENT, task="slice", **extra)
    elif in_process == "batch":
        for n in range(7):
            project.put("QA", f"50_20260615T150000Z_00001{n}_from_coder_to_QA.handoff",
                        box="inbox/in_process/batch_20260615T150001Z_000001", **extra)  # fmt: skip
    if report is not None:
        folder = project.handoffs("QA") / "reports" / IDENT
        folder.mkdir(parents=True)
        (folder / "20260615T141000.000000Z_RUNNING.md").write_text(f"---\n---\n{report}\n")
    if live_file != "none":
        stamp = hf.iso_now(2e9) if live_file != "stale" else "2020-01-01T00:00:00Z"
        state = live.State(stamp, "other" if live_file == "other-branch" else "QA", "working",
                           "Go on.", ["a", "b"], [question] if question else [])  # fmt: skip
        text = live.render(state, {}) if live_file != "garbled" else "not a live file\n"
        (worktree / ".swarmforge").mkdir(exist_ok=True)
        (worktree / live.FILE).write_text(text)
    if changed:
        (worktree / "wip.txt").write_text("work\n")
    if completed:
        project.put("QA", "50_20260101T000000Z_000009_from_coder_to_QA.handoff",
                    box="inbox/completed", task="old")  # fmt: skip
    answer = resume.climb(role, str(project.root))
    lines = answer.lines()
    assert 1 <= len(lines) <= 5
    assert all(len(line.splitlines()) == 1 for line in lines)
    if answer.open_question:
        assert lines[1].startswith("OPEN_QUESTION: ")
    if answer.source == "cold_start":
        assert lines == [COLD.strip()]
    else:
        assert lines[-2].startswith("STATE: ") and lines[-1].startswith("NEXT_STEP: ")


# --- note -------------------------------------------------------------------------------


def test_note_adds_decisions_and_ruled_out_paths_and_sets_verify(project: Project) -> None:
    for args in (("--decision", "keep the parser hand-written"),
                 ("--ruled-out", "a regex pre-pass: breaks on nested strings"),
                 ("--decision", "trailing commas everywhere"),
                 ("--verify", "pytest -q tests/test_parser.py"),
                 ("--verify", "make test")):  # fmt: skip
        result = project.run("handoffd", "note", *args, role="QA")
        assert (result.code, result.out) == (0, f"NOTED: {project.worktrees['QA'] / live.FILE}\n")
    parsed = live.read(str(project.worktrees["QA"]))
    assert parsed is not None
    assert parsed.sections["Decisions"] == ["- keep the parser hand-written",
                                            "- trailing commas everywhere"]  # fmt: skip
    assert parsed.sections["Ruled Out"] == ["- a regex pre-pass: breaks on nested strings"]
    assert parsed.sections["Verify"] == ["`make test`"]


def test_note_keeps_handoffds_lines_as_they_were(project: Project) -> None:
    path = write_live(project, "QA", "QA", "2026-06-15T14:00:00.000000Z", step="Finish it.")
    before = path.read_text()
    assert project.run("handoffd", "note", "--decision", "d", role="QA").code == 0
    after = path.read_text()
    assert after.split("\n## Decisions")[0] == before.split("\n## Decisions")[0]


def test_note_without_text_is_refused(project: Project) -> None:
    result = project.run("handoffd", "note", "--decision", "  ", role="QA")
    assert (result.code, result.err) == (
        2, "NOTE_EMPTY: give --decision, --ruled-out or --verify text.\n",
    )  # fmt: skip
    assert project.run("handoffd", "note", role="QA").code == 2


CONTROLS = "\033\007\r\x9b\u202e"


def test_control_characters_from_the_queue_never_reach_the_live_file_or_the_terminal(
    project: Project,
) -> None:
    """A task that would set the window's title and a reason that would erase a line are
    escaped in the live file handoffd writes and in every line `resume` prints."""
    project.put("QA", TAKEN, box="inbox/in_process", id=IDENT, task="t\033]0;owned\007",
                blocked_reason="wait\033[2K\r\x9bJ for \u202eQA")  # fmt: skip
    assert project.run("ready_for_next", role="QA").code == 0  # rewrites the live file
    written = (project.worktrees["QA"] / live.FILE).read_text(encoding="utf-8")
    # (a line break or tab is whitespace, and one line's whitespace is one space)
    assert "- t\\x1b]0;owned\\x07: wait\\x1b[2K \\x9bJ for \\u202eQA" in written
    assert not any(char in written for char in CONTROLS)
    from_live = resume_as(project, "QA")
    (project.worktrees["QA"] / live.FILE).unlink()
    from_queue = resume_as(project, "QA")
    for result, source in ((from_live, "live file"), (from_queue, "queue")):
        assert f"(from {source})" in result.out.splitlines()[0]
        assert not any(char in result.out for char in CONTROLS), result.out
        assert "OPEN_QUESTION: t\\x1b]0;owned\\x07: wait\\x1b[2K \\x9bJ" in result.out
    as_json = project.run("resume", "--json", role="QA")
    assert not any(char in as_json.out for char in CONTROLS)
    assert json.loads(as_json.out)["open_question"].startswith("t\033]0;owned\007: wait")
