"""`send_handoff` with an idempotency key (docs/protocol.md §12): a retry of a call whose
reply was lost returns the first call's path and queues nothing; the same key with other
arguments is a conflict; records expire after a day; hostile records are never trusted;
and a server killed (SIGKILL) at any step of the first call leaves a state in which the
retry finds that handoff or queues exactly one.

Calls go through the MCP SDK's own client to a real `handoffd mcp` server; the kills are
injected with strace, as in test_release_crash.py."""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import StdioServerParameters

from handoffd.adapters import mcp as server
from handoffd.ops import idempotency
from tests import shards
from tests.conftest import BIN, Project, helper_env, make_project
from tests.fault_support import strace_problem
from tests.mcp_support import Agent, agent, connect, text, texts

NOTE = {"type": "note", "to": "QA", "priority": "50", "message": "hello"}
QUEUED = re.compile(r"^HANDOFF QUEUED: (\S+)$", re.M)
CALL_S = 20.0  # seconds a call may take before the test fails (a hung server)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "server.log"


@pytest.fixture
def coder(project: Project, log: Path) -> Iterator[Agent]:
    with agent(project, "coder", log) as session:
        yield session


def send(session: Agent, **args: Any) -> types.CallToolResult:
    return session.call_within(CALL_S, "send_handoff", **args)


def queued_path(result: types.CallToolResult) -> str:
    assert not result.is_error, text(result)
    found = QUEUED.search(text(result))
    assert found, text(result)
    return found.group(1)


def outbox(project: Project, role: str = "coder") -> list[str]:
    box = project.box(role, "outbox")
    return sorted(p.name for p in box.iterdir() if p.suffix == ".handoff") if box.exists() else []


def record_of(project: Project, key: str, role: str = "coder") -> Path:
    return project.handoffs(role) / idempotency.FOLDER / idempotency.record_name(key)


# --- records: the pure part -----------------------------------------------------------

NAME = "50_20260101T000000Z_000001_from_coder_to_QA.handoff"


def test_a_record_reads_back_as_written() -> None:
    record = idempotency.Record("d" * 64, NAME, "id: x\n\nbody ✓\n".encode())
    back = idempotency.parse(idempotency.render(record), "coder")
    assert back is not None
    assert (back.digest, back.name, back.data) == (record.digest, record.name, record.data)


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"[]",
        json.dumps({"digest": "d", "name": NAME}).encode(),  # no data
        json.dumps({"digest": 1, "name": NAME, "data": ""}).encode(),
        json.dumps({"digest": "d", "name": NAME.replace("coder", "QA", 1), "data": ""}).encode(),
        json.dumps({"digest": "d", "name": "../" + NAME, "data": ""}).encode(),
        json.dumps({"digest": "d", "name": "." + NAME, "data": ""}).encode(),
        json.dumps({"digest": "d", "name": NAME[:-8] + ".2.handoff", "data": ""}).encode(),
        json.dumps({"digest": "d", "name": NAME[:6] + "\x1b" + NAME[7:], "data": ""}).encode(),
        json.dumps({"digest": "d", "name": "notes.txt", "data": ""}).encode(),
        json.dumps({"digest": "d", "name": NAME, "data": "x" * (64 * 1024 + 1)}).encode(),
        b"[" * 60000,  # past the parser's depth: RecursionError, not ValueError
    ],
    ids=[
        "garbled",
        "not-an-object",
        "no-data",
        "digest-not-text",
        "another-sender",
        "a-path",
        "hidden",
        "archived-name",
        "control-character",
        "not-a-queue-name",
        "too-large",
        "nested-too-deep",
    ],
)
def test_anything_but_a_whole_record_of_the_senders_is_no_record(raw: bytes) -> None:
    assert idempotency.parse(raw, "coder") is None


def test_a_key_names_its_record_safely_whatever_it_holds() -> None:
    for key in ("k", "../../etc/passwd", "a/b", "\x00", "é" * 200):
        name = idempotency.record_name(key)
        assert re.fullmatch(r"[0-9a-f]{64}", name), key


# --- retries through the SDK's client ---------------------------------------------------


def test_a_retry_with_the_same_key_and_arguments_returns_the_first_path_and_queues_nothing(
    project: Project, coder: Agent
) -> None:
    first = send(coder, **NOTE, idempotency_key="k1")
    # The same draft, spelled as a client may spell it again: a list, a number.
    again = send(coder, **{**NOTE, "to": ["QA"], "priority": 50}, idempotency_key="k1")

    assert queued_path(again) == queued_path(first)
    assert texts(again) == texts(first)
    assert outbox(project) == [os.path.basename(queued_path(first))]


def test_the_same_key_with_other_arguments_is_a_conflict_and_queues_nothing(
    project: Project, coder: Agent
) -> None:
    queued_path(send(coder, **NOTE, idempotency_key="k1"))

    conflict = send(coder, **{**NOTE, "message": "something else"}, idempotency_key="k1")

    assert conflict.is_error and conflict.meta is not None
    assert (conflict.meta["exit_code"], texts(conflict)[-1]) == (2, "IDEMPOTENCY_CONFLICT: k1\n")
    assert len(outbox(project)) == 1


def test_without_a_key_or_with_another_key_every_call_queues(
    project: Project, coder: Agent
) -> None:
    paths = {queued_path(send(coder, **NOTE)), queued_path(send(coder, **NOTE))}
    paths |= {queued_path(send(coder, **NOTE, idempotency_key=k)) for k in ("a", "b")}
    assert len(paths) == 4 and len(outbox(project)) == 4


def test_a_refused_draft_records_nothing_so_the_key_still_sends_the_fixed_draft(
    project: Project, coder: Agent
) -> None:
    refused = send(coder, **{**NOTE, "to": "nobody"}, idempotency_key="k1")
    assert refused.is_error and "Unknown recipient role 'nobody'." in text(refused)
    assert not record_of(project, "k1").exists()

    assert outbox(project) == []
    queued_path(send(coder, **NOTE, idempotency_key="k1"))
    assert len(outbox(project)) == 1


@pytest.mark.parametrize("key", ["", "k" * 201])
def test_a_key_of_no_or_more_than_200_characters_is_refused_before_anything_is_queued(
    project: Project, coder: Agent, key: str
) -> None:
    result = send(coder, **NOTE, idempotency_key=key)
    assert result.is_error and text(result).startswith("INVALID_ARGUMENTS: idempotency_key")
    assert outbox(project) == []


def test_a_retry_after_the_handoff_was_delivered_and_completed_still_finds_it(
    project: Project, coder: Agent
) -> None:
    first = queued_path(send(coder, **NOTE, idempotency_key="k1"))
    assert project.run("handoffd", "run", "--once", role=None, cwd=project.root).code == 0
    assert project.run("ready_for_next", role="QA").code == 0
    assert project.run("done_with_current", role="QA").code == 0

    assert queued_path(send(coder, **NOTE, idempotency_key="k1")) == first
    assert outbox(project) == []
    completed = [p.name for p in project.box("QA", "inbox/completed").iterdir()]
    assert completed == [os.path.basename(first)]
    assert list(project.box("QA", "inbox/new").iterdir()) == []


def test_keys_belong_to_the_role_that_sent(project: Project, coder: Agent, log: Path) -> None:
    queued_path(send(coder, **NOTE, idempotency_key="k1"))
    with agent(project, "cleaner", log) as cleaner:
        queued_path(send(cleaner, **NOTE, idempotency_key="k1"))
    assert len(outbox(project)) == len(outbox(project, "cleaner")) == 1


def test_a_record_answers_for_a_day_and_then_the_key_is_free_again(
    project: Project, coder: Agent
) -> None:
    first = queued_path(send(coder, **NOTE, idempotency_key="k1"))
    record = record_of(project, "k1")
    aged = time.time() - 23 * 3600
    os.utime(record, (aged, aged))
    assert queued_path(send(coder, **NOTE, idempotency_key="k1")) == first

    expired = time.time() - idempotency.TTL - 60
    os.utime(record, (expired, expired))
    second = queued_path(send(coder, **NOTE, idempotency_key="k1"))

    assert second != first and len(outbox(project)) == 2
    assert record.stat().st_mtime > expired + 60  # the key's record is the new one


# --- hostile records (docs/protocol.md Part II) ------------------------------------------


def test_a_record_that_is_a_symlink_is_never_followed_nor_written_through(
    project: Project, coder: Agent, tmp_path: Path
) -> None:
    planted = tmp_path / "elsewhere.json"
    fake = idempotency.Record(
        idempotency.digest("type: note\n"), NAME, b"id: planted\n\nplanted\n"
    )  # fmt: skip
    planted.write_bytes(idempotency.render(fake))
    record = record_of(project, "k1")
    record.parent.mkdir(parents=True)
    record.symlink_to(planted)

    path = queued_path(send(coder, **NOTE, idempotency_key="k1"))

    assert os.path.basename(path) != NAME and outbox(project) == [os.path.basename(path)]
    assert planted.read_bytes() == idempotency.render(fake)
    assert record.is_file() and not record.is_symlink()


def test_a_record_that_is_a_fifo_never_blocks_the_call(project: Project, coder: Agent) -> None:
    record = record_of(project, "k1")
    record.parent.mkdir(parents=True)
    os.mkfifo(record)

    queued_path(send(coder, **NOTE, idempotency_key="k1"))  # within CALL_S

    assert record.is_file() and len(outbox(project)) == 1


def test_a_records_folder_that_is_a_symlink_is_replaced_and_nothing_is_written_through_it(
    project: Project, coder: Agent, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = project.handoffs("coder") / idempotency.FOLDER
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.symlink_to(outside, target_is_directory=True)

    queued_path(send(coder, **NOTE, idempotency_key="k1"))

    assert list(outside.iterdir()) == []
    assert folder.is_dir() and not folder.is_symlink()
    assert record_of(project, "k1").is_file()


def test_an_outbox_behind_a_link_is_a_tool_error_on_a_first_call_and_on_a_retry(
    project: Project, coder: Agent, tmp_path: Path
) -> None:
    """A retry re-publishes a recorded handoff that is nowhere: never through a link
    (docs/protocol.md Part II); the call is refused, in one line, and a later retry with a
    real outbox still sends it once."""
    first = queued_path(send(coder, **NOTE, idempotency_key="k1"))
    os.unlink(first)  # as if the first call died between its record and its file
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = project.box("coder", "outbox")
    folder.rename(tmp_path / "kept")
    folder.symlink_to(outside, target_is_directory=True)
    for key in ("k1", "k2"):
        refused = send(coder, **NOTE, idempotency_key=key)
        assert refused.is_error and text(refused).startswith(f"LINKED_FOLDER: {folder} is a ")
    assert list(outside.iterdir()) == []
    folder.unlink()
    (tmp_path / "kept").rename(folder)
    assert queued_path(send(coder, **NOTE, idempotency_key="k1")) == first
    assert outbox(project) == [os.path.basename(first)]


# --- concurrent retries and kills ----------------------------------------------------------


def test_a_retry_racing_its_first_call_on_another_server_queues_one_handoff(
    project: Project, log: Path
) -> None:
    with agent(project, "coder", log) as one, agent(project, "coder", log) as two:
        results: dict[str, types.CallToolResult] = {}
        start = threading.Barrier(2)

        def call(name: str, session: Agent) -> None:
            start.wait(timeout=CALL_S)
            results[name] = send(session, **NOTE, idempotency_key="k1")

        threads = [threading.Thread(target=call, args=item) for item in (("1", one), ("2", two))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=2 * CALL_S)
    assert queued_path(results["1"]) == queued_path(results["2"])
    assert len(outbox(project)) == 1


# Calls that change what is on disk; the server's other threads (its stdin and stdout
# workers) make none of them, and strace counts injections per thread.
MUTATING = ("mkdir", "openat", "fsync", "rename", "renameat", "renameat2", "link", "linkat",
            "unlink", "unlinkat")  # fmt: skip
LINE = re.compile(r"^(\d+)\s+(\w+)\((.*)\) += (-?\d+)")


def traced_server(project: Project, *strace: str) -> StdioServerParameters:
    """`handoffd mcp` for the coder role, started under strace with `strace` options."""
    command = [str(Path(BIN) / "handoffd"), "mcp"]
    return StdioServerParameters(
        command="strace", args=["-f", "-qq", *strace, *command], env=helper_env("coder"),
        cwd=str(project.worktrees["coder"]),
    )  # fmt: skip


def kill_points(project: Project, log: Path, trace: Path) -> list[tuple[str, int]]:
    """(syscall, n): the n-th call of that syscall by the server's main thread, for every
    call after its records folder is first touched that changes something on disk."""
    with connect(traced_server(project, "-o", str(trace), "-e", f"trace={','.join(MUTATING)}"),
                 log) as session:  # fmt: skip
        queued_path(send(session, **NOTE, idempotency_key="k1"))
    calls = [m.groups() for m in map(LINE.match, trace.read_text().splitlines()) if m]
    main = next(pid for pid, _, args, _ in calls if f"/{idempotency.FOLDER}" in args)
    assert all(pid == main for pid, *_ in calls[-30:]), "another thread changes files"
    seen: dict[str, int] = {}
    points, started = [], False
    for pid, call, args, result in calls:
        if pid != main:
            continue
        seen[call] = seen.get(call, 0) + 1
        started = started or f"/{idempotency.FOLDER}" in args
        changes = result != "-1" and (call != "openat" or "O_CREAT" in args)
        if started and changes:
            points.append((call, seen[call]))
    return points


def traced_send(folder: Path) -> list[tuple[str, int]]:
    """The kill points of a keyed send traced on a project laid out in `folder`."""
    (folder / "probe").mkdir()
    return kill_points(make_project(folder / "probe"), folder / "server.log", folder / "trace")


@pytest.mark.slow  # a crash-point or fault run: tens of seconds
@shards.parametrize()
def test_sigkill_at_every_step_of_a_keyed_send_leaves_exactly_one_handoff_after_the_retry(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    log: Path,
    monkeypatch: pytest.MonkeyPatch,
    shard: tuple[int, int],
) -> None:
    """The send is traced once per session; each shard kills at its share of its points
    (tests/shards.py)."""
    problem = strace_problem()
    if problem:
        pytest.skip(problem)
    points = shards.shared(tmp_path_factory, "keyed-send", traced_send)
    assert [call for call, _ in points].count("link") == 1, points  # the handoff's own step
    assert len(points) > 10, points
    monkeypatch.setenv("SWARMFORGE_ROLE", "coder")  # the retry runs the server's call here
    failures = []
    for index, (call, n) in shards.share(points, shard):
        base = tmp_path / f"p{index}"
        base.mkdir()
        project = make_project(base)
        kill = f"inject={call}:signal=KILL:when={n}"
        params = traced_server(project, "-o", os.devnull, "-e", f"trace={call}",
                               "-e", kill)  # fmt: skip
        with connect(params, log) as session, contextlib.suppress(Exception):
            send(session, **NOTE, idempotency_key="k1")  # the server dies mid-call
        if len(outbox(project)) > 1:
            failures.append(f"{call} #{n}: {outbox(project)} after the kill")
            continue
        retries = [server.call(str(project.root), "send_handoff", {**NOTE, "idempotency_key": "k1"})
                   for _ in range(2)]  # fmt: skip
        paths = {queued_path(result) for result in retries}
        if len(paths) != 1 or outbox(project) != [os.path.basename(paths.pop())]:
            failures.append(f"{call} #{n}: retries {[text(r) for r in retries]}, "
                            f"outbox {outbox(project)}")  # fmt: skip
    assert failures == [], failures
