"""`handoffd carry-forward` (docs/protocol.md §11): the latest threads, newest activity
first, each a digest with its receipt; `--since`, `--role` and `-n`."""

from __future__ import annotations

import json

from handoffd.digest.carry import choose
from handoffd.queue.scan import Entry
from tests.conftest import Project
from tests.digest_support import report, run


def put(project: Project, role: str, seq: int, sender: str, task: str | None, **stamps: str) -> str:
    """A delivered copy in `role`'s completed/ with the given §2 timestamps; its id."""
    ident = f"20260101T00000{seq}Z_00000{seq}_from_{sender}"
    headers = {"task": task} if task else {}
    project.put(
        role,
        f"50_{ident}_to_{role}.handoff",
        box="inbox/completed",
        id=ident,
        to=role,
        recipient=role,
        **{"from": sender},
        **headers,
        **stamps,
    )
    return ident


def carry(project: Project, *args: str) -> list[dict]:
    result = run("carry-forward", project, *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def titles(items: list[dict]) -> list[str]:
    return [item["markdown"].split(" · ")[0] for item in items]


def make(project: Project) -> dict[str, str]:
    """Three threads: task `old` (March), a lone note (May, via its completion), task `new`
    (January, but with a report in June)."""
    return {
        "old": put(project, "cleaner", 1, "coder", "old", created_at="2026-03-01T00:00:00Z"),
        "note": put(
            project,
            "QA",
            2,
            "coder",
            None,
            created_at="2026-01-02T00:00:00Z",
            completed_at="2026-05-01T00:00:00Z",
        ),
        "new": put(project, "cleaner", 3, "QA", "new", created_at="2026-01-03T00:00:00Z"),
    }


def test_threads_come_newest_activity_first(project):
    ids = make(project)
    report(project, "cleaner", ids["new"], "DONE", "Done.", 1780272000)  # 2026-06-01
    items = carry(project)
    assert titles(items) == ["# Task new", f"# Handoff {ids['note']}", "# Task old"]
    assert [item["receipt"]["ids"] for item in items] == [[ids["new"]], [ids["note"]], [ids["old"]]]


def test_since_keeps_threads_active_since_then(project):
    make(project)
    assert titles(carry(project, "--since", "2026-02-15T00:00:00Z"))[-1] == "# Task old"
    assert len(carry(project, "--since", "2026-02-15T00:00:00Z")) == 2
    assert carry(project, "--since", "2026-12-01T00:00:00Z") == []


def test_role_keeps_threads_that_role_took_part_in(project):
    ids = make(project)
    assert [i["receipt"]["ids"] for i in carry(project, "--role", "QA")] == [
        [ids["note"]],
        [ids["new"]],
    ]


def test_n_limits_the_count_and_each_digest_is_compact(project):
    make(project)
    items = carry(project, "-n", "1")
    assert len(items) == 1 and len(items[0]["markdown"].splitlines()) <= 20


def test_a_project_without_threads_says_so(project):
    result = run("carry-forward", project)
    assert (result.returncode, result.stdout) == (0, "NO_THREADS\n")
    assert carry(project) == []


def test_a_bad_since_is_a_usage_error(project):
    assert run("carry-forward", project, "--since", "yesterday").returncode == 2


def test_text_output_is_each_digest_in_turn(project):
    make(project)
    out = run("carry-forward", project).stdout
    assert out.count("\n---\nreceipt: ") == 3
    assert out.index("# Handoff ") < out.index("# Task old") < out.index("# Task new")


def test_role_finds_a_thread_whose_file_is_an_archived_duplicate() -> None:
    # `sent/` names a second original with the same name `….2.handoff` (docs/protocol.md §5.3):
    # its last recipient is still `QA`, not `QA.2`
    name = "50_20260101T000001Z_000001_from_coder_to_cleaner_QA.2.handoff"
    file = Entry("coder", "sent", f"/p/.swarmforge/handoffs/sent/{name}")
    file.indexed = ("", "2026-01-01T00:00:01Z")  # as the index of history knows it
    assert [key for key, _ in choose([file], {}, 5, role="QA")] != []


def test_an_unknown_role_is_refused_not_an_empty_answer(project):
    make(project)
    result = run("carry-forward", project, "--role", "nobody")
    said = "Unknown role: nobody (known roles: QA, cleaner, coder)\n"
    assert (result.returncode, result.stdout, result.stderr) == (1, "", said)
