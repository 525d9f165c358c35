"""The live file HANDOFF.md (docs/protocol.md §10): rendering, the 30-line budget and its drop
rule, the agent's sections kept verbatim, the branch read from git's files, the rewrite after
each helper step, and that a killed rewrite never leaves a torn file."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from handoffd.continuity import live, work
from handoffd.core import budget
from handoffd.core import handoff as hf
from handoffd.queue.scan import Entry, State
from tests.conftest import HANG, Project, git

NOW = "2026-06-15T14:05:31.482113Z"


def state(**changes: object) -> live.State:
    fields: dict[str, object] = {
        "time": NOW,
        "branch": "main",
        "phase": "idle",
        "next_step": "Run ready_for_next.sh when woken.",
    }
    fields.update(changes)
    return live.State(**fields)  # type: ignore[arg-type]


def test_an_idle_role_renders_the_header_and_the_next_step_only() -> None:
    assert live.render(state(), {}) == (
        f"# HANDOFF — {NOW}\n"
        "branch: main | phase: idle\n"
        "\n## Next Step\nRun ready_for_next.sh when woken.\n"
    )


def test_sections_come_in_the_contract_order_and_empty_ones_are_omitted() -> None:
    text = live.render(
        state(in_flight=["c1@coder, t1"], open_questions=["t1: waiting on QA"]),
        {"Verify": ["`make test`"], "Decisions": ["- keep it flat"], "Ruled Out": []},
    )
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## Next Step", "## In-Flight", "## Decisions", "## Verify",
                        "## Open Questions"]  # fmt: skip


def test_in_flight_lists_five_cards_then_how_many_more() -> None:
    text = live.render(state(in_flight=[f"card{i}@coder, t{i}" for i in range(8)]), {})
    flight = live.parse(text)
    assert flight is not None
    assert flight.sections["In-Flight"] == [
        *(f"- card{i}@coder, t{i}" for i in range(5)),
        "- … 3 more",
    ]


def test_the_drop_rule_takes_decisions_from_the_top_first_then_ruled_out() -> None:
    agent = {
        "Decisions": [f"- decision {i}" for i in range(12)],
        "Ruled Out": [f"- path {i}: failed" for i in range(12)],
        "Verify": ["`pytest -q`"],
    }
    text = live.render(state(), agent)
    parsed = live.parse(text)
    assert parsed is not None
    assert len(text.splitlines()) == 30
    decisions = parsed.sections["Decisions"]
    assert decisions[-1].endswith(" older items dropped)")
    dropped = int(decisions[-1].split("(")[1].split()[0])
    assert decisions[:-1] == [f"- decision {i}" for i in range(dropped, 12)]
    assert parsed.sections["Ruled Out"] == agent["Ruled Out"]  # untouched while Decisions gives
    assert parsed.sections["Verify"] == ["`pytest -q`"]


def test_a_dropped_count_accumulates_across_rewrites() -> None:
    agent = {"Decisions": ["- (4 older items dropped)", *(f"- d{i}" for i in range(30))]}
    parsed = live.parse(live.render(state(), agent))
    assert parsed is not None
    marker = parsed.sections["Decisions"][-1]
    kept = len(parsed.sections["Decisions"]) - 1
    assert marker == f"- ({4 + 30 - kept} older items dropped)"


def test_a_bullet_keeps_its_continuation_lines_and_goes_whole() -> None:
    agent = {"Ruled Out": ["- approach A: failed", "  because of B", "- approach C: slow"]}
    parsed = live.parse(live.render(state(), agent))
    assert parsed is not None and parsed.sections["Ruled Out"] == agent["Ruled Out"]
    items, _ = live._items([*agent["Ruled Out"]] * 20)
    assert items[0] == ["- approach A: failed", "  because of B"]


def one_at_a_time(head: list[str], sections: dict[str, list[str]]) -> dict[str, list[str]]:
    """The drop rule as the contract words it: drop the first bullet, look again, repeat."""
    sections = dict(sections)
    for name in live.DROP_ORDER:
        while len(live._lines(head, sections)) > live.MAX_LINES:
            items, dropped = live._items(sections.get(name, []))
            if not items:
                break
            kept = budget.trimmed([line for item in items[1:] for line in item])
            sections[name] = [*kept, f"- ({dropped + 1} older items dropped)"]
    return sections


LINE = st.sampled_from(["- a", "* b", "  more", "", "- (3 older items dropped)", "prose"])
SECTION = st.lists(LINE, max_size=40).map(budget.trimmed)


@given(st.lists(st.sampled_from(["", " ", "\t", "- a", "  more", " x "]), max_size=12))
def test_the_live_files_trim_is_the_budgets(rows: list[str]) -> None:
    """Its own copy, so a helper imports the budget renderer only for a file past 30 lines."""
    assert live.trimmed(rows) == budget.trimmed(rows)


@given(
    st.fixed_dictionaries({"Decisions": SECTION, "Ruled Out": SECTION, "Verify": SECTION}),
    st.integers(min_value=0, max_value=8),
)
def test_the_drop_rule_cuts_in_one_go_exactly_what_dropping_one_at_a_time_would(
    agent: dict[str, list[str]], questions: int
) -> None:
    """Bullets, continuation lines, blank lines, prose before the first bullet and markers
    of earlier drops, in any mix: counting once gives the very lines of the one-by-one rule."""
    head = ["# HANDOFF — x", "branch: main | phase: idle"]
    sections = {"Next Step": ["Go."], "Open Questions": [f"- q{i}" for i in range(questions)]}
    sections.update(agent)
    assert live.fit(head, sections) == one_at_a_time(head, sections)


def test_trimming_thousands_of_bullets_reads_each_line_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The file is rewritten under the role's lock: 8,000 Decisions bullets once took 49 s
    (each drop re-rendered the file).  The work is linear: the lines looked at, counted."""
    looked_at = [0]

    def counting(lines: list[str]) -> tuple[list[list[str]], int]:
        looked_at[0] += len(lines)
        return items(lines)

    items = live._items
    monkeypatch.setattr(live, "_items", counting)
    for bullets in (2_000, 8_000):
        looked_at[0] = 0
        decisions = [f"- decision {i}" for i in range(bullets)]
        text = live.render(state(), {"Decisions": decisions, "Ruled Out": ["- a: b"] * 5})
        assert len(text.splitlines()) == 30
        assert f"- decision {bullets - 1}\n- ({bullets - 15} older items dropped)\n" in text
        assert looked_at[0] <= 3 * bullets, f"{looked_at[0]} lines looked at for {bullets}"


def test_long_text_is_one_line_of_at_most_200_characters() -> None:
    text = live.render(state(next_step="x" * 500 + "\nsecond line"), {})
    parsed = live.parse(text)
    assert parsed is not None
    assert len(parsed.sections["Next Step"]) == 1
    assert len(parsed.sections["Next Step"][0]) == 200


BREAKS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # what str.splitlines splits on
chars = st.characters(blacklist_categories=("Cs",), blacklist_characters=BREAKS)
lines = st.text(chars, max_size=40)
bullets = st.lists(lines.map(lambda t: "- " + t.strip() if t.strip() else "- x"), max_size=12)


@settings(max_examples=100, deadline=None)
@given(
    changes=st.lists(
        st.tuples(
            st.integers(0, 9),  # cards in flight
            st.lists(lines, max_size=5),  # open questions
            st.sampled_from(["decision", "ruled-out", "verify", "none"]),
            lines,
        ),
        min_size=100,
        max_size=100,
    ),
    agent=st.fixed_dictionaries({"Decisions": bullets, "Ruled Out": bullets}),
)
def test_through_100_state_changes_the_file_fits_and_keeps_the_agents_sections(
    changes: list[tuple[int, list[str], str, str]], agent: dict[str, list[str]]
) -> None:
    """Each step: handoffd's state changes and the agent may add a note; after each rewrite
    the file is at most 30 lines, and what the agent wrote is still there unless the drop
    rule took it, oldest first, counted in the marker."""
    text = live.render(state(), agent)
    written = {name: list(body) for name, body in agent.items()}
    for cards, questions, note, words in changes:
        previous = live.parse(text)
        assert previous is not None
        sections = previous.sections
        bullet = "- " + (" ".join(words.split()) or "note")
        if note in ("decision", "ruled-out"):
            name = "Decisions" if note == "decision" else "Ruled Out"
            sections[name] = live.add_bullet(sections.get(name, []), bullet)
            written.setdefault(name, []).append(bullet)
        elif note == "verify":
            sections["Verify"] = [f"`{bullet}`"]
            written["Verify"] = [f"`{bullet}`"]
        flight = [f"card{i}@coder, task {i}" for i in range(cards)]
        text = live.render(state(in_flight=flight, open_questions=questions), sections)
        assert len(text.splitlines()) <= live.MAX_LINES
        parsed = live.parse(text)
        assert parsed is not None
        for name, body in written.items():
            kept, dropped = live._items(parsed.sections.get(name, []))
            flat = [line for item in kept for line in item]
            assert flat == [line for line in body if line.strip()][dropped:], name


def test_note_adds_a_bullet_after_the_drop_marker_is_taken_into_account() -> None:
    assert live.add_bullet(["- a", "- (2 older items dropped)"], "- b") == [
        "- a", "- b", "- (2 older items dropped)",
    ]  # fmt: skip


# --- the branch, from git's files -------------------------------------------------------


def test_the_branch_is_read_from_git_files_in_a_checkout_and_a_worktree(
    project: Project,
) -> None:
    assert live.branch(str(project.worktrees["coder"])) == "main"
    assert live.branch(str(project.worktrees["cleaner"])) == "cleaner"
    git(project.worktrees["QA"], "checkout", "-q", "--detach")
    sha = git(project.worktrees["QA"], "rev-parse", "--short=10", "HEAD")
    assert live.branch(str(project.worktrees["QA"])) == f"(detached {sha})"


def test_a_directory_outside_git_has_no_branch(tmp_path: Path) -> None:
    assert live.branch(str(tmp_path)) == "(no git)"


# --- rewritten by every helper step ------------------------------------------------------


def live_file(project: Project, role: str) -> live.Parsed:
    parsed = live.read(str(project.worktrees[role]))
    assert parsed is not None, f"no live file for {role}"
    return parsed


def test_taking_finishing_and_sending_each_rewrite_the_live_file(project: Project) -> None:
    project.put("QA", "50_20260615T140531Z_000001_from_coder_to_QA.handoff", task="slice-3",
                id="20260615T140531Z_000001_from_coder")  # fmt: skip
    taken = project.run("ready_for_next", role="QA")
    assert taken.code == 0, taken.err
    after_take = live_file(project, "QA")
    assert after_take.branch == "QA"
    assert after_take.phase == "working on slice-3"
    assert after_take.sections["In-Flight"][0].startswith(
        "- 20260615T140531Z_000001_from_coder@QA, slice-3, taken "
    )
    assert after_take.sections["Next Step"] == ["Finish slice-3, then run done_with_current.sh."]

    done = project.run("done_with_current", role="QA")
    assert done.code == 0, done.err
    assert live_file(project, "QA").phase == "idle"

    draft = project.draft(project.note_draft(to="coder", message="slice-3 is done"))
    assert project.run("swarm_handoff", str(draft), role="QA").code == 0
    assert live_file(project, "QA").phase == "waiting for coder"
    assert project.run("ready_for_next", role="QA").out == "NO_TASK\n"
    assert live_file(project, "QA").phase == "waiting for coder"  # nothing arrived yet


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
@pytest.mark.parametrize("agents", [False, True])
def test_the_live_file_is_fsynced_before_its_rename_only_when_it_carries_the_agents_sections(
    project: Project, tmp_path: Path, agents: bool
) -> None:
    """The agent's sections exist nowhere else, so a rewrite that carries them syncs its temp
    before the rename; one of handoffd's lines alone (the queue says all of it) does not."""
    worktree = project.worktrees["QA"]
    if agents:
        (worktree / ".swarmforge").mkdir(exist_ok=True)
        (worktree / live.FILE).write_text(f"# HANDOFF — {NOW}\nbranch: QA | phase: idle\n"
                                          "\n## Decisions\n- keep it flat\n")  # fmt: skip
    project.put("QA", "50_20260615T140531Z_000001_from_coder_to_QA.handoff", task="slice-3",
                id="20260615T140531Z_000001_from_coder")  # fmt: skip
    log = tmp_path / "strace.log"
    bin_dir = Path(sys.executable).parent
    taken = project.run("strace", "-f", "-qq", "-y", "-e", "trace=fsync", "-o", str(log),
                        str(bin_dir / "ready_for_next"), role="QA")  # fmt: skip
    assert taken.code == 0, taken.err
    assert taken.out.startswith("TASK: ")
    synced = [line for line in log.read_text().splitlines() if "fsync(" in line]
    assert any(".HANDOFF.md." in line for line in synced) is agents, synced
    assert any("in_process/." in line for line in synced), synced  # the claim's stamped copy
    assert ("## Decisions\n- keep it flat\n" in (worktree / live.FILE).read_text()) is agents


def test_a_blocked_card_becomes_the_open_question(project: Project) -> None:
    project.put("coder", "50_20260615T140531Z_000001_from_QA_to_coder.handoff", task="t",
                box="inbox/in_process", blocked_reason="which schema version?")  # fmt: skip
    assert project.run("ready_for_next", role="coder").code == 0  # resumed, still blocked
    parsed = live_file(project, "coder")
    assert parsed.phase == "blocked"
    assert parsed.sections["Open Questions"] == ["- t: which schema version?"]


def test_the_agents_sections_survive_a_helper_rewrite_verbatim(project: Project) -> None:
    worktree = project.worktrees["cleaner"]
    (worktree / ".swarmforge").mkdir(exist_ok=True)
    agent_text = (
        "\n## Ruled Out\n- sed over the tree: touches vendored files\n"
        "\n## Decisions\n- keep **bold** and `code` as written  \n"
        "\n## Verify\n`pytest -q tests/test_parser.py`\n"
    )
    (worktree / live.FILE).write_text(f"# HANDOFF — {NOW}\nbranch: x | phase: idle\n{agent_text}")
    assert project.run("ready_for_next", role="cleaner").out == "NO_TASK\n"
    text = (worktree / live.FILE).read_text()
    assert agent_text in text
    assert text.startswith("# HANDOFF — 20") and "branch: cleaner | phase: idle\n" in text


def test_a_header_the_agent_broke_still_keeps_its_sections(project: Project) -> None:
    worktree = project.worktrees["QA"]
    (worktree / ".swarmforge").mkdir(exist_ok=True)
    (worktree / live.FILE).write_text("my notes\n## Decisions\n- use tabs\n")
    assert project.run("ready_for_next", role="QA").out == "NO_TASK\n"
    parsed = live_file(project, "QA")
    assert parsed.branch == "QA" and parsed.sections["Decisions"] == ["- use tabs"]


def test_a_call_that_changes_nothing_leaves_a_fresh_file_alone(project: Project) -> None:
    """`NO_TASK` twice: the second call has nothing new to say and skips the write (and its
    fsync); once the queue has an event newer than the file, the next call rewrites it."""
    assert project.run("ready_for_next", role="QA").out == "NO_TASK\n"
    path = project.worktrees["QA"] / live.FILE
    first = path.read_bytes()
    os.utime(path, (1, 1))  # a mark a rewrite would replace
    assert project.run("ready_for_next", role="QA").out == "NO_TASK\n"
    assert path.read_bytes() == first and path.stat().st_mtime == 1
    new = project.box("QA", "inbox/new")
    new.mkdir(parents=True, exist_ok=True)
    os.utime(new, (2e9, 2e9))  # an event after the file's header time
    assert project.run("ready_for_next", role="QA").out == "NO_TASK\n"
    assert path.stat().st_mtime != 1
    assert live_file(project, "QA").written > live.parse(first.decode()).written


def test_sending_and_reporting_rewrite_the_file_even_when_only_its_time_changes(
    project: Project,
) -> None:
    """docs/protocol.md §10: every command that changes the role's state rewrites the live
    file — also `swarm_handoff` and `report` when the rest of the file would read the same
    (neither shows in the queue folders' times that the skip above looks at)."""
    project.put("QA", "50_20260615T140531Z_000001_from_coder_to_QA.handoff", task="slice-3",
                id="20260615T140531Z_000001_from_coder")  # fmt: skip
    assert project.run("ready_for_next", role="QA").code == 0
    path = project.worktrees["QA"] / live.FILE
    draft = str(project.draft(project.note_draft(to="coder")))
    for args in (("handoffd", "report", "--status", "RUNNING"), ("swarm_handoff", draft)):
        os.utime(path, (1, 1))  # a mark a rewrite would replace
        result = project.run(*args, role="QA")
        assert result.code == 0, result.err
        assert path.stat().st_mtime != 1, f"{args[:2]} left the live file alone"


def test_a_file_whose_time_cannot_be_read_is_as_old_as_can_be() -> None:
    """Never fresher than any queue event: `resume` then never trusts it."""
    broken = live.parse("# HANDOFF — yesterday\nbranch: main | phase: idle\n")
    assert broken.time == "yesterday" and broken.written == float("-inf")
    assert live.parse(live.render(state(), {})).written == hf.epoch(NOW)


def test_a_running_daemons_lock_never_holds_up_the_rewrite(project: Project) -> None:
    """The daemon holds an flock on the project's `.swarmforge/` for its whole life, and the
    main checkout's live file lives in that folder: the rewrite must not wait for it."""
    from handoffd.core import lifecycle

    fd = os.open(lifecycle.lock_path(str(project.root)), os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # what a running daemon holds
        result = project.run("ready_for_next", role="coder")  # run_command has a timeout
        assert result.out == "NO_TASK\n"
        assert live_file(project, "coder").phase == "idle"
    finally:
        os.close(fd)


def test_a_live_file_that_cannot_be_written_never_fails_the_helper(project: Project) -> None:
    (project.worktrees["QA"] / live.FILE).mkdir(parents=True)  # a directory in its place
    assert project.run("ready_for_next", role="QA").out == "NO_TASK\n"


SHAPES = ("made, empty", "not made", "behind a link, empty", "behind a link, holding one",
          "a temp file only", "one waiting", "one in process")  # fmt: skip


@pytest.mark.parametrize("shape", SHAPES)
def test_looking_at_empty_folders_without_the_scan_finds_what_the_scan_finds(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    """`work.look` skips the scan (and its import) when `new/` and `in_process/` hold no
    name; whatever the folders hold, what it finds is what the scan finds."""
    from handoffd.core import config

    role = config.load_roles(str(project.root))["QA"]
    new, in_process = Path(role.path(config.Box.NEW)), Path(role.path(config.Box.IN_PROCESS))
    if shape != "not made":
        in_process.mkdir(parents=True, exist_ok=True)
    if shape.startswith("behind a link"):
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        if shape.endswith("one"):
            (elsewhere / "50_a.handoff").write_text("id: a\n\nbody\n", encoding="utf-8")
        new.parent.mkdir(parents=True, exist_ok=True)
        new.symlink_to(elsewhere)
    elif shape == "a temp file only":
        new.mkdir(parents=True, exist_ok=True)
        (new / ".50_a.handoff.1.0.tmp").write_text("", encoding="utf-8")
    elif shape == "one waiting":
        project.put("QA", "50_a.handoff")
    elif shape == "one in process":
        project.put("QA", "50_a.handoff", box="inbox/in_process")
    elif shape == "made, empty":
        new.mkdir(parents=True, exist_ok=True)

    def seen(found: work.Work) -> tuple[object, ...]:
        paths = [entry.path for entry in found.in_process]
        return paths, found.waiting, found.mode, found.batch, found.waiting_for, found.answers

    quick = seen(work.look(role, "coder"))
    monkeypatch.setattr(work, "_empty", lambda folder: False)
    assert quick == seen(work.look(role, "coder"))


def test_work_describes_a_batch_and_what_waits_behind_it() -> None:
    cards = [
        Entry("cleaner", State.IN_PROCESS, f"/b/c{i}.handoff", "/b",
              headers={"id": f"c{i}", "task": f"t{i}", "dequeued_at": NOW})
        for i in range(3)
    ]  # fmt: skip
    summary = work.describe(work.Work(cards, 2, "batch", batch=True))
    assert summary.phase == "working on a batch of 3"
    assert summary.next_step == (
        "Finish a batch of 3, then run done_with_current.sh (2 more waiting)."
    )
    assert summary.in_flight[0] == "c0@cleaner, t0, taken 2026-06-15 14:05Z"


# --- atomic rewrites ----------------------------------------------------------------------

WRITER = """
import sys
from handoffd.continuity import live
worktree, big = sys.argv[1], int(sys.argv[2])
states = [live.State("2026-01-01T00:00:00Z", "main", p, "step " + p * big) for p in "ab"]
n = 0
while True:
    live.write(worktree, states[n % 2])
    n += 1
    if n == int(sys.argv[3]):
        print("ready", flush=True)
"""


def test_sigkill_during_rewrites_leaves_the_old_or_the_new_file_never_a_torn_one(
    tmp_path: Path,
) -> None:
    worktree = str(tmp_path)
    expected = {live.render(live.State("2026-01-01T00:00:00Z", "main", p, "step " + p * 150), {})
                for p in "ab"}  # fmt: skip
    for writes in range(1, 21):  # killed after a different number of rewrites each time
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, worktree, "150", str(writes)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        assert (tmp_path / live.FILE).read_text() in expected
    live.sweep(str(tmp_path / ".swarmforge"))  # a killed writer's temp file is swept
    assert os.listdir(tmp_path / ".swarmforge") == ["HANDOFF.md"]


# --- hostile files (docs/protocol.md Part II) -------------------------------------------------


def test_a_live_file_linked_outside_is_replaced_never_read_or_written_through(
    project: Project, tmp_path: Path
) -> None:
    target = tmp_path / "precious.md"
    target.write_text("## Decisions\n- TOP-SECRET\n")
    os.utime(target, (1_000_000, 1_000_000))
    link = project.worktrees["coder"] / ".swarmforge" / "HANDOFF.md"
    link.symlink_to(target)
    project.put("coder", "50_20260101T000000Z_000001_from_QA_to_coder.handoff")
    taken = project.run("ready_for_next", role="coder")
    assert taken.code == 0 and taken.out.startswith("TASK: "), taken.err
    assert target.read_text() == "## Decisions\n- TOP-SECRET\n"
    assert target.stat().st_mtime == 1_000_000
    assert not link.is_symlink() and "TOP-SECRET" not in link.read_text()
    assert live_file(project, "coder").phase.startswith("working on")


def test_a_live_file_over_64_kib_is_never_read_past_the_limit_and_is_replaced(
    project: Project,
) -> None:
    path = project.worktrees["coder"] / ".swarmforge" / "HANDOFF.md"
    path.write_text("## Decisions\n- TOP-SECRET\n" + "x" * 70_000)
    assert live.read(str(project.worktrees["coder"])) is None
    project.put("coder", "50_20260101T000000Z_000001_from_QA_to_coder.handoff")
    assert project.run("ready_for_next", role="coder").code == 0
    assert "TOP-SECRET" not in path.read_text() and path.stat().st_size < 4096


def test_note_on_a_folder_where_the_live_file_should_be_is_one_line(project: Project) -> None:
    path = project.worktrees["coder"] / ".swarmforge" / "HANDOFF.md"
    path.mkdir()
    noted = project.run("handoffd", "note", "--decision", "keep it", role="coder")
    assert noted.code == 1 and noted.out == ""
    assert noted.err == f"NOTE_NOT_WRITTEN: {path}: a directory, not the live file; remove it\n"
    assert not [n for n in os.listdir(path.parent) if n.endswith(".tmp")]  # no temp file left


def test_a_rewrite_sweeps_a_dead_writers_temp_even_when_its_pid_is_alive_again(
    project: Project,
) -> None:
    """A temp older than a minute is no live rewrite's, whatever process has that pid now
    (pid 1 is always alive; pids are reused within minutes).  A fresh temp of a live
    writer is never taken from under it."""
    folder = project.worktrees["coder"] / ".swarmforge"
    reused, fresh = folder / ".HANDOFF.md.1.0.tmp", folder / f".HANDOFF.md.{os.getpid()}.0.tmp"
    for temp in (reused, fresh):
        temp.write_text("# HANDOFF — half written\n")
    old = time.time() - 10 * 60
    os.utime(reused, (old, old))
    noted = project.run("handoffd", "note", "--decision", "keep it", role="coder", timeout=HANG)
    assert noted.code == 0, noted.err
    assert sorted(n for n in os.listdir(folder) if n.endswith(".tmp")) == [fresh.name]


# --- one listing a call: the step hands the live file what it saw -----------------------

PUT = {  # role -> (id, priority, task) of the files waiting in its new/
    "coder": [("20260101T000000Z_000001_from_QA", "50", "parse"),
              ("20260101T000000Z_000002_from_QA", "50", "lex")],
    "cleaner": [("20260101T000000Z_000001_from_QA", "50", "a"),
                ("20260101T000000Z_000002_from_QA", "50", "b"),
                ("20260101T000000Z_000003_from_QA", "60", "c")],
}  # fmt: skip
STEPS = ("take", "take", "finish", "finish", "take")


@pytest.mark.parametrize("role", list(PUT))
def test_each_helper_call_lists_each_folder_once_and_writes_what_a_scan_would(
    project: Project, role: str
) -> None:
    """`ready_for_next` and `done_with_current` list each folder of the role once a call:
    the live file is rewritten from what the step listed and read, under its lock (it used
    to list `new/` and `in_process/` again, and `in_process/` up to five times, each call);
    every queue file is opened once at most, the waiting ones only by the step.  What it
    writes is what a fresh scan of the queue says (but for the time)."""
    from handoffd.ops import queue
    from handoffd.ops.context import resolve_context
    from handoffd.queue import reports
    from tests.conftest import touched

    for ident, priority, task in PUT[role]:
        project.put(role, f"{priority}_{ident}_to_{role}.handoff", id=ident, task=task,
                    priority=priority)  # fmt: skip
    first = PUT[role][0][0]
    reports.store(str(project.handoffs(role)), first, reports.ANSWER, role, "ann", "",
                  "Yes.", time.time(), {"question": "Which?"})  # fmt: skip
    handoffs = str(project.handoffs(role))
    for step in STEPS:
        context = resolve_context(str(project.root), role)
        with touched() as seen:
            done = (queue.take if step == "take" else queue.finish)(context)
        assert done.code == 0, done.err
        mine = [(event, path) for event, path in seen if path.startswith(handoffs)]
        listed = [path for event, path in mine if event != "open"]
        assert sorted(listed) == sorted(set(listed)), f"{step}: {listed}"
        opened = [path for event, path in mine if event == "open" and hf.is_item(path)]
        assert sorted(opened) == sorted(set(opened)), f"{step}: {opened}"
        handed = (project.worktrees[role] / live.FILE).read_text().split("\n", 1)[1]
        live.refresh(context.me, force=True)  # from a scan of its own
        scanned = (project.worktrees[role] / live.FILE).read_text().split("\n", 1)[1]
        assert handed == scanned, step
