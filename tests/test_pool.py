"""Pools (docs/protocol.md §17): declared in the swarm configuration, laid out by `init`,
delivered to once, claimed by one rename, never taken twice."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from handoffd.core import config, project
from handoffd.core import handoff as hf
from handoffd.queue.inbox import Inbox
from testbed.files import queued, stamped, write
from testbed.project import Project, make_pool_project

NEW, IN_PROCESS, COMPLETED = "inbox/new", "inbox/in_process", "inbox/completed"


def pool_copy(proj: Project, n: int, pool: str = "cleaner", priority: str = "50") -> Path:
    """A copy the daemon delivered to the pool, laid straight into its `new/`."""
    name, handoff = queued(f"20260101T{n:06d}Z_{n:06d}_from_coder", "coder", [pool],
                           f"task {n}\n", ("type", "note"), ("message", f"m{n}"),
                           priority=priority)  # fmt: skip
    return Path(write(proj.box(pool, NEW) / name, stamped(handoff, pool).render()))


def run_as(proj: Project, member: str, command: str) -> tuple[int, str, str]:
    result = proj.run(command, role=member)
    return result.code, result.out, result.err


def pool_inbox(proj: Project, member: str, pool: str = "cleaner") -> Inbox:
    return Inbox(str(proj.handoffs(member)), member, (pool, str(proj.handoffs(pool))))


# --- declaring a pool, and `init` -------------------------------------------------------


CONF = "window coder shell master task\npool cleaner 3 codex batch --fast\n"


def test_a_pool_line_declares_members_as_roles_and_init_writes_the_pool_row(tmp_path):
    swarm = project.parse_swarm(CONF, "conf")
    root = tmp_path / "p"
    project.init(str(root), swarm.windows, CONF)
    roles = config.load_roles(str(root))
    assert list(roles) == ["coder", "cleaner", "cleaner-1", "cleaner-2", "cleaner-3"]
    pool = roles["cleaner"]
    assert pool.pool == "pool:3" and pool.is_pool and not pool.session
    assert pool.handoffs == str(root / ".swarmforge" / "pools" / "cleaner")
    for k in (1, 2, 3):
        member = roles[f"cleaner-{k}"]
        assert (member.pool, member.mode, member.agent, member.agent_args) == (
            "cleaner",
            "batch",
            "codex",
            "--fast",
        )
        assert member.worktree == str(root / ".worktrees" / f"cleaner-{k}")
        assert member.session == f"swarmforge-cleaner-{k}"
    tsv = (root / ".swarmforge" / "roles.tsv").read_text().splitlines()
    assert tsv[0].startswith(config.FORMAT_POOLS)
    assert [line.split("\t")[9] for line in tsv if line.startswith("cleaner")] == [
        "pool:3", "cleaner", "cleaner", "cleaner"
    ]  # fmt: skip
    own = root / ".swarmforge" / "pools" / "cleaner"
    assert sorted(str(p.relative_to(own)) for p in own.rglob("*")) == ["inbox", "inbox/new"]
    assert roles["coder"].pool == ""


@pytest.mark.parametrize("size", ["1", "0", "33", "three"])
def test_init_refuses_a_pool_size_outside_2_to_32_naming_why(size):
    with pytest.raises(project.SwarmConfigError, match=r"conf:1: pool 'cleaner' has .* 2 to 32"):
        project.parse_swarm(f"pool cleaner {size} shell\n", "conf")


def test_init_refuses_a_pool_split_across_host_sections_naming_why():
    text = "host a\npool cleaner 2 shell\nhost b\npool cleaner 2 shell\n"
    with pytest.raises(project.SwarmConfigError, match=r"conf:4: .*split across host sections"):
        project.parse_swarm(text, "conf")


def test_a_window_named_like_a_pool_or_a_member_is_refused():
    for clash in ("window cleaner shell c", "window cleaner-2 shell c"):
        with pytest.raises(project.SwarmConfigError, match="defined twice"):
            project.parse_swarm(f"pool cleaner 2 shell\n{clash}\n", "conf")


def test_a_harness_line_for_a_pool_names_its_members_harness():
    swarm = project.parse_swarm("pool cleaner 2 claude\nharness cleaner claude\n", "conf")
    assert swarm.harnesses == {"cleaner-1": "claude", "cleaner-2": "claude"}


def test_a_roles_tsv_with_pools_keeps_agent_arguments_to_column_9():
    text = f"{config.FORMAT_POOLS} hosts=\nc-1\tc-1\t/w/c-1\ts\td\ta\ttask\t\t--x y\tc\n"
    text += "c\tmaster\t/w\t\tC\ta\ttask\t\t\tpool:2\n"
    roles = config.parse_roles(text, "roles.tsv")
    assert (roles["c-1"].agent_args, roles["c-1"].pool) == ("--x y", "c")
    assert roles["c"].is_pool and roles["c"].handoffs == "/w/.swarmforge/pools/c"
    with pytest.raises(config.ConfigError, match="column 10"):
        config.parse_roles(text.replace("pool:2", "pool:99"), "roles.tsv")


def test_delivery_to_a_pool_is_one_copy_in_the_pools_new(tmp_path):
    proj = make_pool_project(tmp_path / "p")
    draft = proj.draft(proj.note_draft(to="cleaner"))
    assert proj.run("swarm_handoff", str(draft), role="coder").code == 0
    assert proj.run("handoffd", "run", "--once", role=None, cwd=proj.root).code == 0
    copies = list(proj.box("cleaner", NEW).iterdir())
    assert len(copies) == 1 and hf.read(str(copies[0])).get("recipient") == "cleaner"
    for k in (1, 2, 3):
        assert not list(proj.box(f"cleaner-{k}", NEW).glob("*.handoff"))
    own = proj.handoffs("cleaner")
    copy = copies[0].relative_to(own).as_posix()
    assert sorted(str(p.relative_to(own)) for p in own.rglob("*")) == ["inbox", "inbox/new", copy]


# --- claiming ---------------------------------------------------------------------------


def test_a_member_takes_its_own_mail_before_the_pools(tmp_path):
    proj = make_pool_project(tmp_path / "p")
    pool_copy(proj, 1)
    own = proj.put("cleaner-2", "40_x_to_cleaner-2.handoff", recipient="cleaner-2")
    code, out, _ = run_as(proj, "cleaner-2", "ready_for_next")
    assert code == 0 and f"TASK: {proj.box('cleaner-2', IN_PROCESS) / own.name}" in out
    code, out, _ = run_as(proj, "cleaner-2", "done_with_current")
    assert (
        code == 0 and "claimed_by" not in (proj.box("cleaner-2", COMPLETED) / own.name).read_text()
    )
    assert "TASK:" in out and not list(proj.box("cleaner", NEW).iterdir())


@pytest.mark.parametrize("mode", ["task", "batch"])
def test_a_claim_is_one_rename_into_the_member_stamped_dequeued_at_and_claimed_by(tmp_path, mode):
    proj = make_pool_project(tmp_path / "p", mode=mode)
    first, second = pool_copy(proj, 1), pool_copy(proj, 2)
    code, out, _ = run_as(proj, "cleaner-3", "ready_for_next")
    assert code == 0, out
    taken = list(proj.box("cleaner-3", IN_PROCESS).rglob("*.handoff"))
    want = [first.name] if mode == "task" else [first.name, second.name]
    assert sorted(p.name for p in taken) == want
    for path in taken:
        headers = hf.read(str(path))
        assert headers.get("claimed_by") == "cleaner-3" and headers.get("dequeued_at")
    assert [p.exists() for p in (first, second)] == [False, mode == "task"]


def test_a_lost_race_moves_on_to_the_next_ready_file(tmp_path):
    """Between the listing and the rename another member takes the first file: the claim
    takes the next one, no error, no file lost or held twice."""
    proj = make_pool_project(tmp_path / "p")
    first, second = pool_copy(proj, 1), pool_copy(proj, 2)

    class Raced(Inbox):
        def pooled(self) -> list[str]:
            listed = super().pooled()
            if os.path.exists(first):  # the other member wins the first file's rename
                with pool_inbox(proj, "cleaner-1") as other:
                    Inbox.take_task(other)
            return listed

    with Raced(str(proj.handoffs("cleaner-2")), "cleaner-2",
               ("cleaner", str(proj.handoffs("cleaner")))) as inbox:  # fmt: skip
        item = inbox.take_task()
    assert item is not None and os.path.basename(item.path) == second.name
    assert [p.name for p in proj.box("cleaner-1", IN_PROCESS).iterdir()] == [first.name]


def test_a_lost_race_for_every_file_of_a_batch_takes_the_next_priority(tmp_path):
    proj = make_pool_project(tmp_path / "p", mode="batch")
    first, later = pool_copy(proj, 1, priority="10"), pool_copy(proj, 2, priority="20")

    class Raced(Inbox):
        def pooled(self) -> list[str]:
            listed = super().pooled()
            if os.path.exists(first):
                proj.box("cleaner-1", IN_PROCESS).mkdir(parents=True, exist_ok=True)
                os.rename(first, proj.box("cleaner-1", IN_PROCESS) / first.name)
            return listed

    with Raced(str(proj.handoffs("cleaner-2")), "cleaner-2",
               ("cleaner", str(proj.handoffs("cleaner")))) as inbox:  # fmt: skip
        taken = inbox.take_batch()
    assert taken is not None and [os.path.basename(i.path) for i in taken[1]] == [later.name]
    batches = list(proj.box("cleaner-2", IN_PROCESS).iterdir())
    assert batches == [Path(taken[0])]  # the batch dir the lost race emptied is gone


WORKER = """
import sys
from handoffd.ops import queue
from handoffd.ops.context import resolve_context
context = resolve_context()
batch = context.me.mode == "batch"
take = queue.take_batch if batch else queue.take_task
finish = queue.finish_batch if batch else queue.finish_task
sys.stdin.readline()  # every member starts at once
result = take(context)
while "NO_TASK" not in result.out:
    assert result.ok, (result.out, result.err)
    result = finish(context)
    assert result.code in (0, 1), (result.out, result.err)
"""


@pytest.mark.parametrize("mode", ["task", "batch"])
def test_three_members_racing_complete_each_file_exactly_once(tmp_path, mode):
    """3 members, take/finish loops over 300 files: each completed once, by one member,
    the one its `claimed_by` names; nothing left in the pool or in process."""
    proj = make_pool_project(tmp_path / "p", mode=mode)
    names = {pool_copy(proj, n, priority=f"{n % 3:02d}").name for n in range(300)}
    members = [f"cleaner-{k}" for k in (1, 2, 3)]
    workers = [
        subprocess.Popen([sys.executable, "-c", WORKER], cwd=proj.worktrees[m], text=True,
                         stdin=subprocess.PIPE, env={**os.environ, "SWARMFORGE_ROLE": m})
        for m in members
    ]  # fmt: skip
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    assert [worker.wait(timeout=300) for worker in workers] == [0, 0, 0]
    done: dict[str, list[str]] = {}
    for member in members:
        for path in proj.box(member, COMPLETED).rglob("*.handoff"):
            done.setdefault(path.name, []).append(member)
            assert hf.read(str(path)).get("claimed_by") == member
        assert not list(proj.box(member, IN_PROCESS).rglob("*.handoff"))
    assert set(done) == names and all(len(who) == 1 for who in done.values())
    assert not list(proj.box("cleaner", NEW).iterdir())
    assert len({who[0] for who in done.values()}) > 1  # the members really shared the work
