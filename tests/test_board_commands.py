"""`handoffd heartbeat release block unblock report` end to end (docs/protocol.md §8): the
installed commands as subprocesses in a real git project with real worktrees.

Roles of the fixture project: coder (task mode, agent `agent`), cleaner (batch mode,
agent `bot`), QA (task mode).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
from pathlib import Path

import pytest

from handoffd.core import handoff as hf
from handoffd.queue import heartbeat, reports
from tests.conftest import Project, Result, helper_env

ID1 = "20260101T000000Z_000001_from_QA"
ID2 = "20260101T000000Z_000002_from_QA"
ID3 = "20260101T000000Z_000003_from_QA"


def name(ident: str, to: str = "coder", priority: str = "50") -> str:
    return f"{priority}_{ident}_to_{to}.handoff"


def put(project: Project, ident: str, to: str = "coder", box: str = "inbox/new", **h: str) -> Path:
    return project.put(to, name(ident, to), box=box, id=ident, **h)


def run(
    project: Project,
    *args: str,
    role: str | None = "coder",
    env: dict[str, str] | None = None,
    stdin: bytes = b"",
    cwd: Path | None = None,
) -> Result:
    """Run `handoffd ARGS` (or a helper, when the first arg is not a subcommand) as `role`."""
    command = (
        list(args) if args[0].startswith(("ready_", "done_", "swarm_")) else ["handoffd", *args]
    )
    environment = {**helper_env(role), **(env or {})}
    for key in ("SWARMFORGE_AGENT", "SWARMFORGE_CONVERSATION"):
        if env is None or key not in env:
            environment.pop(key, None)
    proc = subprocess.run(
        command,
        cwd=cwd or (project.worktrees[role] if role else project.root),
        env=environment,
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode(), proc.stdout)


def headers(path: Path) -> dict[str, str]:
    return dict(hf.read(str(path)).headers)


def listing(directory: Path) -> list[str]:
    return sorted(os.listdir(directory)) if directory.exists() else []


def beat(project: Project, role: str) -> str | None:
    path = project.handoffs(role) / "heartbeat"
    return path.read_text() if path.exists() else None


# --- heartbeat -------------------------------------------------------------------------------


def test_heartbeat_names_the_agent_from_roles_tsv(project: Project) -> None:
    result = run(project, "heartbeat")
    path = project.handoffs("coder") / "heartbeat"
    assert (result.code, result.out, result.err) == (0, f"HEARTBEAT: {path}\n", "")
    assert beat(project, "coder") == "agent: agent\nconversation:\n"


def test_heartbeat_takes_agent_and_conversation_from_options_then_environment(
    project: Project,
) -> None:
    env = {"SWARMFORGE_AGENT": "env-agent", "SWARMFORGE_CONVERSATION": "env-conv"}
    assert run(project, "heartbeat", env=env).code == 0
    assert beat(project, "coder") == "agent: env-agent\nconversation: env-conv\n"
    assert run(project, "heartbeat", "--agent", "opt", "--conversation", "c9", env=env).code == 0
    assert beat(project, "coder") == "agent: opt\nconversation: c9\n"


def test_heartbeat_for_another_role_with_role_and_root(project: Project, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    result = run(project, "heartbeat", "--role", "cleaner", "--root", str(project.root),
                 role=None, cwd=outside)  # fmt: skip
    assert result.code == 0, result.err
    assert beat(project, "cleaner") == "agent: bot\nconversation:\n"


def test_heartbeat_without_a_role_is_exit_1(project: Project, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    result = run(project, "heartbeat", "--root", str(project.root), role=None, cwd=outside)
    assert (result.code, result.err) == (1, "Set SWARMFORGE_ROLE.\n")


@pytest.mark.parametrize(
    "helper",
    ["ready_for_next", "ready_for_next_task", "done_with_current", "done_with_current_task"],
)
def test_every_helper_renews_the_heartbeat_even_when_it_refuses(
    project: Project, helper: str
) -> None:
    os.makedirs(project.handoffs("coder"), exist_ok=True)
    (project.handoffs("coder") / "heartbeat").write_text("agent: agent\nconversation:\n")
    os.utime(project.handoffs("coder") / "heartbeat", (1_000_000, 1_000_000))
    run(project, helper, env={"SWARMFORGE_CONVERSATION": "c7"})
    assert beat(project, "coder") == "agent: agent\nconversation: c7\n"
    assert (project.handoffs("coder") / "heartbeat").stat().st_mtime > 1_000_000


def test_swarm_handoff_renews_the_senders_heartbeat(project: Project) -> None:
    draft = project.draft(project.note_draft())
    assert run(project, "swarm_handoff", str(draft)).code == 0
    assert beat(project, "coder") == "agent: agent\nconversation:\n"


def test_a_heartbeat_linked_outside_is_replaced_and_its_target_never_touched(
    project: Project, tmp_path: Path
) -> None:
    """The target holds exactly what the heartbeat would: a reader that follows the link
    sees nothing to rewrite and touches (utime) the target instead."""
    target = tmp_path / "precious"
    target.write_bytes(heartbeat.content("agent", ""))
    os.utime(target, (1_000_000, 1_000_000))
    link = project.handoffs("coder") / "heartbeat"
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    for command in (("heartbeat",), ("ready_for_next",)):
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        result = run(project, *command)
        assert result.code == 0, result.err
        assert target.stat().st_mtime == 1_000_000, command
        assert not link.is_symlink() and link.read_bytes() == target.read_bytes()


# --- release ---------------------------------------------------------------------------------


def test_release_puts_a_task_back_into_new_with_released_at(project: Project) -> None:
    put(project, ID1)
    assert run(project, "ready_for_next").code == 0
    result = run(project, "release")
    back = project.box("coder", "inbox/new") / name(ID1)
    assert (result.code, result.out, result.err) == (0, f"RELEASED: {back}\n", "")
    assert listing(project.box("coder", "inbox/in_process")) == []
    fields = headers(back)
    assert "dequeued_at" in fields and fields["released_at"].endswith("Z")
    again = run(project, "ready_for_next")  # the next take finds it first again
    assert again.out.startswith(f"TASK: {project.box('coder', 'inbox/in_process') / name(ID1)}\n")


def test_release_of_a_batch_by_any_of_its_files_puts_the_whole_batch_back(
    project: Project,
) -> None:
    for ident in (ID1, ID2):
        put(project, ident, to="cleaner")
    assert run(project, "ready_for_next", role="cleaner").code == 0
    result = run(project, "release", ID2, role="cleaner")
    new = project.box("cleaner", "inbox/new")
    assert (
        result.out
        == f"RELEASED: {new / name(ID1, 'cleaner')}\nRELEASED: {new / name(ID2, 'cleaner')}\n"
    )
    assert result.code == 0
    assert listing(project.box("cleaner", "inbox/in_process")) == []
    stamps = {headers(new / name(i, "cleaner"))["released_at"] for i in (ID1, ID2)}
    assert len(stamps) == 1  # one release, one time


@pytest.mark.parametrize("role", ["coder", "cleaner"])
def test_release_with_nothing_in_process_is_no_current_task_in_both_modes(
    project: Project, role: str
) -> None:
    put(project, ID1, to=role)
    result = run(project, "release", role=role)
    assert (result.code, result.out, result.err) == (1, "", "NO_CURRENT_TASK\n")
    assert listing(project.box(role, "inbox/new")) == [name(ID1, role)]


def test_release_of_an_id_not_in_process_is_refused_and_moves_nothing(project: Project) -> None:
    put(project, ID1)
    put(project, ID2)
    run(project, "ready_for_next")
    result = run(project, "release", ID2)  # waiting in new/, not in process
    assert (result.code, result.err) == (2, f"NOT_IN_PROCESS: {ID2}\n")
    assert listing(project.box("coder", "inbox/in_process")) == [name(ID1)]


def test_a_card_copied_from_the_board_names_the_callers_own_copy(project: Project) -> None:
    # status shows cards, `<id>@<role>` (docs/protocol.md §8): block, report and release
    # take the caller's own card as its id
    put(project, ID1)
    run(project, "ready_for_next")
    blocked = run(project, "block", f"{ID1}@coder", "--reason", "needs QA")
    assert blocked.code == 0, blocked.err
    taken = project.box("coder", "inbox/in_process") / name(ID1)
    assert headers(taken)["blocked_reason"] == "needs QA"
    reported = run(project, "report", f"{ID1}@coder", "--status", "RUNNING")
    assert reported.code == 0 and len(stored(project, ID1)) == 1
    released = run(project, "release", f"{ID1}@coder")
    assert released.out.startswith("RELEASED: ")
    # another role's card is not the caller's copy
    assert run(project, "unblock", f"{ID1}@cleaner").err == f"UNKNOWN_HANDOFF: {ID1}@cleaner\n"


def test_release_names_work_by_file_name_too(project: Project) -> None:
    put(project, ID1)
    run(project, "ready_for_next")
    assert run(project, "release", name(ID1)).code == 0
    assert listing(project.box("coder", "inbox/new")) == [name(ID1)]


def test_release_does_not_renew_the_heartbeat(project: Project) -> None:
    put(project, ID1)
    run(project, "ready_for_next")
    os.utime(project.handoffs("coder") / "heartbeat", (1_000_000, 1_000_000))
    run(project, "release")
    assert (project.handoffs("coder") / "heartbeat").stat().st_mtime == 1_000_000


# --- block and unblock ----------------------------------------------------------------------


def test_block_sets_the_reason_on_the_work_in_process_and_unblock_removes_it(
    project: Project,
) -> None:
    put(project, ID1)
    run(project, "ready_for_next")
    path = project.box("coder", "inbox/in_process") / name(ID1)
    result = run(project, "block", "--reason", "waiting for the schema")
    assert (result.code, result.out) == (0, f"BLOCKED: {path}\n")
    assert headers(path)["blocked_reason"] == "waiting for the schema"
    result = run(project, "unblock")
    assert (result.code, result.out) == (0, f"UNBLOCKED: {path}\n")
    assert "blocked_reason" not in headers(path)


def test_block_by_id_reaches_a_copy_waiting_in_new(project: Project) -> None:
    path = put(project, ID1)
    assert run(project, "block", ID1, "--reason", "not yet").code == 0
    assert headers(path)["blocked_reason"] == "not yet"
    assert hf.read(str(path)).body == "Do the thing.\n"


def test_taking_and_releasing_keep_the_reason_and_completing_removes_it(project: Project) -> None:
    put(project, ID1)
    run(project, "ready_for_next")
    run(project, "block", "--reason", "from the start")
    taken = project.box("coder", "inbox/in_process") / name(ID1)
    run(project, "ready_for_next")  # resuming keeps it
    assert headers(taken)["blocked_reason"] == "from the start"
    run(project, "release")
    assert (
        headers(project.box("coder", "inbox/new") / name(ID1))["blocked_reason"] == "from the start"
    )
    run(project, "unblock", ID1)  # a blocked copy in new/ is not taken until unblocked
    run(project, "ready_for_next")
    run(project, "block", "--reason", "again")
    run(project, "done_with_current")
    assert "blocked_reason" not in headers(project.box("coder", "inbox/completed") / name(ID1))


@pytest.mark.parametrize("command", ["block", "unblock"])
def test_block_and_unblock_errors(project: Project, command: str) -> None:
    extra = ["--reason", "r"] if command == "block" else []
    nothing = run(project, command, *extra)
    assert (nothing.code, nothing.err) == (1, "NO_CURRENT_TASK\n")
    unknown = run(project, command, "20990101T000000Z_000009_from_QA", *extra)
    assert (unknown.code, unknown.err) == (2, "UNKNOWN_HANDOFF: 20990101T000000Z_000009_from_QA\n")


@pytest.mark.parametrize("reason", ["", "   ", "x" * 201, "two\nlines"])
def test_block_refuses_a_bad_reason_and_changes_nothing(project: Project, reason: str) -> None:
    path = put(project, ID1)
    before = path.read_bytes()
    result = run(project, "block", ID1, "--reason", reason)
    assert result.code == 2 and result.err.startswith("INVALID_REASON: ")
    assert path.read_bytes() == before


@pytest.mark.parametrize("reason", ["tab\there", "wipe\033[2K", "del\x7f", "csi\x9bJ", "\u202erev"])
def test_block_and_report_refuse_a_reason_with_a_control_character(
    project: Project, reason: str
) -> None:
    """The board, the live file and `resume` show a reason: one with a tab or an escape
    in it is refused where it enters, and nothing changes or is stored."""
    path = put(project, ID1, box="inbox/in_process")
    before = path.read_bytes()
    result = run(project, "block", "--reason", reason)
    assert result.code == 2 and result.err.startswith("INVALID_REASON: ")
    assert "control characters" in result.err and result.err.count("\n") == 1
    report = run(project, "report", "--status", "BLOCKED", "--file", "-",
                 stdin=f"Stuck.\nBlockers: {reason}\n".encode())  # fmt: skip
    assert report.code == 2 and report.err.startswith("INVALID_REASON: ")
    assert path.read_bytes() == before and stored(project, ID1) == []


def test_a_200_character_reason_is_accepted(project: Project) -> None:
    path = put(project, ID1)
    assert run(project, "block", ID1, "--reason", "y" * 200).code == 0
    assert headers(path)["blocked_reason"] == "y" * 200


# --- report -----------------------------------------------------------------------------------


def stored(project: Project, ident: str, role: str = "coder") -> list[reports.Report]:
    return [reports.read(p) for p in reports.report_paths(str(project.handoffs(role)), ident)]


def test_report_running_takes_work_first_when_nothing_is_in_process(project: Project) -> None:
    put(project, ID1)
    result = run(project, "report", "--status", "RUNNING", "--file", "-", stdin=b"Started.\n",
                 env={"SWARMFORGE_CONVERSATION": "c1"})  # fmt: skip
    taken = project.box("coder", "inbox/in_process") / name(ID1)
    [report] = stored(project, ID1)
    assert result.code == 0, result.err
    assert result.out.startswith(f"TASK: {taken}\n")
    assert result.out.endswith(f"REPORTED: {report.path}\n")
    assert (report.status, report.role, report.agent, report.conversation, report.text) == (
        "RUNNING", "coder", "agent", "c1", "Started.",
    )  # fmt: skip
    assert beat(project, "coder") == "agent: agent\nconversation: c1\n"


def test_report_running_on_work_in_process_takes_nothing_more(project: Project) -> None:
    put(project, ID1)
    put(project, ID2)
    run(project, "ready_for_next")
    result = run(project, "report", "--status", "RUNNING")
    [report] = stored(project, ID1)
    assert (result.code, result.out) == (0, f"REPORTED: {report.path}\n")
    assert listing(project.box("coder", "inbox/new")) == [name(ID2)]


def test_report_blocked_takes_the_reason_from_the_option(project: Project) -> None:
    put(project, ID1)
    run(project, "ready_for_next")
    result = run(project, "report", "--status", "BLOCKED", "--reason", "need creds")
    [report] = stored(project, ID1)
    path = project.box("coder", "inbox/in_process") / name(ID1)
    assert (result.code, result.out) == (0, f"REPORTED: {report.path}\nBLOCKED: {path}\n")
    assert report.status == "BLOCKED"
    assert headers(path)["blocked_reason"] == "need creds"


def test_report_blocked_takes_the_reason_from_the_first_blockers_line(project: Project) -> None:
    put(project, ID1)
    run(project, "ready_for_next")
    text = b"# Status\n\nBlockers: the API key is missing\nBlockers: second\n"
    assert run(project, "report", "--status", "BLOCKED", "--file", "-", stdin=text).code == 0
    path = project.box("coder", "inbox/in_process") / name(ID1)
    assert headers(path)["blocked_reason"] == "the API key is missing"


def test_report_blocked_without_any_reason_is_refused_and_stores_nothing(project: Project) -> None:
    put(project, ID1)
    run(project, "ready_for_next")
    result = run(project, "report", "--status", "BLOCKED", "--file", "-", stdin=b"No luck.\n")
    assert result.code == 2 and result.err.startswith("NO_BLOCKED_REASON")
    assert stored(project, ID1) == []


def test_report_done_finishes_and_prints_what_done_with_current_prints(project: Project) -> None:
    put(project, ID1)
    put(project, ID2)
    run(project, "ready_for_next")
    result = run(project, "report", "--status", "DONE", "--file", "-", stdin=b"Shipped.\n")
    [report] = stored(project, ID1)
    completed = project.box("coder", "inbox/completed") / name(ID1)
    next_task = project.box("coder", "inbox/in_process") / name(ID2)
    assert result.code == 0, result.err
    assert result.out.startswith(
        f"REPORTED: {report.path}\nCOMPLETED: {completed}\nTASK: {next_task}\n"
    )
    assert report.status == "DONE" and report.text == "Shipped."


def test_report_done_on_a_batch_reports_on_every_file_and_finishes_the_batch(
    project: Project,
) -> None:
    put(project, ID1, to="cleaner")
    put(project, ID2, to="cleaner")
    run(project, "ready_for_next", role="cleaner")
    result = run(project, "report", "--status", "DONE", role="cleaner")
    assert result.code == 0, result.err
    assert len(stored(project, ID1, "cleaner")) == len(stored(project, ID2, "cleaner")) == 1
    assert "COMPLETED_BATCH: " in result.out and result.out.endswith("NO_TASK\n")


def test_report_on_an_id_not_in_process_is_refused_after_taking(project: Project) -> None:
    put(project, ID1)
    put(project, ID2)
    result = run(project, "report", ID2, "--status", "RUNNING")
    assert (result.code, result.err) == (2, f"NOT_IN_PROCESS: {ID2}\n")
    assert result.out.startswith("TASK: ")  # what it took is still shown
    assert stored(project, ID1) == stored(project, ID2) == []


def test_report_with_nothing_in_process_is_no_current_task(project: Project) -> None:
    for status in ("RUNNING", "BLOCKED", "DONE"):
        result = run(project, "report", "--status", status, "--reason", "r")
        assert (result.code, result.err) == (1, "NO_CURRENT_TASK\n"), status
    assert not (project.handoffs("coder") / "reports").exists()


def test_a_report_over_64_kib_is_refused_and_stores_nothing(project: Project) -> None:
    put(project, ID1)
    run(project, "ready_for_next")
    result = run(project, "report", "--status", "RUNNING", "--file", "-", stdin=b"x" * 65537)
    assert result.code == 2 and result.err.startswith("REPORT_TOO_LARGE")
    assert stored(project, ID1) == []
    assert (
        run(project, "report", "--status", "RUNNING", "--file", "-", stdin=b"x" * 65536).code == 0
    )


def test_51_reports_through_the_command_keep_50(project: Project) -> None:
    put(project, ID1)
    run(project, "ready_for_next")
    folder = project.handoffs("coder") / "reports" / ID1
    folder.mkdir(parents=True)
    for n in range(50):  # fifty older reports, then one through the command
        reports.store(str(project.handoffs("coder")), ID1, "RUNNING", "coder", "a", "", f"{n}", n)
    assert run(project, "report", "--status", "RUNNING", "--file", "-", stdin=b"newest").code == 0
    kept = stored(project, ID1)
    assert len(kept) == 50 and kept[0].text == "1" and kept[-1].text == "newest"


# --- reports facing a hostile .swarmforge (docs/protocol.md Part II) ----------------------------


def outside_folder(folder: Path, count: int = 60) -> dict[str, bytes]:
    """A folder outside the project with `count` report-named files; what it holds."""
    folder.mkdir(parents=True)
    for n in range(count):
        (folder / f"2020010{n // 10}T0000{n % 10:02d}.000000Z_RUNNING.md").write_text(f"{n}\n")
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_a_report_folder_linked_outside_is_replaced_never_written_or_pruned_through(
    project: Project, tmp_path: Path
) -> None:
    put(project, ID1)
    run(project, "ready_for_next")
    outside = tmp_path / "outside"
    before = outside_folder(outside)
    (project.handoffs("coder") / "reports").mkdir()
    folder = project.handoffs("coder") / "reports" / ID1
    folder.symlink_to(outside)
    result = run(project, "report", "--status", "RUNNING", "--file", "-", stdin=b"ours")
    assert result.code == 0, result.err
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before  # not one file lost
    assert not folder.is_symlink() and folder.is_dir()
    [report] = stored(project, ID1)
    assert report.text == "ours" and result.out == f"REPORTED: {report.path}\n"


def test_a_reports_folder_linked_outside_is_replaced_never_written_or_pruned_through(
    project: Project, tmp_path: Path
) -> None:
    put(project, ID1)
    run(project, "ready_for_next")
    before = outside_folder(tmp_path / "x" / ID1)  # what reports/<ID1>/ would lead to
    (project.handoffs("coder") / "reports").symlink_to(tmp_path / "x")
    result = run(project, "report", "--status", "RUNNING", "--file", "-", stdin=b"ours")
    assert result.code == 0, result.err
    assert {p.name: p.read_bytes() for p in (tmp_path / "x" / ID1).iterdir()} == before
    assert not (project.handoffs("coder") / "reports").is_symlink()
    assert [r.text for r in stored(project, ID1)] == ["ours"]


def plant_reports(project: Project, names: list[str], mtime: float) -> Path:
    """Report files by these names in coder's folder for ID1, all with this mtime."""
    folder = project.handoffs("coder") / "reports" / ID1
    folder.mkdir(parents=True)
    for n, report_name in enumerate(names):
        (folder / report_name).write_text(f"---\nstatus: RUNNING\n---\nplanted {n}\n")
        os.utime(folder / report_name, (mtime, mtime))
    return folder


def test_a_report_written_while_the_clock_is_an_hour_behind_is_kept(project: Project) -> None:
    """Fifty reports written an hour 'later' (names and mtimes), then one now: by name and by
    time it is the oldest, yet retention never removes the report it has just written."""
    put(project, ID1)
    run(project, "ready_for_next")
    ahead = time.time() + 3600
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(ahead))
    folder = plant_reports(project, [f"{stamp}.{n:06d}Z_RUNNING.md" for n in range(50)], ahead)
    result = run(project, "report", "--status", "RUNNING", "--file", "-", stdin=b"now")
    assert result.code == 0, result.err
    written = result.out.removeprefix("REPORTED: ").strip()
    assert os.path.exists(written), "the report REPORTED: names was removed"
    assert len(os.listdir(folder)) == 50


def test_the_latest_report_is_the_one_written_last_not_a_planted_name(project: Project) -> None:
    put(project, ID1)
    run(project, "ready_for_next")
    names = [f"2026010{n // 10}T0000{n % 10:02d}.000000Z_RUNNING.md" for n in range(49)]
    folder = plant_reports(project, [*names, "29991231T235959.999999Z_DONE.md"], time.time() - 60)
    result = run(project, "report", "--status", "RUNNING", "--file", "-", stdin=b"the newest")
    assert result.code == 0, result.err
    assert os.path.exists(result.out.removeprefix("REPORTED: ").strip())
    assert len(os.listdir(folder)) == 50
    [card] = json.loads(run(project, "status", "--json").out)
    assert card["latest_report"]["excerpt"] == "the newest"


# The limit is checked on at most limit + 1 bytes: a regression that reads everything first
# hits this cap (MemoryError) instead of eating the machine.
MEMORY_CAP = 400 * 1024 * 1024


def capped(project: Project, *args: str, stdin: int | None = None) -> Result:
    """`handoffd ARGS` as coder, its address space capped at 400 MB, bounded in time."""
    proc = subprocess.run(
        ["handoffd", *args], cwd=project.worktrees["coder"], env=helper_env("coder"),
        stdin=stdin, capture_output=True, timeout=10, check=False,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP)),
    )  # fmt: skip
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode(), proc.stdout)


def test_a_report_from_dev_zero_is_refused_after_the_limit(project: Project) -> None:
    put(project, ID1)
    run(project, "ready_for_next")
    result = capped(project, "report", "--status", "RUNNING", "--file", "/dev/zero")
    assert (result.code, result.err) == (
        2,
        "REPORT_TOO_LARGE: more than 65536 bytes; at most 65536\n",
    )
    assert stored(project, ID1) == []


def test_an_endless_stdin_is_refused_after_the_limit(project: Project) -> None:
    put(project, ID1)
    run(project, "ready_for_next")
    yes = subprocess.Popen(["yes"], stdout=subprocess.PIPE)
    try:
        result = capped(project, "report", "--status", "RUNNING", "--file", "-", stdin=yes.stdout)
    finally:
        yes.kill()
        yes.wait()
    assert (result.code, result.err) == (
        2,
        "REPORT_TOO_LARGE: more than 65536 bytes; at most 65536\n",
    )
    assert stored(project, ID1) == []


def test_a_fifo_named_as_the_report_file_is_refused_without_waiting(
    project: Project, tmp_path: Path
) -> None:
    put(project, ID1)
    run(project, "ready_for_next")
    os.mkfifo(tmp_path / "fifo")
    result = capped(project, "report", "--status", "RUNNING", "--file", str(tmp_path / "fifo"))
    assert result.code == 2 and result.err.startswith("REPORT_FILE_INVALID: "), result.err
    assert "a FIFO" in result.err and result.err.count("\n") == 1
    assert stored(project, ID1) == []


def test_an_error_file_linked_to_dev_zero_costs_status_nothing(project: Project) -> None:
    failed = name(ID1, to="ghost").replace("_from_QA", "_from_coder")
    project.put("coder", failed, box="failed", id=ID1.replace("QA", "coder"), to="ghost")
    (project.box("coder", "failed") / f"{failed}.error").symlink_to("/dev/zero")
    result = capped(project, "status", "--json")
    assert result.code == 0, result.err
    [card] = json.loads(result.out)
    assert card["color"] == "red" and card["state"] == "failed"


def test_an_unknown_status_is_a_usage_error(project: Project) -> None:
    assert run(project, "report", "--status", "FINISHED").code == 2


# --- only .handoff names are queue items -------------------------------------------------------


def test_a_non_handoff_file_in_new_is_never_taken(project: Project) -> None:
    new = project.box("coder", "inbox/new")
    new.mkdir(parents=True)
    (new / "notes.txt").write_text("not mail\n")
    assert run(project, "ready_for_next").out == "NO_TASK\n"
    assert run(project, "ready_for_next", role="cleaner").out == "NO_TASK\n"
    assert listing(new) == ["notes.txt"]


def test_an_editor_backup_in_process_is_no_second_task(project: Project) -> None:
    put(project, ID1)
    run(project, "ready_for_next")
    in_process = project.box("coder", "inbox/in_process")
    (in_process / f"{name(ID1)}~").write_text("backup\n")
    again = run(project, "ready_for_next")
    assert (again.code, again.out.split("\n")[0]) == (0, f"TASK: {in_process / name(ID1)}")
    done = run(project, "done_with_current")
    assert done.code == 0 and done.out.endswith("NO_TASK\n")
    assert run(project, "release").code == 1  # the backup is not work in process


def test_a_batch_takes_only_handoff_files_and_completes_them_with_one_time(
    project: Project,
) -> None:
    put(project, ID1, to="cleaner")
    put(project, ID2, to="cleaner")
    put(project, ID3, to="cleaner")
    (project.box("cleaner", "inbox/new") / "README.md").write_text("x\n")
    taken = run(project, "ready_for_next", role="cleaner")
    assert "COUNT: 3\n" in taken.out
    done = run(project, "done_with_current", role="cleaner")
    assert done.code == 0, done.err
    [batch] = listing(project.box("cleaner", "inbox/completed"))
    files = sorted((project.box("cleaner", "inbox/completed") / batch).iterdir())
    assert len({headers(f)["completed_at"] for f in files}) == 1
    assert listing(project.box("cleaner", "inbox/new")) == ["README.md"]


# --- drafts with depends_on and blocked_reason ---------------------------------------------------


def queue_note(project: Project, role: str, extra: str = "") -> Result:
    draft = project.draft(project.note_draft(to="QA") + extra, name=f"d-{role}.txt")
    return run(project, "swarm_handoff", str(draft), role=role)


def test_a_draft_may_depend_on_a_handoff_that_exists_anywhere(project: Project) -> None:
    first = Path(queue_note(project, "coder").out.split(": ", 1)[1].strip())
    ident = headers(first)["id"]
    result = queue_note(project, "cleaner", f"depends_on: {ident}\nblocked_reason: needs QA\n")
    assert result.code == 0, result.err
    queued = Path(result.out.split(": ", 1)[1].strip())
    keys = list(headers(queued))
    assert keys == ["id", "from", "to", "priority", "type", "message", "depends_on",
                    "blocked_reason", "created_at"]  # fmt: skip
    assert headers(queued)["depends_on"] == ident
    # still found once the original has moved on to sent/ and the copy to a completed batch
    sent = project.box("coder", "sent")
    sent.mkdir(parents=True)
    first.rename(sent / first.name)
    assert queue_note(project, "QA", f"depends_on: {ident}\n").code == 0
    (sent / first.name).unlink()
    put(project, ident, to="cleaner", box="inbox/completed/batch_20260101T000000Z_000001")
    assert queue_note(project, "QA", f"depends_on: {ident}\n").code == 0


def test_a_dependency_only_an_editors_backup_names_is_unknown(project: Project) -> None:
    # only `.handoff` names are queue items (docs/protocol.md §8): `x.handoff~` is no handoff
    ident = "20260101T000000Z_000001_from_QA"
    backup = put(project, ident, to="cleaner")
    backup.rename(backup.with_name(backup.name + "~"))
    result = queue_note(project, "coder", f"depends_on: {ident}\n")
    assert result.code == 2
    assert f"- Unknown dependency '{ident}'.\n" in result.err


def test_a_draft_depending_on_an_unknown_id_is_refused_and_kept(project: Project) -> None:
    result = queue_note(project, "coder", "depends_on: 20990101T000000Z_000001_from_QA\n")
    assert result.code == 2
    assert "- Unknown dependency '20990101T000000Z_000001_from_QA'.\n" in result.err
    assert (project.root / "d-coder.txt").exists()
    assert listing(project.box("coder", "outbox")) in ([], ["tmp"])


# --- a reason for a whole batch never replaces one already on a file of it ---------------

BATCH = "inbox/in_process/batch_20260101T000000Z_000001"


def batch_of_three(project: Project) -> list[Path]:
    return [put(project, ident, to="cleaner", box=BATCH) for ident in (ID1, ID2, ID3)]


@pytest.mark.parametrize("how", ["block", "report"])
def test_a_batch_wide_reason_keeps_the_reason_an_operator_put_on_one_file(
    project: Project, how: str
) -> None:
    """An operator blocked one file of the batch (R1); the agent then blocks its batch with
    no ID (R2): R2 goes on the files with no reason, R1 stays, and both are said."""
    first, second, third = batch_of_three(project)
    assert run(project, "block", ID1, "--reason", "R1", role="cleaner").code == 0
    if how == "block":
        result = run(project, "block", "--reason", "R2", role="cleaner")
    else:
        result = run(project, "report", "--status", "BLOCKED", "--reason", "R2", role="cleaner")
    assert result.code == 0, result.err
    lines = [line for line in result.out.splitlines() if not line.startswith("REPORTED: ")]
    assert lines == [f"BLOCKED: {second}", f"BLOCKED: {third}", f"ALREADY_BLOCKED: {first}"]
    reasons = [headers(path)["blocked_reason"] for path in (first, second, third)]
    assert reasons == ["R1", "R2", "R2"]


def test_a_batch_already_blocked_throughout_keeps_every_reason(project: Project) -> None:
    paths = batch_of_three(project)
    for ident, reason in zip((ID1, ID2, ID3), ("R1", "R2", "R3"), strict=True):
        run(project, "block", ident, "--reason", reason, role="cleaner")
    result = run(project, "block", "--reason", "R4", role="cleaner")
    assert (result.code, result.out) == (0, "".join(f"ALREADY_BLOCKED: {p}\n" for p in paths))
    assert [headers(path)["blocked_reason"] for path in paths] == ["R1", "R2", "R3"]


def test_naming_the_file_or_blocking_a_single_task_sets_the_new_reason(project: Project) -> None:
    """Where the command names exactly one file (its ID, or the one task in process), the
    new reason is what was asked for, and it replaces the old."""
    first, _, _ = batch_of_three(project)
    run(project, "block", ID1, "--reason", "R1", role="cleaner")
    assert run(project, "block", ID1, "--reason", "R9", role="cleaner").out == f"BLOCKED: {first}\n"
    assert headers(first)["blocked_reason"] == "R9"
    task = put(project, ID1, box="inbox/in_process")
    run(project, "block", "--reason", "R1")
    assert run(project, "block", "--reason", "R2").out == f"BLOCKED: {task}\n"
    assert headers(task)["blocked_reason"] == "R2"


# --- an operator names the card, the card names the role -------------------------------------


def test_an_operator_blocks_unblocks_and_releases_the_role_the_card_names(
    project: Project, tmp_path: Path
) -> None:
    """From the project root (coder's worktree) or from anywhere with --root, without
    SWARMFORGE_ROLE: `<id>@cleaner` acts on cleaner, as answer and reopen take the card."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    put(project, ID1, to="cleaner")
    assert run(project, "ready_for_next", role="cleaner").code == 0
    card, root = f"{ID1}@cleaner", ("--root", str(project.root))
    taken = project.box("cleaner", "inbox/in_process")
    [batch] = list(taken.iterdir())
    blocked = run(project, "block", card, "--reason", "which schema?", role=None, cwd=project.root)
    assert (blocked.code, blocked.out) == (0, f"BLOCKED: {batch / name(ID1, 'cleaner')}\n")
    unblocked = run(project, "unblock", card, *root, role=None, cwd=outside)
    assert (unblocked.code, unblocked.err) == (0, "")
    assert "blocked_reason" not in headers(batch / name(ID1, "cleaner"))
    released = run(project, "release", card, *root, role=None, cwd=outside)
    assert (released.code, released.err) == (0, "")
    assert listing(project.box("cleaner", "inbox/new")) == [name(ID1, "cleaner")]


def test_a_bare_id_of_another_roles_card_is_refused_naming_the_card_to_give(
    project: Project, tmp_path: Path
) -> None:
    """The §8 token line stays, and a second line says which role's card the ID is."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    put(project, ID1, to="cleaner")
    hint = f"{ID1} is a card of cleaner: give it as {ID1}@cleaner.\n"
    here = run(project, "block", ID1, "--reason", "x", role=None, cwd=project.root)
    assert (here.code, here.err) == (2, f"UNKNOWN_HANDOFF: {ID1}\n{hint}")
    root = ("--root", str(project.root))
    nowhere = run(project, "unblock", ID1, *root, role=None, cwd=outside)
    assert (nowhere.code, nowhere.err) == (1, f"Set SWARMFORGE_ROLE. {hint}")
    assert "blocked_reason" not in headers(
        project.box("cleaner", "inbox/new") / name(ID1, "cleaner")
    )


def test_report_given_another_roles_card_never_takes_or_finishes_that_roles_work(
    project: Project,
) -> None:
    """Only an operator's actions (the board's forms) read the role off `<id>@<role>`:
    `report RUNNING` takes work and `DONE` finishes it, so from the project root (coder's
    worktree) it acts for coder, who holds no such copy, and cleaner's file stays put."""
    put(project, ID1, to="cleaner")
    done = run(project, "report", f"{ID1}@cleaner", "--status", "RUNNING", "--file", "-",
               role=None, stdin=b"x\n", cwd=project.root)  # fmt: skip
    assert (done.code, done.out) == (2, "") and "NOT_IN_PROCESS" in done.err, done
    assert listing(project.box("cleaner", "inbox/new")) == [name(ID1, "cleaner")]
    assert listing(project.box("cleaner", "inbox/in_process")) == []


@pytest.mark.parametrize("how", ["option", "environment"])
def test_an_agent_name_that_is_not_utf8_is_refused_before_anything_moves(
    project: Project, how: str
) -> None:
    put(project, ID1, to="coder")
    if how == "option":
        done = run(project, "heartbeat", "--agent", "bad\udcff")
        assert (done.code, done.err) == (
            2, "INVALID_ARGUMENTS: --agent is not UTF-8 (it holds the byte 0xff); give it as "
            "UTF-8 text\n",
        )  # fmt: skip
    else:
        done = run(project, "ready_for_next", env={"SWARMFORGE_AGENT": "bad\udcff"})
        assert (done.code, done.err) == (
            1,
            "$SWARMFORGE_AGENT is not UTF-8: set it to UTF-8 text\n",
        )
        assert listing(project.box("coder", "inbox/new")) == [name(ID1, "coder")]
    assert "Traceback" not in done.err
