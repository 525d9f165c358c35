"""Power loss, not only kill -9 (docs/protocol.md §4, §5, §8, §13): every state a power cut
may leave during real deliveries, real take/finish cycles, real claims and real operator
actions is recovered whole, and every token printed before the cut still holds after it.

Each run is recorded with strace and replayed by the crash-state explorer
(tests/crashtrace.py records, tests/crashstates.py says what its model of the disk promises
and what it does not).

The delivery run, all with the installed commands: architect sends one note to coder
(task mode) and one to cleaner (batch mode); the daemon delivers both on its very first
run (`daemon/` does not exist yet); architect sends a third to both; the daemon delivers
it in steady state, rewriting its journal in place with a shorter one (so a lost truncate
leaves the old tail behind); coder takes and finishes its two one at a time, cleaner
takes and finishes its two as one batch.  The claims run starts with that mail delivered
and has coder take, block, unblock and release, and cleaner take a batch, release it,
and block and unblock a copy waiting in new/.  The refusal run starts with two notes to
qa in architect's outbox and qa's row lost from roles.tsv: the daemon refuses both into
`failed/`, an operator puts the row back, retries the first and dismisses the second, and
the daemon delivers the first.  (The operator run, answer and reopen, is described at
`Scenario.answer_and_reopen`.)

Each state is recovered the way people would after a reboot — the daemon restarted
(`handoffd run --once`), each recipient's blocked copies unblocked, then `ready_for_next`
/ `done_with_current` until nothing is left — and, for the delivery run, once more with
the recipients taking what they see before the daemon restarts (a redelivery would then
show as a second copy).  Each recovery is audited: every handoff that existed is in
`sent/` and completed exactly once by each recipient, stamped; nothing is left in
`new/` or in process; no temp file, journal or corrupt-journal report is left; no helper
refused.  The refusal run's recovery is an operator's (`AfterARefusal`), audited for what
retry and dismiss promise.  Before recovery each state is checked against what the run
had printed by then (`promises`), and the refusal run's also for a failed original
without its reason (`paired`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from handoffd.core import handoff as hf
from handoffd.delivery.delivery import JOURNAL
from handoffd.queue import failed
from tests import crashstates, crashtrace, shards
from tests.crashtrace import Op, Recording, Step, Tree
from tests.fault_support import invariant_problems, roles_of, strace_problem

BIN = os.path.dirname(sys.executable)
ROLES = ("architect", "coder", "cleaner")
RECIPIENTS = ("coder", "cleaner")
MAIL = ("coder", "cleaner", "coder,cleaner")  # whom architect's three notes go to
LATE = "qa"  # the role the refusal run's roles.tsv loses, then gets back
MODES = {"architect": "task", "coder": "task", "cleaner": "batch", LATE: "task"}


def env(role: str | None = None) -> dict[str, str]:
    """A command's environment: the venv first on PATH, the role it acts for."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("SWARMFORGE_")}
    base["PATH"] = BIN + os.pathsep + base.get("PATH", "")
    return {**base, "SWARMFORGE_ROLE": role} if role else base


def command(name: str, *args: str) -> list[str]:
    return [os.path.join(BIN, name), *args]


def roles_tsv(root: str, roles: tuple[str, ...]) -> str:
    """roles.tsv's text for `roles`, each with its worktree below `root`."""
    return "".join(f"{r}\t{r}\t{os.path.join(root, 'wt', r)}\t{r}\t{r}\tclaude\t{MODES[r]}\n"
                   for r in roles)  # fmt: skip


# An operator's editor saving roles.tsv: a temp file written and flushed, renamed over the
# old one, the folder flushed.
RESTORE = """
import os, sys
path, text = sys.argv[1], sys.argv[2].encode()
folder, temp = os.path.dirname(path), path + ".swp"
fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, text)
os.fsync(fd)
os.close(fd)
os.rename(temp, path)
fd = os.open(folder, os.O_RDONLY)
os.fsync(fd)
os.close(fd)
"""


class Scenario:
    """A project below `base` (roles.tsv and a worktree per role) and the steps of a run."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "proj"
        (self.root / ".swarmforge").mkdir(parents=True)
        (self.root / ".swarmforge" / "roles.tsv").write_text(roles_tsv(str(self.root), ROLES))
        for role in ROLES:
            (self.root / "wt" / role).mkdir(parents=True)
        (base / "drafts").mkdir()
        for n, to in enumerate(MAIL, 1):
            draft = f"type: note\nto: {to}\npriority: 50\nmessage: n{n}\n"
            (base / "drafts" / f"d{n}").write_text(draft)

    def helper(self, role: str, name: str, *args: str) -> Step:
        return Step(f"{role}: {name} {' '.join(args)}".rstrip(), command(name, *args),
                    str(self.root / "wt" / role), env(role))  # fmt: skip

    def send(self, n: int) -> Step:
        return self.helper("architect", "swarm_handoff", str(self.base / "drafts" / f"d{n}"))

    def daemon(self) -> Step:
        return Step("handoffd run --once", command("handoffd", "run", "--once", str(self.root)),
                    str(self.root), env())  # fmt: skip

    def delivery(self) -> list[Step]:
        return [self.send(1), self.send(2), self.daemon(), self.send(3), self.daemon(),
                self.helper("coder", "ready_for_next"), self.helper("coder", "done_with_current"),
                self.helper("cleaner", "ready_for_next"),
                self.helper("cleaner", "done_with_current"),
                self.helper("coder", "done_with_current")]  # fmt: skip

    def deliver_all(self) -> str:
        """Run the sends and a delivery now, unrecorded; the third note's id."""
        for step in [self.send(1), self.send(2), self.send(3), self.daemon()]:
            crashstates.run(step.argv, step.cwd, step.env).expect(0)
        (third,) = (self.root / "wt" / "coder" / ".swarmforge/handoffs/inbox/new").glob(
            "*_000003_*"
        )
        return hf.name_id(third.name) or ""

    def operator(self, argv: list[str], what: str) -> Step:
        """An operator's command (docs/protocol.md §13): from the root, for no role."""
        return Step(f"operator: {what}", [*argv, "--root", str(self.root)], str(self.root),
                    env())  # fmt: skip

    def answer_and_reopen(self, first: str) -> list[Step]:
        """coder blocks its first note with a question, an operator answers it, coder
        finishes both notes it holds, an operator reopens the first."""
        card = f"{first}@coder"
        return [self.helper("coder", "ready_for_next"),
                self.helper("coder", "handoffd", "block", "--reason", "which schema?"),
                self.operator(command("handoffd", "answer", card, "v4"), "handoffd answer"),
                self.helper("coder", "done_with_current"),
                self.helper("coder", "done_with_current"),
                self.operator(command("handoffd", "reopen", card), "handoffd reopen")]  # fmt: skip

    def refused(self) -> tuple[str, str]:
        """Unrecorded: architect queues two notes to qa while roles.tsv has it, then qa's
        row is lost from roles.tsv (a bad edit), so the daemon will refuse both; their ids."""
        (self.root / "wt" / LATE).mkdir()
        tsv = self.root / ".swarmforge" / "roles.tsv"
        tsv.write_text(roles_tsv(str(self.root), (*ROLES, LATE)))
        for n in (1, 2):
            draft = self.base / "drafts" / f"q{n}"
            draft.write_text(f"type: note\nto: {LATE}\npriority: 50\nmessage: q{n}\n")
            step = self.helper("architect", "swarm_handoff", str(draft))
            crashstates.run(step.argv, step.cwd, step.env).expect(0)
        tsv.write_text(roles_tsv(str(self.root), ROLES))
        queued = sorted((self.root / "wt/architect/.swarmforge/handoffs/outbox").glob("*_to_*"))
        first, second = (hf.name_id(p.name) or "" for p in queued)
        return first, second

    def refusals(self, first: str, second: str) -> list[Step]:
        """The daemon refuses both notes to qa into architect's failed/; an operator puts
        qa's row back (written and flushed, as an editor saves), retries the first and
        dismisses the second; the daemon delivers the first."""
        tsv = str(self.root / ".swarmforge" / "roles.tsv")
        text = roles_tsv(str(self.root), (*ROLES, LATE))
        restore = Step(
            f"operator: puts {LATE} back in roles.tsv",
            [sys.executable, "-c", RESTORE, tsv, text],
            str(self.root),
            env(),
        )
        return [self.daemon(), restore,
                self.operator(command("handoffd", "retry", f"{first}@architect"),
                              "handoffd retry"),
                self.operator(command("handoffd", "dismiss", f"{second}@architect",
                                      "--reason", "sent by mistake"), "handoffd dismiss"),
                self.daemon()]  # fmt: skip

    def claims(self, third: str) -> list[Step]:
        return [self.helper("coder", "ready_for_next"),
                self.helper("coder", "handoffd", "block", "--reason", "waiting on QA"),
                self.helper("coder", "handoffd", "unblock"),
                self.helper("coder", "handoffd", "release"),
                self.helper("cleaner", "ready_for_next"),
                self.helper("cleaner", "handoffd", "release"),
                self.helper("cleaner", "handoffd", "block", third, "--reason", "not yet"),
                self.helper("cleaner", "handoffd", "unblock", third)]  # fmt: skip


# --- what each printed token promises ----------------------------------------------------

STAGES = {"new": 0, "in_process": 1, "completed": 2}


class Claim:
    """What the tokens printed so far say of one copy: the least stage it has reached
    (it may have moved on since), and headers it must or must not carry."""

    def __init__(self) -> None:
        self.stage = 0
        self.headers: dict[str, bool] = {}
        self.said = ""

    def hear(self, token: str, line: str) -> bool:
        """Take in one token line about this copy; False if it is not a copy's token."""
        found = {
            "TASK": (1, {"dequeued_at": True}),
            "COMPLETED": (2, {"completed_at": True, "blocked_reason": False}),
            "RELEASED": (0, {"released_at": True}),
            "BLOCKED": (None, {"blocked_reason": True}),
            "UNBLOCKED": (None, {"blocked_reason": False}),
            "REOPENED": (0, {"reopened_at": True, "completed_at": False}),
        }.get(token)
        if found is None:
            return False
        stage, headers = found
        self.stage = self.stage if stage is None else stage
        self.headers.update(headers)
        self.said = line
        return True

    def broken(self, where: str | None, content: bytes | None) -> str | None:
        if where is None or content is None:
            return "the copy is nowhere in the inbox"
        if STAGES[where] < self.stage:
            return f"the copy is back in {where}/"
        if self.headers.get("reopened_at") and where != "new":  # nothing took it since
            return f"the reopened copy is in {where}/"
        head = b"\n" + content.partition(b"\n\n")[0]
        for name, present in self.headers.items():
            if name == "blocked_reason" and present and where == "completed":
                continue  # completing drops it
            if (f"\n{name}: ".encode() in head) != present:
                return f"the copy {'lacks' if present else 'still has'} {name}"
        return None


def promises(base: str) -> crashstates.Check:
    """The check of a state against the tokens printed before the cut: a queued original
    is in outbox/ or sent/; a copy taken, completed, released, blocked or unblocked is
    where (or past where) the last token about it put it, with the headers it gave it —
    until the role's next command starts, which may change it (its own tokens then say
    what holds; what they said before was checked at every instant up to then)."""
    prefix = base + os.sep

    def check(tree: Tree, heard: list[Op]) -> list[str]:
        queued: dict[str, str] = {}
        answered: dict[str, str] = {}
        moved: dict[str, str] = {}  # a failed original retried or dismissed -> the line
        claims: dict[tuple[str, str], Claim] = {}
        for op in heard:
            if op.kind == "began":
                worktree = f"proj/wt/{op.what.partition(':')[0]}"
                if op.what.startswith("operator:"):  # it acts for whichever role: the
                    claims = {}  # tokens before it say nothing of what it changes
                claims = {key: claim for key, claim in claims.items() if key[0] != worktree}
                continue
            for line in op.data.decode(errors="replace").splitlines():
                token, _, path = line.partition(": ")
                if not path.startswith(prefix):
                    continue
                rel = path[len(prefix) :]
                worktree = rel.partition("/.swarmforge/handoffs/")[0]
                if token == "HANDOFF QUEUED":
                    queued[rel] = line
                elif token == "ANSWERED":
                    answered[rel] = line
                elif token in ("RETRIED", "DISMISSED"):
                    moved[rel] = line
                elif rel.endswith(hf.SUFFIX):
                    key = (worktree, os.path.basename(rel))
                    claims.setdefault(key, Claim()).hear(token, line)
        problems = [
            f"{line!r} was printed, but after the cut the original is neither in outbox/ "
            "nor in sent/"
            for rel, line in queued.items()
            if rel not in tree and rel.replace("/outbox/", "/sent/") not in tree
        ]
        problems += [f"{line!r} was printed, but after the cut the answer is gone"
                     for rel, line in answered.items() if rel not in tree]  # fmt: skip
        for (worktree, name), claim in claims.items():
            where, content = find_copy(tree, worktree, name)
            why = claim.broken(where, content)
            if why:
                problems.append(f"{claim.said!r} was printed, but after the cut {why}")
        for rel, line in moved.items():
            problems += [f"{line!r} was printed, but after the cut {why}"
                         for why in moved_problems(tree, rel)]  # fmt: skip
        return problems

    return check


def moved_problems(tree: Tree, rel: str) -> list[str]:
    """What is wrong with an original `retry` put at `rel` (in the outbox: there, or
    delivered since, in sent/) or `dismiss` did (in failed/dismissed/, its reason and
    note beside it): neither it nor its reason may be left in failed/."""
    sender, _, name = rel.partition("/.swarmforge/handoffs/")
    folder = f"{sender}/.swarmforge/handoffs"
    problems = []
    if name.startswith("outbox/"):
        name = name.removeprefix("outbox/")
        if rel not in tree and f"{folder}/sent/{name}" not in tree:
            problems.append("the original is neither in outbox/ nor in sent/")
    else:
        name = name.removeprefix("failed/dismissed/")
        problems += [f"failed/dismissed/ lacks {os.path.basename(rel + extra)}"
                     for extra in ("", failed.ERROR, failed.DISMISSAL)
                     if rel + extra not in tree]  # fmt: skip
        problems += [f"the original is back in {box}/" for box in ("outbox", "sent")
                     if f"{folder}/{box}/{name}" in tree]  # fmt: skip
    problems += [f"failed/ still holds {name + extra}" for extra in ("", failed.ERROR)
                 if f"{folder}/failed/{name + extra}" in tree]  # fmt: skip
    return problems


def paired(tree: Tree) -> list[str]:
    """At every instant, whatever was printed: an original in failed/ has its reason
    beside it (or already in failed/dismissed/, moved there first by a dismissal, or moved
    aside by a retry before the original moves, docs/protocol.md §13: where the board
    still reads it and the next command puts it back), and one in failed/dismissed/ its
    reason and its note."""
    problems = []
    for rel in tree:
        folder, name = os.path.split(rel)
        if not name.endswith(hf.SUFFIX) or not hf.is_visible(name):
            continue
        if folder.endswith("/handoffs/failed"):
            aside = f"{folder}/dismissed/{name}{failed.ERROR}"
            retrying = f"{folder}/{failed.aside_name(name)}"
            if rel + failed.ERROR not in tree and aside not in tree and retrying not in tree:
                problems.append(f"{rel} is in failed/ without its {failed.ERROR}")
        elif folder.endswith("/handoffs/failed/dismissed"):
            problems += [f"{rel} is dismissed without its {extra}"
                         for extra in (failed.ERROR, failed.DISMISSAL)
                         if rel + extra not in tree]  # fmt: skip
    return problems


def find_copy(tree: Tree, worktree: str, name: str) -> tuple[str | None, bytes | None]:
    """Which inbox folder of `worktree` holds the copy `name` (batch dirs included)."""
    for box in STAGES:
        start = f"{worktree}/.swarmforge/handoffs/inbox/{box}/"
        for path, content in tree.items():
            if path.startswith(start) and os.path.basename(path) == name:
                return box, content
    return None, None


# --- recovery and the audit ----------------------------------------------------------------


class DaemonFirst(crashstates.Recovery):
    """Restart the daemon, then let each recipient work through its inbox."""

    name = "daemon first"
    take_first = False

    def __call__(self, base: str, moved: crashstates.Moved, told: object = None) -> list[str]:
        root = os.path.join(base, "proj")
        carry_identities(os.path.join(root, JOURNAL), moved)
        return recovered(root, self.take_first)


class RecipientsFirst(DaemonFirst):
    """Let each recipient take what it sees before the daemon restarts: a copy delivered
    again would then be a second one.  Only for states a cut of the daemon left: after
    its passes nothing of the daemon's is left unsynced, and the order cannot matter."""

    name = "recipients first"
    take_first = True

    def applies(self, step: str) -> bool:
        return step.startswith("handoffd run")


class AfterAnOperator(DaemonFirst):
    """As `DaemonFirst`; a report's temp file a cut left in `reports/<id>/` is not counted:
    every reader skips hidden files, and the next report stored on that handoff sweeps it
    (`reports.store`; tests/test_reports.py pins that)."""

    name = "daemon first, report temps aside"

    def __call__(self, base: str, moved: crashstates.Moved, told: object = None) -> list[str]:
        found = super().__call__(base, moved)
        return [p for p in found if not ("hidden temp file left" in p and "/reports/" in p)]


class AfterARefusal(crashstates.Recovery):
    """What an operator does after a reboot in the refusal run: restart the daemon; put
    qa's row back in roles.tsv if the cut lost it; retry the first note and dismiss the
    second if the board still shows it failed (its token was not printed, or was and did
    not hold: `promises` says which); restart the daemon; qa works through its inbox."""

    name = "daemon, roles.tsv, retry and dismiss again"

    def __init__(self, retried: str, dismissed: str) -> None:
        self.retried, self.dismissed = retried, dismissed

    def __call__(self, base: str, moved: crashstates.Moved, told: object = None) -> list[str]:
        root = os.path.join(base, "proj")
        carry_identities(os.path.join(root, JOURNAL), moved)
        daemon = command("handoffd", "run", "--once", root)
        problems = crashstates.run(daemon, root, env()).problems("handoffd run --once", (0,))
        tsv = Path(root, ".swarmforge", "roles.tsv")
        if f"\n{LATE}\t" not in "\n" + tsv.read_text():
            tsv.write_text(roles_tsv(root, (*ROLES, LATE)))
        for ident, args in (
            (self.retried, ["retry"]),
            (self.dismissed, ["dismiss", "--reason", "sent by mistake"]),
        ):
            if any(n.endswith(hf.SUFFIX) for n in failed_names(root, ident, "failed")):
                argv = command("handoffd", args[0], f"{ident}@architect", *args[1:], "--root", root)
                again = crashstates.run(argv, root, env())
                problems += again.problems(f"handoffd {args[0]} again", ok=(0,))
        problems += crashstates.run(daemon, root, env()).problems("handoffd run --once", (0,))
        problems += drain(root, LATE)
        return problems + refusal_audit(root, self.retried, self.dismissed)


def failed_names(root: str, ident: str, box: str) -> list[str]:
    """The names in architect's `box` that belong to the handoff `ident` (an original,
    its `.error`, its `.dismissed`), hidden ones aside."""
    folder = os.path.join(root, "wt", "architect", ".swarmforge", "handoffs", box)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if hf.is_visible(n) and f"_{ident}_" in f"_{n}")


def refusal_audit(root: str, retried: str, dismissed: str) -> list[str]:
    """The invariant; the retried note in sent/ and completed exactly once by qa, nothing
    of it (not its `.error`) left in failed/; the dismissed one in failed/dismissed/ with
    its reason and note, nowhere else, never delivered; qa's inbox drained; the daemon's
    folder clean."""
    roles = roles_of(root)
    problems = invariant_problems(root, roles) + daemon_problems(root)
    where = {box: failed_names(root, retried, box)
             for box in ("outbox", "sent", "failed", "failed/dismissed")}  # fmt: skip
    if len(where.pop("sent")) != 1 or any(where.values()):
        problems.append(f"{retried} (retried) is left in {where}")
    done = [p for p in files_of(roles[LATE].path("inbox/completed")) if retried in p]
    if len(done) != 1 or not hf.read(done[0]).get("completed_at"):
        problems.append(f"{retried} (retried): {LATE} completed it {len(done)}x")
    aside = failed_names(root, dismissed, "failed/dismissed")
    if len(aside) != 3 or len([n for n in aside if n.endswith(hf.SUFFIX)]) != 1:
        problems.append(f"{dismissed} (dismissed): failed/dismissed/ holds {aside}")
    for box in ("outbox", "sent", "failed"):
        if left := failed_names(root, dismissed, box):
            problems.append(f"{dismissed} (dismissed): {box}/ still holds {left}")
    for role in roles.values():
        copies = [p for p in files_of(role.path("inbox")) if dismissed in p]
        if copies:
            problems.append(f"{dismissed} (dismissed) was delivered: {copies}")
    for box in ("inbox/new", "inbox/in_process"):
        if left := files_of(roles[LATE].path(box)):
            problems.append(f"{LATE} still has {left} in {box}")
    return problems


def carry_identities(path: str, moved: crashstates.Moved) -> None:
    """The journal names each original by its (st_dev, st_ino), which a reboot keeps and
    laying a state out anew does not: give each entry its file's new identity."""
    try:
        lines = Path(path).read_bytes().split(b"\n")
    except FileNotFoundError:
        return
    for index, line in enumerate(lines):
        try:
            entry = json.loads(line)
            entry["identity"] = list(moved[tuple(entry["identity"])])
        except (ValueError, KeyError, TypeError):
            continue  # not an entry, or one of a file the state lost
        lines[index] = json.dumps(entry).encode()
    Path(path).write_bytes(b"\n".join(lines))


def recovered(root: str, take_first: bool) -> list[str]:
    present = handoff_names(root)
    problems = []
    for role in RECIPIENTS if take_first else ():
        taken = crashstates.run(
            command("ready_for_next"), os.path.join(root, "wt", role), env(role)
        )
        problems += taken.problems(f"{role}: ready_for_next", ok=(0,))
    daemon = crashstates.run(command("handoffd", "run", "--once", root), root, env())
    problems += daemon.problems("handoffd run --once", ok=(0,))
    for role in RECIPIENTS:
        problems += drain(root, role)
    return problems + audit(root, present)


def drain(root: str, role: str) -> list[str]:
    """Unblock what is blocked, then take and finish until nothing is left."""
    cwd = os.path.join(root, "wt", role)
    for path in files_of(os.path.join(cwd, ".swarmforge", "handoffs", "inbox")):
        if hf.read(path).get("blocked_reason") is not None:
            unblocked = crashstates.run(command("handoffd", "unblock", os.path.basename(path)),
                                        cwd, env(role))  # fmt: skip
            problems = unblocked.problems(f"{role}: handoffd unblock", ok=(0,))
            if problems:
                return problems
    for _ in range(5):
        taken = crashstates.run(command("ready_for_next"), cwd, env(role))
        if taken.code != 0 or taken.out.strip() == "NO_TASK":
            return taken.problems(f"{role}: ready_for_next", ok=(0,))
        done = crashstates.run(command("done_with_current"), cwd, env(role))
        if done.code != 0:
            return done.problems(f"{role}: done_with_current", ok=(0,))
    return [f"{role}: still has work after 5 rounds"]


def handoff_names(root: str) -> dict[str, str]:
    """Every handoff some file of the state belongs to: id -> its file name."""
    found = {}
    for role in ROLES:
        for path in files_of(os.path.join(root, "wt", role, ".swarmforge")):
            name = os.path.basename(path)
            if name.endswith(hf.SUFFIX):
                found[hf.name_id(name) or name] = name
    return found


def audit(root: str, present: dict[str, str]) -> list[str]:
    """The invariant, plus: nothing that existed was lost, all of it is completed, and the
    daemon's folder holds no temp file and no journal set aside as corrupt."""
    roles = roles_of(root)
    problems = invariant_problems(root, roles)
    for ident, name in present.items():
        if not os.path.exists(roles["architect"].path("sent", name)):
            problems.append(f"{ident}: its original is not in sent/")
        for role in name.removesuffix(hf.SUFFIX).split("_to_")[1].split("_"):
            done = [p for p in files_of(roles[role].path("inbox/completed")) if ident in p]
            stamped = [p for p in done if hf.read(p).get("completed_at")]
            if len(stamped) != 1 or len(done) != 1:
                problems.append(
                    f"{ident}: {role} completed it {len(done)}x ({len(stamped)} stamped)"
                )
    for role in RECIPIENTS:
        for box in ("inbox/new", "inbox/in_process"):
            left = files_of(roles[role].path(box))
            if left:
                problems.append(f"{role} still has {left} in {box}")
    return problems + daemon_problems(root)


def daemon_problems(root: str) -> list[str]:
    """The daemon's folder holds no temp file and no journal set aside as corrupt, and its
    log never reported the journal corrupt."""
    problems = []
    daemon = os.path.join(root, ".swarmforge", "daemon")
    for name in os.listdir(daemon) if os.path.isdir(daemon) else []:
        if name.startswith(".") or "corrupt" in name:
            problems.append(f"left in daemon/: {name}")
    log = os.path.join(daemon, "handoffd.log")
    if os.path.exists(log) and '"journal_corrupt"' in Path(log).read_text(errors="replace"):
        problems.append("the journal was reported corrupt")
    return problems


def files_of(directory: str) -> list[str]:
    """The visible files below `directory`."""
    return [os.path.join(d, n) for d, _, names in os.walk(directory) for n in names
            if hf.is_visible(n)]  # fmt: skip


def ignored(rel: str) -> bool:
    """Left out of the model: files nothing reads back to decide anything, each rewritten by
    the next command that needs it (the daemon's log, heartbeats, live files and their
    temps), and the drafts the runs queue from."""
    name = os.path.basename(rel).lstrip(".")
    return rel.startswith("drafts") or name.startswith(("handoffd.log", "heartbeat", "HANDOFF.md"))


# --- the explorer's own model, on small programs -------------------------------------------

SYNC = """
import os, sys
def sync(path):
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
def write(path, data, flags=os.O_CREAT):
    fd = os.open(path, os.O_WRONLY | flags, 0o644)
    os.write(fd, data)
    return fd
"""


def program(tmp_path: Path, code: str, tree: Tree) -> Recording:
    """Run `code` (after SYNC's helpers) under the recorder in a folder laid out as `tree`."""
    problem = strace_problem()
    if problem:
        pytest.skip(problem)
    base = tmp_path / "r0000000"
    base.mkdir(parents=True)
    for rel, content in sorted(tree.items()):
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).mkdir() if content is None else (base / rel).write_bytes(content)
    (tmp_path / "traces").mkdir()
    step = Step("program", [sys.executable, "-c", SYNC + code], str(base), env())
    return crashtrace.record([step], str(base), str(tmp_path / "traces"))


def states(recording: Recording, n: int) -> dict[str, Tree]:
    """The states a cut after `ops[:n]` may leave, by choice."""
    instant = crashstates.Instant(recording.ops, n)
    named = {choice.name: choice for choice in instant.choices(str)}
    return {name: crashstates.build(recording, instant, c).tree for name, c in named.items()}


def after_said(recording: Recording, text: bytes) -> int:
    return next(
        i + 1 for i, op in enumerate(recording.ops) if op.kind == "said" and text in op.data
    )


LOST, KEPT = "every unsynced change lost", "nothing lost (as kill -9 leaves it)"


def test_the_model_loses_a_rename_until_both_of_its_folders_are_fsynced(tmp_path: Path) -> None:
    recorded = program(tmp_path, """
os.fsync(write("a/x", b"data"))
sync("a")
os.rename("a/x", "b/x")
sync("b")
print("one synced", flush=True)
sync("a")
print("both synced", flush=True)
""", {"a": None, "b": None})  # fmt: skip
    one = states(recorded, after_said(recorded, b"one synced"))
    assert ("a/x" in one[LOST], "b/x" in one[LOST]) == (True, False)  # atomic: never both
    assert ("a/x" in one[KEPT], "b/x" in one[KEPT]) == (False, True)
    both = states(recorded, after_said(recorded, b"both synced"))
    assert all("b/x" in tree and "a/x" not in tree for tree in both.values())


def test_the_model_loses_all_a_folder_holds_while_its_own_mkdir_is_unsynced(
    tmp_path: Path,
) -> None:
    recorded = program(tmp_path, """
os.mkdir("d")
os.fsync(write("d/f", b"data"))
sync("d")
print("inside synced", flush=True)
sync(".")
print("parent synced", flush=True)
""", {})  # fmt: skip
    inside = states(recorded, after_said(recorded, b"inside synced"))
    assert "d" not in inside[LOST] and inside[KEPT]["d/f"] == b"data"
    parent = states(recorded, after_said(recorded, b"parent synced"))
    assert all(tree.get("d/f") == b"data" for tree in parent.values())


def test_the_model_keeps_the_old_tail_when_a_rewrite_in_place_loses_its_truncate(
    tmp_path: Path,
) -> None:
    recorded = program(tmp_path, """
fd = write("j", b"new", os.O_TRUNC)
print("written", flush=True)
os.fsync(fd)
print("synced", flush=True)
""", {"j": b"old and long"})  # fmt: skip
    written = states(recorded, after_said(recorded, b"written"))
    found = {tree["j"] for tree in written.values()}
    assert found == {b"old and long", b"", b"new", b"new and long"}  # the last: truncate lost
    assert {tree["j"] for tree in states(recorded, after_said(recorded, b"synced")).values()} == {
        b"new"
    }


def test_the_explorer_reports_a_token_printed_before_the_rename_it_names_is_durable(
    tmp_path: Path,
) -> None:
    """The check sees a MOVED token whose file a cut may still put back; flushing both
    folders before printing makes the same check pass at every instant."""

    def check(tree: Tree, heard: list[Op]) -> list[str]:
        said = b"".join(op.data for op in heard if op.kind == "said")
        return ["b/x is not there"] if b"MOVED" in said and "b/x" not in tree else []

    code = 'os.fsync(write("a/x", b"data")); sync("a"); os.rename("a/x", "b/x"); {}'
    careless = program(tmp_path / "1", code.format('print("MOVED")'), {"a": None, "b": None})
    assert crashstates.explore(careless, check, []).findings
    careful = program(tmp_path / "2", code.format('sync("a"); sync("b"); print("MOVED")'),
                      {"a": None, "b": None})  # fmt: skip
    assert not crashstates.explore(careful, check, []).findings


class Laid(crashstates.Recovery):
    """A recovery that only says what it found laid out: one "problem" per state."""

    name = "laid out"

    def __call__(self, base: str, moved: crashstates.Moved, told: object = None) -> list[str]:
        return [f"laid out: {sorted(crashtrace.snapshot(base).items())!r}"]


def test_the_explorers_shards_together_check_every_state_and_recover_each_distinct_one_once(
    tmp_path: Path,
) -> None:
    """Three shards of an exploration do what it does, split: each walks every instant,
    the instants checked, the states checked and the states recovered add up to the whole
    exploration's, and so does how often each state was checked and recovered."""
    recorded = program(tmp_path, """
os.fsync(write("a/x", b"data"))
sync("a")
os.rename("a/x", "b/x")
fd = write("a/y", b"more")
print("MOVED", flush=True)
os.fsync(fd)
sync("b")
""", {"a": None, "b": None})  # fmt: skip

    def check(tree: Tree, heard: list[Op]) -> list[str]:
        return [f"checked: {sorted(tree.items())!r}"]

    whole = crashstates.explore(recorded, check, [Laid()], workers=1)
    parts = [crashstates.explore(recorded, check, [Laid()], workers=1, shard=(k, 3))
             for k in range(3)]  # fmt: skip
    assert whole.distinct > 3 and len({p.distinct for p in parts}) > 1  # a real split
    assert {p.walked for p in parts} == {whole.walked} == {len(recorded.ops) + 1}
    for count in ("instants", "checked", "distinct", "recovered"):
        assert sum(getattr(p, count) for p in parts) == getattr(whole, count), count
    found: dict[str, int] = {}
    for part in parts:
        for problem, (_, times) in part.findings.items():
            found[problem] = found.get(problem, 0) + times
    assert found == {problem: times for problem, (_, times) in whole.findings.items()}


# --- the tests ---------------------------------------------------------------------------------


R = TypeVar("R")


def once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], R]) -> R:
    """`make(folder)`, a recording, made once per session: an explorer's shards, in
    whichever workers, explore that one run (tests/shards.py)."""
    problem = strace_problem()
    if problem:
        pytest.skip(problem)
    return shards.shared(factory, f"power-{name}", make)


def record_in(folder: Path, steps: Callable[[Scenario], list[Step]]) -> Recording:
    """The run of `steps`, recorded on a scenario laid out in `folder`."""
    base = folder / "r0000000"  # its name's length: see explore
    scenario = Scenario(base)
    traces = folder / "traces"
    traces.mkdir()
    return crashtrace.record(steps(scenario), str(base), str(traces), ignored)


def recording(
    factory: pytest.TempPathFactory, name: str, steps: Callable[[Scenario], list[Step]]
) -> Recording:
    return once(factory, name, lambda folder: record_in(folder, steps))


@pytest.fixture(scope="module")
def delivery(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return recording(tmp_path_factory, "delivery", Scenario.delivery)


@pytest.fixture(scope="module")
def operating(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    def steps(scenario: Scenario) -> list[Step]:
        scenario.deliver_all()
        (first,) = (scenario.root / "wt/coder/.swarmforge/handoffs/inbox/new").glob("*_000001_*")
        return scenario.answer_and_reopen(hf.name_id(first.name) or "")

    return recording(tmp_path_factory, "operating", steps)


@pytest.fixture(scope="module")
def claims(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return recording(tmp_path_factory, "claims", lambda s: s.claims(s.deliver_all()))


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> tuple[Recording, str, str]:
    def record(folder: Path) -> tuple[Recording, str, str]:
        ids: list[str] = []

        def steps(scenario: Scenario) -> list[Step]:
            ids.extend(scenario.refused())
            return scenario.refusals(*ids)

        recorded = record_in(folder, steps)
        return recorded, ids[0], ids[1]

    return once(tmp_path_factory, "refusing", record)


def explored(
    recorded: Recording,
    recoveries: list[crashstates.Recovery],
    also: Callable[[Tree], list[str]] = lambda tree: [],
    told: Callable[[list[Op]], object] | None = None,
    workers: int = 2,
    shard: tuple[int, int] = (0, 1),
) -> None:
    """Explore `recorded` (or the part `shard` is of it), each state checked against
    `promises` and `also` (and holding what `told` reads the run had told other machines,
    for the recoveries)."""
    started = time.monotonic()
    said = promises(recorded.base)
    check: crashstates.Check = lambda t, h: said(t, h) + also(t)  # noqa: E731
    result = crashstates.explore(recorded, check, recoveries, told=told, workers=workers,
                                 shard=shard)  # fmt: skip
    took = time.monotonic() - started
    print(
        f"power-loss states, shard {shard[0] + 1} of {shard[1]}: {result.walked} instants "
        f"walked, {result.instants} checked, {result.checked} states checked, "
        f"{result.distinct} distinct recovered, {result.recovered} recoveries, in {took:.1f} s"
    )
    assert not result.findings, result.report()
    # The walk covered every instant, and this shard checked its own share of them.
    instants = len(recorded.ops) + 1
    assert result.walked == instants
    assert result.instants == len(range(shard[0], instants, shard[1]))
    # Its time is printed, never asserted: this machine is shared, and a slow run is no bug.


def test_the_delivery_run_does_what_its_audit_relies_on(delivery: Recording) -> None:
    """Three handoffs queued, two delivered by the daemon's first run and one in steady
    state with a shorter journal; coder completes two one at a time, cleaner two as one
    batch."""
    out = [o.decode() for o in delivery.outputs]
    assert [o.count("HANDOFF QUEUED: ") for o in (out[0], out[1], out[3])] == [1, 1, 1]
    assert out[5].startswith("TASK: ") and "COMPLETED: " in out[6] and "TASK: " in out[6]
    assert out[7].startswith("BATCH: ") and "COUNT: 2" in out[7]
    assert out[8].count("COMPLETED: ") == 2 and "COMPLETED_BATCH: " in out[8]
    assert out[9].startswith("COMPLETED: ") and out[9].endswith("NO_TASK\n")
    journals = [op for op in delivery.ops if op.kind == "write" and op.what.endswith("journal")]
    assert len(journals) == 2 and len(journals[1].data) < len(journals[0].data)


@pytest.mark.slow  # a crash-point or fault run: tens of seconds
@shards.parametrize()
def test_a_power_cut_anywhere_in_deliveries_and_take_finish_cycles_loses_and_duplicates_nothing(
    delivery: Recording, shard: tuple[int, int]
) -> None:
    explored(delivery, [DaemonFirst(), RecipientsFirst()], shard=shard)


def test_the_claims_run_does_what_its_audit_relies_on(claims: Recording) -> None:
    out = [o.decode() for o in claims.outputs]
    assert out[0].startswith("TASK: ") and out[1].startswith("BLOCKED: ")
    assert out[2].startswith("UNBLOCKED: ") and out[3].startswith("RELEASED: ")
    assert out[4].startswith("BATCH: ") and out[5].count("RELEASED: ") == 2
    assert out[6].startswith("BLOCKED: ") and "/inbox/new/" in out[6]
    assert out[7].startswith("UNBLOCKED: ")


@pytest.mark.slow  # a crash-point or fault run: tens of seconds
@shards.parametrize(2)
def test_a_power_cut_anywhere_in_block_unblock_and_release_keeps_every_token(
    claims: Recording, shard: tuple[int, int]
) -> None:
    explored(claims, [DaemonFirst()], shard=shard)


def test_the_operator_run_does_what_its_audit_relies_on(operating: Recording) -> None:
    out = [o.decode() for o in operating.outputs]
    assert out[0].startswith("TASK: ") and out[1].startswith("BLOCKED: ")
    assert out[2].startswith("ANSWERED: ") and "UNBLOCKED: " in out[2]
    assert out[3].startswith("COMPLETED: ") and out[4].startswith("COMPLETED: ")
    assert out[5].startswith("REOPENED: ") and "/inbox/new/" in out[5]


@pytest.mark.slow  # a crash-point or fault run: tens of seconds
@shards.parametrize(2)
def test_a_power_cut_anywhere_in_answer_and_reopen_keeps_every_token(
    operating: Recording, shard: tuple[int, int]
) -> None:
    """An answer printed is on disk; a copy reopened is back in new/ without its stamps."""
    explored(operating, [AfterAnOperator()], shard=shard)


def test_the_refusal_run_does_what_its_audit_relies_on(
    refusing: tuple[Recording, str, str],
) -> None:
    """Both notes to qa are refused into failed/ with their reasons, the retried one goes
    back to the outbox, the dismissed one aside, and the daemon delivers the retried one."""
    recorded, first, second = refusing
    out = [o.decode() for o in recorded.outputs]
    assert out[2] == f"RETRIED: {recorded.base}/proj/wt/architect/.swarmforge/handoffs/outbox/" \
        f"50_{first}_to_{LATE}.handoff\n"  # fmt: skip
    assert out[3].startswith("DISMISSED: ") and "/failed/dismissed/" in out[3] and second in out[3]
    made = [op.what for op in recorded.ops if op.kind in ("link", "rename")]
    for ident in (first, second):  # refused by the recorded daemon, each reason first
        reason, original = (f"failed/50_{ident}_to_{LATE}.handoff{e}" for e in (".error", ""))
        renames = [i for i, what in enumerate(made) if what.endswith((reason, original))]
        assert len(renames) == 2 and made[renames[0]].endswith(reason), made
    delivered = [w for w in made if w.startswith("rename") and f"/{LATE}/" in w and "/new/" in w]
    assert len(delivered) == 1 and first in delivered[0]


@pytest.mark.slow  # a crash-point or fault run: tens of seconds
@shards.parametrize(2)
def test_a_power_cut_anywhere_in_a_refusal_retry_and_dismiss_keeps_every_token(
    refusing: tuple[Recording, str, str], shard: tuple[int, int]
) -> None:
    """A retried note is delivered exactly once and never left in failed/; a dismissed one
    never comes back; an original in failed/ is never without its reason."""
    recorded, first, second = refusing
    explored(recorded, [AfterARefusal(first, second)], paired, shard=shard)
