"""`handoffd digest` (docs/protocol.md §11) on real projects: real helpers, real git,
reports stored as §8 lays them out.  Every row is traced back to the file it cites."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest

from handoffd.digest.digest import NOT_IN_HANDOFF, copy_state, report_rows
from handoffd.queue.reports import Report
from handoffd.snapshot.snapshot import take_snapshot
from tests.conftest import Project, git
from tests.digest_support import HANDOFFD, build_thread, commit_in, hf_epoch, report, run

RECEIPT = re.compile(r"   \[(?:(commit|report) )?([^\]]+)\]$")


@pytest.fixture
def thread(project: Project) -> dict[str, str]:
    return build_thread(project)


def digest(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return run("digest", project, *args)


# --- what a digest says -------------------------------------------------------------------


def test_a_thread_across_three_roles_and_both_receive_modes(project, thread):
    result = digest(project, "--task", "parser")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("# Task parser · coder, cleaner, QA · ")
    assert lines[1].startswith("**Outcome** in process at QA since ")
    # coder named one commit and cleaner one: no range between headers of one worktree
    assert "## Handoffs (2)" in lines and "## Commits (2)" in lines and "## Reports (2)" in lines
    handoffs = lines[lines.index("## Handoffs (2)") + 1 : lines.index("## Handoffs (2)") + 3]
    assert f"cleaner → QA git_handoff {thread['second']} — in process at QA" in handoffs[0]
    assert f"coder → cleaner git_handoff {thread['first']} — completed by cleaner" in handoffs[1]
    assert lines[-2] == f"receipt: {thread['a']}, {thread['b']}"
    assert re.fullmatch(r"generated \S+Z · queue read \S+Z", lines[-1])
    assert lines[-3] == "---" and NOT_IN_HANDOFF in lines


def test_said_it_would_and_said_it_decided_are_quoted_with_their_report(project, thread):
    out = digest(project, "--task", "parser").stdout
    assert "## Said it would, no evidence it did (1)" in out
    assert '- "I\'ll re-run the suite once the fixture lands."   [report .worktrees/QA/' in out
    assert '- "I decided to keep tabs."' not in out  # under 25 characters
    assert "## Said it decided" not in out


def test_a_promise_followed_by_a_commit_is_not_listed(project, thread):
    commit_in(project, "QA", "fixture.txt", "the fixture", time.time() + 120)
    out = digest(project, "--task", "parser").stdout
    assert "Said it would" not in out


def test_a_promise_followed_by_a_handoff_from_that_role_is_not_listed(project, thread):
    # after cleaner's last commit, before it sent b to QA
    when = hf_epoch(thread["b"]) - 50
    report(project, "cleaner", thread["a"], "DONE", "Next I will hand this to QA for a run.", when)
    out = digest(project, "--task", "parser").stdout
    assert '"Next I will hand this to QA' not in out  # cleaner sent b after this report
    report(project, "cleaner", thread["a"], "DONE", "I will hand the parser to QA again.", 9e9)
    assert '"I will hand the parser to QA again."' in digest(project, "--task", "parser").stdout


def test_an_id_digests_its_whole_task_thread(project, thread):
    by_id = digest(project, thread["a"]).stdout.splitlines()
    by_task = digest(project, "--task", "parser").stdout.splitlines()
    assert by_id[:-1] == by_task[:-1]


def test_every_row_traces_back_to_its_source(project, thread):
    report(project, "QA", thread["b"], "RUNNING", "We chose the slow path for safety today.", 1)
    lines = digest(project, "--task", "parser").stdout.splitlines()
    entries = list(take_snapshot(str(project.root)).entries())  # the queue, read independently
    traced = 0
    for line in lines:
        if not line.startswith("- ") or line.startswith("- … "):
            continue
        match = RECEIPT.search(line)
        assert match, f"a row without a receipt: {line}"
        kind, source = match.groups()
        if kind == "commit":
            _trace_commit(project, line, source)
        elif kind == "report":
            _trace_report(project, line, source)
        else:
            tasks = {e.headers.get("task") for e in entries if e.id == source}
            assert tasks == {"parser"}, line
        traced += 1
    assert traced >= 12
    ids = lines[-2].removeprefix("receipt: ").split(", ")
    assert all(any(e.id == i for e in entries) for i in ids)


def _trace_commit(project: Project, line: str, sha: str) -> None:
    shown = [git(w, "show", "-s", "--format=%s", sha) for w in [project.worktrees["cleaner"]]]
    changed = git(project.worktrees["cleaner"], "show", "--format=", "--name-only", sha).split()
    if line.startswith(f"- {sha} "):
        assert line.startswith(f"- {sha} {shown[0]} ({len(changed)} file"), line
    else:
        assert line.split(" — ")[0].removeprefix("- ") in changed, line


def _trace_report(project: Project, line: str, relative: str) -> None:
    text = (project.root / relative).read_text(encoding="utf-8")
    quoted = re.match(r'- "(.*)"   \[', line)
    if quoted:
        assert quoted.group(1) in " ".join(text.split("\n")), line
    else:
        first = line.split(": ", 1)[1].rsplit("   [", 1)[0]
        status = relative.rsplit("_", 1)[1].removesuffix(".md")
        assert first in text and f" {status} " in line, line


# --- refusals, JSON and the budget --------------------------------------------------------


def test_unknown_handoff_and_task_exit_1(project, thread):
    result = digest(project, "20990101T000000Z_000001_from_coder")
    assert (result.returncode, result.stderr) == (
        1,
        "UNKNOWN_HANDOFF: 20990101T000000Z_000001_from_coder\n",
    )
    result = digest(project, "--task", "nope")
    assert (result.returncode, result.stderr) == (1, "UNKNOWN_TASK: nope\n")


def test_a_budget_under_8_is_refused_with_exit_2(project, thread):
    result = digest(project, "--task", "parser", "--max-lines", "7")
    assert result.returncode == 2 and result.stderr.startswith("BUDGET_TOO_SMALL")
    assert result.stdout == ""


def test_a_small_budget_cuts_names_what_it_left_out_and_keeps_the_receipt(project, thread):
    for lines_allowed in range(8, 30):
        lines = digest(project, "--task", "parser", "--max-lines", str(lines_allowed)).stdout
        lines = lines.splitlines()
        assert len(lines) <= lines_allowed
        assert lines[-2].startswith("receipt: ") and lines[-3] == "---"
    lines = digest(project, "--task", "parser", "--max-lines", "12").stdout.splitlines()
    assert lines[-4].startswith("Not shown for lack of room: ")
    assert "Commits (2)" in lines[-4]


def test_json_has_markdown_receipt_and_gaps(project, thread):
    out = json.loads(digest(project, "--task", "parser", "--json").stdout)
    assert set(out) == {"markdown", "receipt", "gaps"}
    assert out["receipt"]["ids"] == [thread["a"], thread["b"]]
    assert out["receipt"]["generated_at"].endswith("Z")
    assert out["markdown"].startswith("# Task parser · ")
    assert out["markdown"].splitlines()[-2] == f"receipt: {thread['a']}, {thread['b']}"
    assert out["gaps"] == []


def test_id_and_task_together_is_a_usage_error(project, thread):
    assert digest(project, thread["a"], "--task", "parser").returncode == 2
    assert digest(project).returncode == 2


def test_a_report_filed_with_handoffd_report_is_quoted(project, thread):
    text = project.draft("I will rerun the suite on the new fixture today.\n", name="r.md")
    filed = project.run("handoffd", "report", "--status", "RUNNING", "--file", str(text), role="QA")
    assert filed.code == 0, filed.err
    out = digest(project, "--task", "parser").stdout
    assert "## Reports (3)" in out
    assert '- "I will rerun the suite on the new fixture today."   [report .worktrees/QA/' in out


def test_a_handoff_named_by_card_or_file_name_is_found(project, thread):
    by_id = digest(project, thread["a"]).stdout.splitlines()[:-1]
    name = next(p.name for p in project.box("coder", "sent").iterdir())
    assert digest(project, f"{thread['a']}@cleaner").stdout.splitlines()[:-1] == by_id
    assert digest(project, name).stdout.splitlines()[:-1] == by_id


def test_a_report_without_text_says_so_in_its_row():
    fields = {"status": "RUNNING", "role": "QA", "reported_at": "2026-06-15T14:05:31Z"}
    path = "/p/.swarmforge/handoffs/reports/x/20260615T140531.000000Z_RUNNING.md"
    assert report_rows([Report(path, fields, "")], "/p") == [
        "- 2026-06-15 14:05Z RUNNING QA: (no text)   "
        "[report .swarmforge/handoffs/reports/x/20260615T140531.000000Z_RUNNING.md]"
    ]


@pytest.mark.parametrize(
    ("state", "key", "said"),
    [
        ("completed", "completed_at", "completed by QA"),
        ("in_process", "dequeued_at", "in process at QA"),
        ("new", "enqueued_at", "waiting in QA's inbox"),
    ],
)
def test_an_outcome_states_a_time_only_when_the_copy_records_one(state, key, said):
    """A hand-made copy without its stamp: the Outcome says where it is, never `at ` with
    nothing after it."""
    assert copy_state("QA", state, {}, detail=True) == said
    with_time = copy_state("QA", state, {key: "2026-06-15T14:05:31Z"}, detail=True)
    assert with_time == f"{said} {'at' if state == 'completed' else 'since'} 2026-06-15 14:05Z"


# --- text from files never drives the terminal (docs/protocol.md, Part II "Hostile files") --


def test_control_characters_in_headers_and_reports_are_printed_escaped(project):
    """A hand-made copy whose reason would erase a line and whose report would set the
    window's title: `digest` and `carry-forward` print them escaped, as text and as JSON."""
    ident = "20260101T000000Z_000001_from_coder"
    project.put("QA", f"50_{ident}_to_QA.handoff", box="inbox/in_process", id=ident, to="QA",
                task="t\u202eask", blocked_reason="X\033[2K\033[1GGREEN all fine\x9b")  # fmt: skip
    report(project, "QA", ident, "RUNNING", "\033]0;all good\007 Working.", time.time())
    for command, args in (("digest", [ident]), ("carry-forward", [])):
        for form in ([], ["--json"]):
            result = subprocess.run([HANDOFFD, command, *args, *form, "--root", str(project.root)],
                                    capture_output=True, timeout=60, check=False)  # fmt: skip
            out = result.stdout.decode()
            assert result.returncode == 0, result.stderr
            assert not any(char in out for char in "\033\007\r\x9b\u202e"), out
            if form:  # the markdown a client prints is the text's very words
                parsed = json.loads(out)
                out = (parsed if command == "digest" else parsed[0])["markdown"]
            assert "# Task t\\u202eask" in out
            assert "blocked: X\\x1b[2K\\x1b[1GGREEN all fine\\x9b (QA)" in out
            assert "RUNNING QA: \\x1b]0;all good\\x07 Working." in out
