"""The swarm's numbers' test helpers: copies laid with the stamps of a known life, the
daemon's log lines that count, and the exposition read back with prometheus-client's own
parser (never a parser of ours)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from handoffd.core import handoff as hf
from testbed import Project, handoff_id, queued, stamped, write

OPERATOR = ".swarmforge/operator/handoffs"  # the operator's mailbox, under the project root
Key = tuple[str, frozenset[tuple[str, str]]]
HOUR = 3600.0
BOX = {"new": "inbox/new", "in_process": "inbox/in_process", "completed": "inbox/completed"}


def lay(
    project: Project,
    sender: str,
    role: str,
    state: str,
    enqueued: float,
    dequeued: float | None = None,
    completed: float | None = None,
    pickup: float = 0.004,
    folder: Path | None = None,
    **extra: str,
) -> Path:
    """A copy of a new handoff from `sender` to `role`, in `state`, stamped as the daemon
    and the helpers stamp one: created `pickup` seconds before it was enqueued (in the
    `folder` given, else `role`'s handoff directory)."""
    seq = project.next_sequence()
    ident = handoff_id(sender, seq, enqueued - pickup)
    body = "Re-read your role and constitution.\n\nwork\n"
    name, handoff = queued(ident, sender, [role], body, ("type", "note"),
                           ("message", f"job {seq}"), when=enqueued - pickup)  # fmt: skip
    copy = stamped(handoff, role, enqueued)
    for key, at in (("dequeued_at", dequeued), ("completed_at", completed)):
        if at is not None:
            copy.set(key, hf.iso_now(at))
    for key, value in extra.items():
        copy.set(key, value)
    path = (folder or project.handoffs(role)) / BOX[state] / name
    write(path, copy.render())
    return path


def log(project: Project, *events: dict[str, Any]) -> None:
    """Append the daemon's log lines (each with its `timestamp`, now unless given)."""
    path = project.root / ".swarmforge" / "daemon" / "handoffd.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as file:
        for event in events:
            line = {"timestamp": hf.iso_now(), "level": "info", **event}
            file.write(json.dumps(line) + "\n")


def worked(project: Project, now: float) -> dict[str, int]:
    """A known day's work: coder sent cleaner and QA copies now waiting, taken and done
    over the last hours; the log holds two refusals of coder's, wake-ups and a forced one.
    Returns what the counters must say."""
    for hours in (1, 2, 3, 5, 8):  # cleaner completed five: waits 60 s, work 10 min
        start = now - hours * HOUR
        lay(project, "coder", "cleaner", "completed", start, start + 60, start + 660)
    lay(project, "coder", "QA", "completed", now - 4 * HOUR, now - 4 * HOUR + 30, now - HOUR)
    lay(project, "coder", "QA", "in_process", now - 600, now - 300)
    lay(project, "coder", "QA", "new", now - 120)
    lay(project, "QA", "coder", "new", now - 90, blocked_reason="needs a password")
    log(project,
        {"event": "failed", "file": "x.handoff", "sender": "coder", "reason": "Unknown recipient."},
        {"event": "failed", "file": "y.handoff", "sender": "coder", "reason": "Unknown recipient."},
        {"event": "wake", "role": "QA", "session": "QA", "refused": False, "submitted": True},
        {"event": "wake", "role": "QA", "session": "QA", "refused": False, "submitted": False},
        {"event": "wake", "role": "cleaner", "session": "c", "refused": False, "submitted": True,
         "forced": True},
        {"event": "wake", "role": "coder", "session": "coder", "refused": True,
         "submitted": True},
        {"event": "wake_failed", "role": "cleaner", "error": "no server",
         "refused": False})  # fmt: skip
    return {"delivered": 9, "taken": 7, "completed": 6, "refused": 2, "wakeups": 4}


def read(text: str) -> dict[Key, float]:
    """Every sample of an exposition, by name and labels (prometheus-client's parser)."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def families(text: str) -> dict[str, str]:
    """Each family's name (as the parser names it: a counter without `_total`) and type."""
    return {family.name: family.type for family in text_string_to_metric_families(text)}


def value(samples: dict[Key, float], name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def total(samples: dict[Key, float], name: str, **labels: str) -> float:
    """The sum of `name` over every sample carrying `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, given), v in samples.items() if n == name and wanted <= given)


def settle(root: Path) -> None:
    """Date every folder a minute back, as on a board that has been running a while."""
    past = time.time() - 60
    for folder, _, _ in os.walk(root):
        os.utime(folder, (past, past))


def day(project: Project, now: float) -> None:
    """A busy day for the charts: `worked`, and QA done with one to three copies an hour
    over the last 24, its waits and work growing through the day."""
    worked(project, now)
    for hour in range(24):
        for n in range(1 + hour % 3):
            start = now - (24 - hour) * HOUR + n * 600 + 60
            lay(project, "coder", "QA", "completed", start, start + 20 + hour * 30,
                start + 120 + hour * 60)  # fmt: skip
