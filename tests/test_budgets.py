"""Budgets (docs/protocol.md §19): a role over its `budget` takes no new work, its Stop hook
tells of none, the daemon types it no wake-up and wakes it once the window has moved on;
`status` says so; work in process is never taken away.  Through the installed commands,
and the daemon stepped over a real project."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from handoffd.core import project as projects
from handoffd.core import tokens, usage
from handoffd.core.tokens import Spend
from testbed.project import Project, make_pool_project
from tests.daemon_support import events, open_daemon, queue
from tests.test_hooks import stop

NAME = "50_20260101T000000Z_000001_from_QA_to_coder.handoff"
CARD = "20260101T000000Z_000001_from_QA@coder"


def conf(project: Project, *lines: str) -> None:
    """The stored swarm configuration with `lines` (what `init` keeps and every command reads)."""
    path = project.root / ".swarmforge" / "swarmforge.conf"
    path.write_text("window coder agent master task\n" + "".join(f"{line}\n" for line in lines))


def spent(project: Project, role: str, counts: tuple[int, int, int, int], ago: float = 60.0,
          card: str | None = None) -> None:  # fmt: skip
    """A turn `role` ended `ago` seconds ago, as its Stop hook records it."""
    at = time.time() - ago
    project.handoffs(role).mkdir(parents=True, exist_ok=True)
    usage.append(str(project.handoffs(role)), Spend(at, card, "claude", counts), at)


def test_a_role_over_its_budget_takes_nothing_and_is_told_when_work_resumes(
    project: Project,
) -> None:
    conf(project, "budget coder 1000 per hour")
    project.put("coder", NAME, **{"from": "QA"})
    spent(project, "coder", (600, 300, 50_000, 100), ago=600)  # 1000: cache reads not counted
    took = project.run("ready_for_next", role="coder")
    assert (took.code, took.out) == (0, "NO_TASK\n")
    [line] = took.err.splitlines()
    assert line.startswith(
        "BUDGET_SPENT: 1000 of 1000 tokens in the last hour; work resumes after "
    )
    resumes = line.rsplit(" ", 1)[1]
    assert resumes.endswith("Z") and abs(_epoch(resumes) - (time.time() + 3000)) < 5
    assert (project.box("coder", "inbox/new") / NAME).exists()


def _epoch(stamp: str) -> float:
    from handoffd.core import handoff as hf

    found = hf.epoch(stamp)
    assert found is not None
    return found


def test_under_its_budget_a_role_takes_work_as_ever(project: Project) -> None:
    conf(project, "budget coder 1000 per hour")
    project.put("coder", NAME, **{"from": "QA"})
    spent(project, "coder", (600, 300, 50_000, 99))
    spent(project, "coder", (5000, 0, 0, 0), ago=3700)  # an hour and more ago: out of the window
    took = project.run("ready_for_next", role="coder")
    assert took.code == 0 and took.out.startswith("TASK: ") and took.err == ""


def test_work_in_process_is_never_taken_away_and_finishing_it_takes_no_more(
    project: Project,
) -> None:
    conf(project, "budget coder 10 per day")
    project.put("coder", NAME, box="inbox/in_process", **{"from": "QA"})
    project.put("coder", NAME.replace("000001", "000002"), **{"from": "QA"})
    spent(project, "coder", (10, 0, 0, 0))
    resumed = project.run("ready_for_next", role="coder")
    assert resumed.code == 0 and resumed.out.startswith("TASK: ") and resumed.err == ""
    done = project.run("done_with_current", role="coder")
    assert done.code == 0 and done.out.startswith("COMPLETED: ") and done.out.endswith("NO_TASK\n")
    assert "BUDGET_SPENT: 10 of 10 tokens in the last day" in done.err


def test_a_role_in_batch_mode_over_its_budget_gets_its_no_work_token(project: Project) -> None:
    conf(project, "window cleaner bot cleaner batch", "budget cleaner 5 per hour")
    project.put("cleaner", NAME.replace("coder", "cleaner"), **{"from": "QA"})
    spent(project, "cleaner", (0, 5, 0, 0))
    took = project.run("ready_for_next", role="cleaner")
    assert (took.code, took.out) == (0, "NO_TASK\n") and took.err.startswith("BUDGET_SPENT: 5 of 5")


def test_the_stop_hook_of_a_role_over_its_budget_tells_of_no_mail(project: Project) -> None:
    conf(project, "budget coder 100 per hour")
    project.put("coder", NAME, **{"from": "QA"})
    spent(project, "coder", (100, 0, 0, 0))
    assert stop(project) == ""
    conf(project, "budget coder 101 per hour")
    assert '"decision": "block"' in stop(project)


def test_status_says_a_role_is_held_and_its_waiting_cards_are(project: Project) -> None:
    conf(project, "budget coder 100 per hour")
    project.put("coder", NAME, **{"from": "QA"})
    spent(project, "coder", (70, 40, 0, 0), card=CARD)
    out = project.run("handoffd", "status", str(project.root), role=None, cwd=project.root).out
    [line] = [row for row in out.splitlines() if row.startswith("coder ")]
    assert line.endswith("budget spent (110/100)")
    [card] = [row for row in out.splitlines() if CARD in row]
    assert card.startswith("ORANGE") and card.endswith("held: budget spent")
    cards = json.loads(project.run("handoffd", "status", "--json", str(project.root), role=None,
                                   cwd=project.root).out)  # fmt: skip
    assert cards[0]["tokens"] == {"input": 70, "output": 40, "cache_read": 0, "cache_write": 0,
                                  "turns": 1}  # fmt: skip
    rows = json.loads(project.run("handoffd", "status", "--roles", "--json", str(project.root),
                                  role=None, cwd=project.root).out)  # fmt: skip
    coder = next(row for row in rows if row["role"] == "coder")
    assert coder["budget"]["spent"] is True and coder["budget"]["used"] == 110
    assert "budget" not in next(row for row in rows if row["role"] == "QA")


def test_a_pools_budget_counts_all_its_members_and_holds_each(tmp_path: Path) -> None:
    proj = make_pool_project(tmp_path / "p", size=2)
    (proj.root / ".swarmforge" / "swarmforge.conf").write_text("budget cleaner 100 per hour\n")
    spent(proj, "cleaner-1", (60, 0, 0, 0))
    spent(proj, "cleaner-2", (0, 30, 5, 0))
    rows = json.loads(proj.run("handoffd", "status", "--roles", "--json", role=None,
                               cwd=proj.root).out)  # fmt: skip
    tokens_of = {row["role"]: row["tokens"]["input"] + row["tokens"]["output"] for row in rows}
    assert (tokens_of["cleaner"], tokens_of["cleaner-1"], tokens_of["cleaner-2"]) == (90, 60, 30)
    assert not any(row.get("budget", {}).get("spent") for row in rows)
    spent(proj, "cleaner-2", (10, 0, 0, 0))
    out = proj.run("handoffd", "status", role=None, cwd=proj.root).out
    held = [line.split()[0] for line in out.splitlines() if "budget spent (100/100)" in line]
    assert held == ["cleaner", "cleaner-1", "cleaner-2"]


def test_budget_lines_are_checked_by_init() -> None:
    swarm = projects.parse_swarm("window coder a master\npool w 2 codex\nbudget w 5 per day\n", "c")
    assert list(swarm.budgets) == ["w"]
    for line, said in [("budget nobody 5 per day", "names no role or pool"),
                       ("budget coder 5 per week", "per hour or per day"),
                       ("budget 'coder' 5 per day", "plain words"),
                       ("budget coder 5 per day\nbudget coder 6 per day", "twice")]:  # fmt: skip
        with pytest.raises(projects.SwarmConfigError, match=said):
            projects.parse_swarm(f"window coder a master\n{line}\n", "c")


# --- the daemon ---------------------------------------------------------------------------


def test_the_daemon_types_no_wake_up_to_a_held_role_and_wakes_it_when_the_window_moves(
    project: Project,
) -> None:
    conf(project, "window cleaner bot cleaner batch", "budget cleaner 100 per hour")
    spent(project, "cleaner", (100, 0, 0, 0), ago=3000)  # leaves the window in 600 s
    queue(project, "coder", ["cleaner"])
    queue(project, "coder", ["QA"])
    daemon = open_daemon(project)
    clock = [time.time()]
    daemon.budgets.clock = lambda: clock[0]
    try:
        daemon.step(1000.0)
        assert daemon.waker.woken() == ["QA"]  # type: ignore[attr-defined]
        [held] = events(project, "budget_held")
        assert (held["role"], held["used"], held["budget"]) == ("cleaner", 100, 100)
        daemon.step(1031.0)  # a rescan: still held, nothing typed
        assert daemon.waker.woken() == ["QA"]  # type: ignore[attr-defined]
        clock[0] += 601  # the spending has left the window
        daemon.step(1062.0)
        assert daemon.waker.woken() == ["QA", "cleaner"]  # type: ignore[attr-defined]
        assert [e["role"] for e in events(project, "budget_resumed")] == ["cleaner"]
    finally:
        daemon.close()


def test_a_project_without_budgets_wakes_as_ever(project: Project) -> None:
    queue(project, "coder", ["cleaner"])
    daemon = open_daemon(project)
    try:
        daemon.step(1000.0)
        assert daemon.waker.woken() == ["cleaner"]  # type: ignore[attr-defined]
        assert events(project, "budget_held") == []
    finally:
        daemon.close()


def test_spent_with_a_pool_and_a_members_own_budget_holds_by_the_longer() -> None:
    a = tokens.Spent(tokens.Budget("a", 1, "hour"), 5, 100.0)
    b = tokens.Spent(tokens.Budget("b", 1, "day"), 5, 200.0)
    assert tokens.most_spent([a, None, b]) is b and tokens.most_spent([None]) is None


def test_what_a_budget_leaves_is_its_tokens_less_what_its_window_used(project: Project) -> None:
    from handoffd.board import spending
    from handoffd.snapshot.snapshot import take_snapshot

    conf(project, "budget coder 1000 per hour")
    spent(project, "coder", (100, 200, 5000, 50))
    spent(project, "coder", (999, 0, 0, 0), ago=4000)
    snap = take_snapshot(str(project.root))
    assert spending.budget_remaining(snap, time.time()) == {"coder": 650}


def test_a_role_without_a_budget_pays_no_import_for_budgets(project: Project) -> None:
    """The conf read is the one look: with no `budget` line, `ready_for_next` imports what
    it imports in a project without a conf (tests/test_imports.py pins that list)."""
    from tests.test_helpers import imported_by
    from tests.test_imports import NO_TASK

    conf(project, "window cleaner bot cleaner batch")
    loaded = {m for m in imported_by(project, "ready_for_next") if m.startswith("handoffd")}
    assert sorted(loaded) == sorted(NO_TASK)
