"""Properties over generated inputs (docs/protocol.md §3, §4).

(a) Any draft is either queued exactly once (exit 0, one new file in outbox/, the draft
    deleted) or refused (exit 2, nothing queued, the draft kept as it was).
(b) Whatever the interleaving of deliveries, takes, finishes and takes or finishes cut
    short by a crash, the next `ready_for_next` of every role is never refused.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from handoffd.adapters.sources import read_draft
from handoffd.core import git
from handoffd.core import handoff as hf
from handoffd.core.config import Box, Role
from handoffd.core.outcome import Refusal
from handoffd.daemon.audit import audit
from handoffd.delivery.delivery import Courier
from handoffd.ops.context import Context
from handoffd.ops.queue import send
from handoffd.queue import draft
from handoffd.queue.inbox import Inbox
from tests.conftest import Project
from tests.fault_support import RecordingLog, hidden_temps, queue_note, roles_of

ROLES = ("coder", "cleaner", "QA")
FIXTURE_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]

# --- (a) drafts ------------------------------------------------------------------------

value = st.text(
    st.characters(blacklist_categories=("Cs", "Cc")), min_size=0, max_size=90
)  # one header value: any printable text, sometimes empty, sometimes over 80 characters
recipient = st.sampled_from([*ROLES, "nobody", "bad_name", "", " QA "])


def header_lines(commit: str) -> st.SearchStrategy[str]:
    """One draft line: mostly well-formed headers with good or bad values, sometimes a
    reserved or unknown header, a line without `: `, or an empty value."""
    recipients = st.lists(recipient, min_size=1, max_size=4).map(",".join)
    commits = st.sampled_from([commit, commit.upper(), commit[:9], "0123456789", "zzzzzzzzzz"])
    return st.one_of(
        st.builds("type: {}".format, st.sampled_from(["note", "git_handoff", "bug", "Note"])),
        st.builds("to: {}".format, recipients),
        st.builds("priority: {}".format, st.sampled_from(["00", "50", "99", "5", "100", "x1"])),
        st.builds("task: {}".format, value),
        st.builds("message: {}".format, value),
        st.builds("commit: {}".format, commits),
        st.builds("{}: x".format, st.sampled_from(["id", "from", "recipient", "enqueued_at"])),
        st.sampled_from(["colour: red", "no separator", "to:coder", "message: ", ": x"]),
    )


def valid_lines(commit: str) -> st.SearchStrategy[list[str]]:
    """The headers of a correct note or git_handoff, in any order."""
    recipients = st.lists(st.sampled_from(ROLES), min_size=1, max_size=3, unique=True)
    short = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=80)
    note = st.builds(
        lambda to, p, m: ["type: note", f"to: {','.join(to)}", f"priority: {p}", f"message: {m}"],
        recipients, st.sampled_from(["00", "50", "70"]), short,
    )  # fmt: skip
    handoff = st.builds(
        lambda to, t: ["type: git_handoff", f"to: {','.join(to)}", "priority: 50",
                       f"task: {t}", f"commit: {commit}"],
        recipients, short,
    )  # fmt: skip
    return st.one_of(note, handoff).flatmap(st.permutations)


def drafts(commit: str) -> st.SearchStrategy[str]:
    """Draft texts: a correct draft, a correct one with one line changed or added, or
    lines drawn at random; then maybe a body, CRLF endings, a final newline or not."""
    correct = valid_lines(commit)
    edited = st.tuples(correct, header_lines(commit), st.integers(0, 5), st.booleans()).map(
        lambda t: [*t[0][: t[2]], t[1], *t[0][t[2] + (1 if t[3] else 0) :]]
    )
    anything = st.lists(header_lines(commit), max_size=7)
    lines = st.one_of(correct, edited, anything)
    body = st.sampled_from([[], [""], ["", "some body"], ["", "", "late: header"]])
    return st.builds(
        lambda head, tail, eol, final: eol.join(head + tail) + (eol if final else ""),
        lines, body, st.sampled_from(["\n", "\n", "\r\n"]), st.booleans(),
    )  # fmt: skip


def outbox_state(project: Project, role: str) -> tuple[set[str], bytes]:
    """The files in `role`'s outbox (temp folder included) and its sequence file."""
    handoffs = project.handoffs(role)
    names = {p.name for p in (handoffs / "outbox").rglob("*") if p.is_file()}
    sequence = handoffs / "sequence"
    return names, sequence.read_bytes() if sequence.exists() else b""


def assert_queued_or_refused(
    project: Project, role: str, text: str, code: int, before: tuple[set[str], bytes]
) -> str:
    """The two allowed outcomes of one `swarm_handoff` call, checked on disk."""
    draft_path = project.root / "draft.txt"
    names, sequence = outbox_state(project, role)
    if code == 0:
        new = names - before[0]
        assert len(new) == 1 and before[0] <= names, f"queued {new!r} for {text!r}"
        queued = hf.read(str(project.box(role, "outbox") / new.pop()))
        assert queued.get("from") == role and queued.get("id")
        assert not draft_path.exists(), "the draft of a queued handoff was kept"
        return "queued"
    assert code == 2, f"exit {code} for {text!r}"
    assert (names, sequence) == before, f"something was queued for a refused {text!r}"
    assert draft_path.read_bytes() == text.encode(), "a refused draft was changed or deleted"
    return "refused"


def test_any_draft_is_queued_exactly_once_or_refused_with_nothing_queued(
    project: Project,
) -> None:
    """In-process (the command's own `queue` operation, real git), over 150 generated drafts."""
    roles = roles_of(project.root)
    caller = Context(str(project.root), roles, roles["coder"])
    outcomes: Counter[str] = Counter()

    @settings(max_examples=150, deadline=None, suppress_health_check=FIXTURE_OK)
    @given(drafts(project.commit()))
    def check(text: str) -> None:
        before = outbox_state(project, "coder")
        path = project.draft(text)
        path.write_bytes(text.encode())
        outcome = send(caller, read_draft(str(path)), str(path), path.unlink)
        if outcome.code:
            assert outcome.stderr.startswith(f"HANDOFF INVALID: {path}\n\nErrors:\n- ")
        else:
            assert outcome.stdout.startswith("HANDOFF QUEUED: ")
        code = outcome.code
        outcomes[assert_queued_or_refused(project, "coder", text, code, before)] += 1

    check()
    assert outcomes["queued"] >= 10 and outcomes["refused"] >= 10, outcomes


def test_the_real_swarm_handoff_command_queues_exactly_when_the_draft_checks(
    project: Project,
) -> None:
    """A handful through the installed command: exit 0 and one queued file exactly when
    the draft passes the checks, exit 2 with nothing queued otherwise."""
    roles = roles_of(project.root)
    sender = roles["cleaner"]

    def resolve(c: str) -> tuple[str | None, str | None]:
        return git.resolve_commit(sender.worktree, c)

    @settings(max_examples=12, deadline=None, suppress_health_check=FIXTURE_OK)
    @given(drafts(project.commit("cleaner")))
    def check(text: str) -> None:
        before = outbox_state(project, "cleaner")
        path = project.draft(text)
        path.write_bytes(text.encode())
        valid = not isinstance(draft.check(text, set(roles), resolve), list)
        result = project.run("swarm_handoff", str(path), role="cleaner")
        assert (result.code == 0) == valid, (text, result.code, result.err)
        assert_queued_or_refused(project, "cleaner", text, result.code, before)

    check()


# --- (b) taking and finishing, interleaved with deliveries --------------------------------

operation = st.one_of(
    st.tuples(
        st.just("queue"),
        st.sampled_from(ROLES),
        st.lists(st.sampled_from(ROLES), min_size=1, max_size=3, unique=True),
        st.sampled_from(["10", "50", "50"]),
    ),
    st.tuples(st.just("deliver")),
    st.tuples(
        st.sampled_from(["take", "take", "finish", "finish", "take cut short", "finish cut short"]),
        st.sampled_from(ROLES),
        st.integers(0, 3),
    ),
)


class Scenario:
    """Three roles (coder and QA in task mode, cleaner in batch mode), an in-process
    courier, and the steps of the inbox state machine, whole or cut short by a crash."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.roles = roles_of(project.root)
        os.makedirs(project.root / ".swarmforge" / "daemon", exist_ok=True)
        self.courier = Courier(str(project.root), RecordingLog())  # type: ignore[arg-type]
        self.now = 0.0

    def reset(self) -> None:
        for role in self.roles.values():
            shutil.rmtree(role.handoffs, ignore_errors=True)
        self.courier.retries.clear()

    def inbox(self, name: str) -> Inbox:
        return Inbox(self.roles[name].handoffs)

    def apply(self, op: tuple[Any, ...]) -> None:
        kind = op[0]
        if kind == "queue":
            queue_note(self.roles, op[1], op[2], op[3], now=1_800_000_000 + self.now)
        elif kind == "deliver":
            self.now += 1
            self.courier.deliver(self.roles, self.now)
        else:
            getattr(self, "_" + kind.replace(" ", "_"))(self.roles[op[1]], op[2])

    def _take(self, role: Role, _: int) -> None:
        inbox = self.inbox(role.name)
        inbox.take_batch() if role.mode == "batch" else inbox.take_task()

    def _finish(self, role: Role, _: int) -> None:
        inbox = self.inbox(role.name)
        try:
            inbox.finish_batch() if role.mode == "batch" else inbox.finish_task()
        except Refusal as refusal:
            assert refusal.code == 1, refusal.render()  # nothing in process: allowed

    def _take_cut_short(self, role: Role, stop: int) -> None:
        """A take killed part-way: claimed (task) or a batch dir made and `stop` files
        moved into it (batch), nothing stamped; sometimes a stamp's temp file left over."""
        inbox = self.inbox(role.name)
        waiting = inbox.waiting()
        if not waiting or inbox.listing().files or inbox.listing().batches:
            return
        if role.mode == "task":
            target = os.path.join(inbox.in_process, os.path.basename(waiting[0]))
            os.makedirs(inbox.in_process, exist_ok=True)
            os.rename(waiting[0], target)
        else:
            target = inbox._new_batch_dir()
            first = hf.read(waiting[0]).get("priority")
            same = [p for p in waiting if hf.read(p).get("priority") == first]
            for path in same[:stop]:
                os.rename(path, os.path.join(target, os.path.basename(path)))
        if stop % 2:
            where = target if os.path.isdir(target) else os.path.dirname(target)
            Path(where, f".{os.path.basename(target)}.999.0.tmp").write_bytes(b"half")

    def _finish_cut_short(self, role: Role, stop: int) -> None:
        """A finish killed after stamping `stop` files, before moving anything."""
        inbox = self.inbox(role.name)
        listing = inbox.listing()
        work = listing.batches[:1] if role.mode == "batch" else listing.files[:1]
        if not work or (role.mode == "batch") != bool(listing.batches):
            return
        files = inbox.batch_items(work[0]) if role.mode == "batch" else work
        for path in files[:stop]:
            hf.stamp(path, "completed_at", hf.iso_now())

    def probe(self) -> None:
        """On a copy of each role's inbox, what an agent does next: ready_for_next, again
        (it resumes), done_with_current, ready_for_next.  None of them is refused."""
        for role in self.roles.values():
            with tempfile.TemporaryDirectory() as scratch:
                inbox = os.path.join(role.handoffs, "inbox")
                if os.path.isdir(inbox):
                    shutil.copytree(inbox, os.path.join(scratch, "inbox"), symlinks=True)
                copy = Inbox(scratch)
                batch = role.mode == "batch"
                take = copy.take_batch if batch else copy.take_task
                finish = copy.finish_batch if batch else copy.finish_task
                try:
                    took = take()
                    take()
                    if took:
                        finish()
                    take()
                except Refusal as refusal:
                    raise AssertionError(f"{role.name}: {refusal.render()}") from None


def test_no_interleaving_of_deliveries_takes_and_finishes_wedges_a_role(
    project: Project,
) -> None:
    """After every step of any sequence of queueing, delivering (the daemon's courier),
    taking and finishing in task and batch mode, whole or cut short by a crash, the next
    take of every role succeeds; at the end each copy is still there exactly once."""
    scenario = Scenario(project)

    @settings(max_examples=40, deadline=None, suppress_health_check=FIXTURE_OK)
    @given(st.lists(operation, max_size=20))
    def check(ops: list[tuple[Any, ...]]) -> None:
        scenario.reset()
        for op in ops:
            scenario.apply(op)
            scenario.probe()
        scenario.courier.deliver(scenario.roles, scenario.now + 1)
        temps = set(hidden_temps(scenario.roles))
        report = audit(str(project.root), scenario.roles)
        problems = [p for p in report.problems if not any(t in p for t in temps)]
        assert not problems, problems

    check()


def test_the_probe_notices_a_wedged_role(project: Project) -> None:
    """The property can fail: two files in a task-mode in_process/ are refused."""
    scenario = Scenario(project)
    for name in ("a.handoff", "b.handoff"):
        project.put("QA", name, box=Box.IN_PROCESS)
    try:
        scenario.probe()
    except AssertionError as error:
        assert "AMBIGUOUS_TASK_STATE" in str(error)
    else:
        raise AssertionError("the probe accepted an ambiguous in_process/")
