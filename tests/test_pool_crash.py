"""Pools under crashes (docs/protocol.md §17): a power cut anywhere in a claim and in a
reclaim, and kill -9 of members racing, leave every copy in exactly one place, and every
state is one the helpers finish whole.

The recorded run (tests/crashtrace.py, explored by tests/crashstates.py): cleaner-1
claims the first of two copies from the pool; the daemon's reclaim gives it back
(`Keeper.give_back`, as its pass does), then cleaner-2 claims it again.  Each state is
recovered as people would: each member takes and finishes until nothing is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from handoffd.core import handoff as hf
from testbed.project import make_pool_project
from tests import crashstates, crashtrace
from tests.crashtrace import Op, Recording, Step, Tree
from tests.fault_support import strace_problem
from tests.test_pool import COMPLETED, IN_PROCESS, NEW, WORKER, pool_copy

MEMBERS = ("cleaner-1", "cleaner-2", "cleaner-3")
POOL_NEW = ".swarmforge/pools/cleaner/" + NEW
RECLAIM = """
import sys, time
from handoffd.core import config
from handoffd.daemon.reclaim import Keeper
class Log:
    def info(self, *a, **k): pass
    warning = info
roles = config.load_roles(sys.argv[1])
got = Keeper(sys.argv[1], Log()).give_back(roles["cleaner-1"], roles["cleaner"], "session gone",
                                          time.time())
print("GIVEN BACK: " + ",".join(got), flush=True)
"""


def env(role: str | None = None) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SWARMFORGE_")}
    base["PATH"] = os.path.dirname(sys.executable) + os.pathsep + base.get("PATH", "")
    return {**base, "SWARMFORGE_ROLE": role} if role else base


def helper(name: str) -> list[str]:
    return [os.path.join(os.path.dirname(sys.executable), name)]


def places(tree: Tree, name: str) -> list[str]:
    """Every visible place a copy called `name` stands in a state."""
    return [rel for rel, data in tree.items() if data is not None and rel.endswith("/" + name)]


def ignored(rel: str) -> bool:
    name = os.path.basename(rel).lstrip(".")
    return name.startswith(("heartbeat", "HANDOFF.md", "handoffd.log"))


@pytest.fixture(scope="module")
def reclaiming(tmp_path_factory: pytest.TempPathFactory) -> tuple[Recording, list[str]]:
    problem = strace_problem()
    if problem:
        pytest.skip(problem)
    base = tmp_path_factory.mktemp("pool").resolve() / "r0000000"
    proj = make_pool_project(base)
    names = [pool_copy(proj, 1).name, pool_copy(proj, 2).name]
    for member in MEMBERS:
        for box in (NEW, IN_PROCESS, COMPLETED):
            proj.box(member, box).mkdir(parents=True)
    traces = base.parent / "traces"
    traces.mkdir()
    steps = [
        Step("claim", helper("ready_for_next"), str(base / "cleaner-1"), env("cleaner-1")),
        Step("reclaim", [sys.executable, "-c", RECLAIM, str(base)], str(base), env()),
        Step("claim again", helper("ready_for_next"), str(base / "cleaner-2"), env("cleaner-2")),
    ]
    return crashtrace.record(steps, str(base), str(traces), ignored), names


def check_for(names: list[str]) -> crashstates.Check:
    def check(tree: Tree, heard: list[Op]) -> list[str]:
        problems = []
        for name in names:
            found = [rel for rel in places(tree, name) if "/inbox/" in rel]
            if len(found) != 1:
                problems.append(f"{name} stands in {len(found)} places: {found}")
        said = b"".join(op.data for op in heard if op.kind == "said")
        began = [op.what for op in heard if op.kind == "began"]
        first = places(tree, names[0])
        if b"GIVEN BACK" in said and began[-1] == "reclaim":
            back = [rel for rel in first if rel.startswith(POOL_NEW)]
            if not back or b"reclaimed_from: cleaner-1" not in (tree[back[0]] or b""):
                problems.append(f"given back, yet {names[0]} is at {first}")
        elif (
            b"TASK: " in said
            and began[-1] == "claim"
            and not any("cleaner-1/" in rel and IN_PROCESS in rel for rel in first)
        ):
            problems.append(f"claimed, yet {names[0]} is at {first}")
        return problems

    return check


class EachMemberDrains(crashstates.Recovery):
    """Each member takes and finishes until nothing is left; every copy completed once."""

    name = "each member drains"

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def __call__(self, base: str, moved: crashstates.Moved, told: object = None) -> list[str]:
        problems = []
        for member in MEMBERS:
            cwd = os.path.join(base, member)
            ran = crashstates.run(helper("ready_for_next"), cwd, env(member))
            problems += ran.problems(f"{member} ready_for_next", (0,))
            for _ in range(4):
                ran = crashstates.run(helper("done_with_current"), cwd, env(member))
                if "NO_TASK" in ran.out or ran.code != 0:
                    break
        for name in self.names:
            done = [p for p in Path(base).rglob(name) if COMPLETED in p.as_posix()]
            if len(done) != 1:
                problems.append(f"{name} completed {len(done)} times after recovery")
        return problems


def test_the_reclaim_run_does_what_its_audit_relies_on(reclaiming) -> None:
    recorded, names = reclaiming
    out = [o.decode() for o in recorded.outputs]
    assert out[0].startswith("TASK: ") and "cleaner-1" in out[0].splitlines()[0]
    assert out[1].startswith("GIVEN BACK: ") and hf.name_id(names[0]) in out[1]
    assert out[2].startswith("TASK: ") and "cleaner-2" in out[2].splitlines()[0]


@pytest.mark.slow
def test_a_power_cut_anywhere_in_a_claim_and_a_reclaim_loses_and_doubles_nothing(
    reclaiming,
) -> None:
    recorded, names = reclaiming
    result = crashstates.explore(recorded, check_for(names), [EachMemberDrains(names)])
    print(f"pool power-loss states: {result.checked} checked, {result.distinct} distinct")
    assert result.distinct > 10 and not result.findings, result.report()


@pytest.mark.parametrize("mode", ["task", "batch"])
def test_members_killed_at_random_instants_lose_and_double_nothing(tmp_path, mode) -> None:
    """Three members race over 60 copies; each is killed -9 once at a random instant and
    started again; then every copy is completed exactly once."""
    proj = make_pool_project(tmp_path / "p", mode=mode)
    names = {pool_copy(proj, n, priority=f"{n % 2:02d}").name for n in range(60)}

    def start(member: str) -> subprocess.Popen[str]:
        worker = subprocess.Popen([sys.executable, "-c", WORKER], cwd=proj.worktrees[member],
                                  text=True, stdin=subprocess.PIPE, env=env(member))  # fmt: skip
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
        return worker

    workers = {member: start(member) for member in MEMBERS}
    rng = __import__("random").Random(17)
    for member in MEMBERS:
        time.sleep(rng.uniform(0.05, 0.4))  # a random instant, not a synchronisation
        workers[member].send_signal(signal.SIGKILL)
        workers[member].wait()
        workers[member] = start(member)
    assert [w.wait(timeout=300) for w in workers.values()] == [0, 0, 0]
    for member in MEMBERS:  # a member killed after its last take holds one: it finishes it
        finish = start(member)
        assert finish.wait(timeout=60) == 0
    done: dict[str, int] = {}
    for member in MEMBERS:
        for path in proj.box(member, COMPLETED).rglob("*.handoff"):
            done[path.name] = done.get(path.name, 0) + 1
    assert set(done) == names and set(done.values()) == {1}
    assert not list(proj.box("cleaner", NEW).iterdir())


@pytest.mark.parametrize("delay", [0.0, 0.15, 0.3, 0.6])
def test_the_daemon_killed_mid_reclaim_loses_and_doubles_nothing(tmp_path, delay) -> None:
    """cleaner-2 holds a batch of 30 pool copies and its heartbeat expired; the daemon is
    killed -9 at an instant of its reclaim, then run again: every copy is in one place,
    back in the pool, and another member completes each exactly once."""
    from tests.daemon_support import spawn
    from tests.test_reclaim import age_heartbeat

    proj = make_pool_project(tmp_path / "p", mode="batch")
    names = {pool_copy(proj, n).name for n in range(30)}
    ran = subprocess.run([helper("ready_for_next")[0]], cwd=proj.worktrees["cleaner-2"],
                         env=env("cleaner-2"), capture_output=True, check=False)  # fmt: skip
    assert ran.returncode == 0
    age_heartbeat(proj, "cleaner-2", 600)
    daemon = spawn(proj, "--reclaim-after", "60")
    time.sleep(delay)  # a chosen instant of the reclaim, not a synchronisation
    daemon.send_signal(signal.SIGKILL)
    daemon.communicate(timeout=30)
    for name in names:
        held = list(proj.root.rglob(name))
        assert len(held) == 1, (name, held)  # never two copies, never none
    again = subprocess.run([os.path.join(os.path.dirname(sys.executable), "handoffd"), "run",
                            "--once", "--reclaim-after", "60", str(proj.root)],
                           capture_output=True, check=False, timeout=60)  # fmt: skip
    assert again.returncode == 0
    assert {p.name for p in proj.box("cleaner", NEW).iterdir()} == names
    cleaner3 = proj.worktrees["cleaner-3"]
    out = subprocess.run([helper("ready_for_next")[0]], cwd=cleaner3, env=env("cleaner-3"),
                         capture_output=True, text=True, check=False).stdout  # fmt: skip
    assert "COUNT: 30" in out
    subprocess.run([helper("done_with_current")[0]], cwd=cleaner3, env=env("cleaner-3"),
                   capture_output=True, check=True)  # fmt: skip
    done = [p.name for p in proj.box("cleaner-3", COMPLETED).rglob("*.handoff")]
    assert sorted(done) == sorted(names)
