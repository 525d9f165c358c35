"""`handoffd resume`: "where were we", in at most five lines (docs/protocol.md §10).

It climbs a ladder of sources and stops at the first that yields state: the live file
(when it is of this branch and no older than the queue's newest event), the queue, git,
and otherwise an honest cold start.  The answer builders are pure; `climb` does the
reading, and the git rung writes the live file so the next agent never digs again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from handoffd.continuity import live, work
from handoffd.core import budget, git
from handoffd.core import handoff as hf
from handoffd.core.config import Role
from handoffd.core.terminal import escape
from handoffd.queue import blocks, reports, scan

COLD_START = "COLD_START: No prior session history found for this worktree."
MAX_LINES = 5
SOURCES = {"live_file": "live file", "queue": "queue", "git": "git"}
# handoffd's own areas of a worktree: runtime state, and the other roles' worktrees
OWN_PATHS = (":(exclude).swarmforge", ":(exclude).worktrees")


@dataclass(frozen=True)
class Answer:
    """What `resume` says: where it came from, the open question, the state, the next step."""

    source: str
    role: str
    branch: str
    state: str | None = None
    next_step: str | None = None
    open_question: str | None = None
    answer: str | None = None  # `<first line> (<by>, <when>)`: an operator's answer (§13)
    reopened: str | None = None  # `<reason> (<by>, <when>)`: the work was reopened (§15)

    def lines(self) -> list[str]:
        """At most five lines: the second says what is newest about the work — an answer
        (never older than a reopen: §13), else the open question (a block set since the
        reopen cleared the last), else that it was reopened.  Each is escaped: the
        branch, the live file and the queue are files' words."""
        if self.source == "cold_start":
            return [COLD_START]
        lines = [f"RESUMING: {self.role} on {escape(self.branch)} (from {SOURCES[self.source]})"]
        if self.answer:
            lines.append(f"ANSWER: {live.one_line(self.answer)}")
        elif self.open_question:
            lines.append(f"OPEN_QUESTION: {live.one_line(self.open_question)}")
        elif self.reopened:
            lines.append(f"REOPENED: {live.one_line(self.reopened)}")
        lines.append(f"STATE: {live.one_line(self.state or '')}")
        lines.append(f"NEXT_STEP: {live.one_line(self.next_step or '')}")
        return budget.render(MAX_LINES, [], lines)  # every line fixed, and never a sixth

    def as_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "role": self.role,
            "branch": self.branch,
            "open_question": self.open_question,
            "state": self.state,
            "next_step": self.next_step,
            "answer": self.answer,
            "reopened": self.reopened,
            "lines": self.lines(),
        }


@dataclass(frozen=True)
class GitFacts:
    """What git and the history folders say about a worktree."""

    branch: str
    main_branch: str
    ahead: list[str]  # "<sha> <subject>" of commits the main checkout's branch lacks
    changed: int  # uncommitted paths outside handoffd's own areas
    last_handoff: str  # the last handoff received or sent, in words; "" if none
    waiting_for: str = ""  # its recipients, when the last one was sent

    @property
    def any(self) -> bool:
        return bool(self.ahead or self.changed or self.last_handoff)


# --- pure: one answer per rung ----------------------------------------------------------


def from_live(parsed: live.Parsed, role: str, branch: str) -> Answer:
    """Rung 1: the live file says it all."""
    sections = parsed.sections
    question = _first_bullet(sections.get("Open Questions", []))
    flight = [line.removeprefix("- ") for line in sections.get("In-Flight", [])]
    state = "; ".join([parsed.phase, *flight[:2]])
    decided, ruled_out = (len(_bullets(sections.get(n, []))) for n in ("Decisions", "Ruled Out"))
    if decided or ruled_out:
        state += f" (HANDOFF.md: {decided} decided, {ruled_out} ruled out)"
    step = " ".join(sections.get("Next Step", [])) or "Read the live file."
    return Answer("live_file", role, branch, state, step, question)


def from_queue(now: work.Work, role: str, branch: str, report: str) -> Answer:
    """Rung 2: the work in process or waiting, its latest report and blocked reason."""
    summary = work.describe(now)
    parts = [summary.phase, *summary.in_flight[:2]]
    if report:
        parts.append(f"latest report {report}")
    if now.waiting and now.in_process:
        parts.append(f"{now.waiting} more waiting")
    question = summary.open_questions[0] if summary.open_questions else None
    return Answer("queue", role, branch, "; ".join(parts), summary.next_step, question)


def from_git(facts: GitFacts, role: str) -> Answer:
    """Rung 3: the branch's own commits, uncommitted changes, the last handoff."""
    parts = []
    if facts.ahead:
        parts.append(
            f"{len(facts.ahead)} commit(s) ahead of {facts.main_branch} (latest {facts.ahead[0]})"
        )
    if facts.changed:
        parts.append(f"{facts.changed} uncommitted path(s)")
    if facts.last_handoff:
        parts.append(f"last handoff: {facts.last_handoff}")
    return Answer("git", role, facts.branch, "; ".join(parts), git_next_step(facts))


def git_phase(facts: GitFacts, state: str) -> str:
    """The live file's phase after the git rung: still waiting on a handoff it sent, else
    idle with what git showed."""
    if facts.waiting_for and not facts.changed:
        return f"waiting for {facts.waiting_for}"
    return f"idle (reconstructed from git: {state})"


def git_next_step(facts: GitFacts) -> str:
    if facts.changed:
        return f"Review the {facts.changed} uncommitted path(s) (git status), then commit them."
    if facts.ahead:
        return (
            f"Check that the {len(facts.ahead)} commit(s) on {facts.branch} were handed on "
            "(swarm_handoff.sh) or finish them."
        )
    if facts.waiting_for:
        return f"Wait for {facts.waiting_for}; run ready_for_next.sh when woken."
    return "Nothing in process or waiting: run ready_for_next.sh when woken."


def _bullets(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("- ") and live.dropped_count(line) is None]


def _first_bullet(lines: list[str]) -> str | None:
    bullets = _bullets(lines)
    return bullets[0].removeprefix("- ") if bullets else None


def fresh(parsed: live.Parsed, branch: str, newest_event: float) -> bool:
    """Rung 1's test: the live file is of this branch and no older than the queue's newest
    event."""
    return parsed.branch == branch and parsed.written >= newest_event


# --- I/O: the ladder ----------------------------------------------------------------------


def climb(role: Role, root: str, now: float | None = None) -> Answer:
    """Climb the ladder for `role`; stop at the first rung that yields state.  The role's
    queue is looked at once: the queue rung's state, and, whatever the rung, the second
    line (an operator's answer on the work in process, or its reopening)."""
    queue = work.look(role)
    found = _climb(role, root, now, queue)
    said, reopened = answered(queue)
    return replace(found, answer=said, reopened=reopened)


def answered(queue: work.Work) -> tuple[str | None, str | None]:
    """`<first line> (<by>, <when>)` of the answer on the role's work in process that the
    role has not reported after (nor met before a reopen), and `<reason> (<by>, <when>)`
    of its reopening, each None when there is none: what `work.look` found."""
    said = reopened = None
    for entry in queue.in_process:
        line = blocks.reopened(entry.headers)
        reopened = reopened or (line.removeprefix("REOPENED: ") if line else None)
        found = queue.answers.get(entry.card)
        if said is None and found is not None:
            said = f"{found.first_line} ({found.agent}, {found.reported_at})"
    return said, reopened


def _climb(role: Role, root: str, now: float | None, queue: work.Work) -> Answer:
    branch = live.branch(role.worktree)
    parsed = live.read(role.worktree)
    if parsed is not None and fresh(parsed, branch, work.newest_event(role)):
        return from_live(parsed, role.name, branch)
    if queue.in_process or queue.waiting:
        ident = queue.in_process[0].id if queue.in_process else ""
        return from_queue(queue, role.name, branch, latest_report(role, ident))
    facts = git_facts(role, root, branch)
    if not facts.any:
        return Answer("cold_start", role.name, branch)
    answer = from_git(facts, role.name)
    _write_reconstruction(role, answer, git_phase(facts, answer.state or ""), now)
    return answer


def _write_reconstruction(role: Role, answer: Answer, phase: str, now: float | None) -> None:
    """The git rung's one write: the live file, so the next call starts from rung 1."""
    state = live.State(hf.iso_now(now), answer.branch, phase, answer.next_step or "")
    try:
        live.write(role.worktree, state)
    except OSError:  # the answer stands without it; the next call reconstructs again
        pass


def git_facts(role: Role, root: str, branch: str) -> GitFacts:
    """What git says about the role's worktree; nothing at all when git cannot say (no
    worktree folder, no git): a rung that yields nothing, never an error."""
    main_branch = live.branch(root)
    ahead: list[str] = []
    if main_branch != branch and not main_branch.startswith("("):
        ahead = _git_lines(role.worktree, "log", "--format=%h %s", f"{main_branch}..HEAD")
    changed = len(_git_lines(role.worktree, "status", "--porcelain", "--", ".", *OWN_PATHS))
    last, waiting_for = last_handoff(role)
    return GitFacts(branch, main_branch, ahead, changed, last, waiting_for)


def _git_lines(worktree: str, *args: str) -> list[str]:
    try:
        result = git.run(worktree, *args)
    except OSError:  # the worktree folder is gone, or git is not installed
        return []
    return result.stdout.splitlines() if result.returncode == 0 else []


def last_handoff(role: Role) -> tuple[str, str]:
    """The newest handoff the role completed or sent, in words ("" if it has none), and
    its recipients when the role sent it."""
    history = scan.listing(role, scan.State.HISTORY)
    named = [(parts, e) for e in history if (parts := e.parts) is not None]
    if not named:
        return "", ""
    parts, entry = max(named, key=lambda pe: (pe[0].timestamp, pe[0].seq, pe[1].name))
    headers = entry.headers
    if entry.state == scan.State.COMPLETED:
        sender = hf.sender_shown(headers.get(hf.SENDER) or "", headers)  # `operator (<name>)`
        who, stamp = f"received {hf.label(headers)} from {sender}", hf.COMPLETED_AT
        waiting_for = ""
    else:
        waiting_for = ",".join(hf.comma_list(headers.get(hf.RECIPIENTS) or "") or parts.recipients)
        who, stamp = f"sent {hf.label(headers)} to {waiting_for}", hf.CREATED_AT
    return f"{who} ({hf.short_time(headers.get(stamp, ''))})", waiting_for


def latest_report(role: Role, ident: str) -> str:
    """The newest report on `ident` in words (`RUNNING 2026-06-15 14:05Z: <first line>`),
    its head read as the scan reads a card's."""
    paths = reports.report_paths(role.handoffs, ident) if ident else []
    head = reports.head(paths[-1]) if paths else None  # pruned since, or unreadable: none
    if head is None:
        return ""
    first = f": {head.first_line}" if head.first_line else ""
    return f"{head.status} {hf.short_time(head.reported_at)}{first}"
