"""The web board's test helpers: a project with a card of every colour, and the real
server (uvicorn on an ephemeral loopback port, in a thread of the test process)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn

from handoffd.queue import heartbeat, reports
from handoffd.web.app import create_app
from tests.conftest import Project

PAST = "2026-01-01T00:00:00Z"


def name(n: int, to: str, sender: str = "coder") -> str:
    return f"50_20260101T000000Z_{n:06d}_from_{sender}_to_{to}.handoff"


def ident(n: int, sender: str = "coder") -> str:
    return f"20260101T000000Z_{n:06d}_from_{sender}"


def put(project: Project, n: int, role: str, box: str = "inbox/new", **headers: str) -> Path:
    """A delivered copy of handoff `n` from coder in `role`'s `box`."""
    fields = {"id": ident(n), "to": role, "recipient": role, "enqueued_at": PAST,
              "task": f"task-{n}", **headers}  # fmt: skip
    return project.put(role, name(n, role), box=box, **fields)


def report(project: Project, n: int, role: str, status: str, text: str, at: float) -> str:
    """Store a report from `role` on handoff `n`, as `handoffd report` does."""
    handoffs = str(project.handoffs(role))
    return reports.store(handoffs, ident(n), status, role, f"agent-{role}", "", text, at)


def colourful(project: Project) -> dict[str, str]:
    """One project with every colour, reports and dependencies; the cards by role in it:
    1 red (blocked) @QA; 2 yellow (in process, fresh heartbeat, two reports) @cleaner;
    3 orange @QA, depending on 5; 4 orange (a note) @coder; 5 green (completed) @QA;
    6 red by inheritance from 1 @coder."""
    put(project, 1, "QA", blocked_reason="needs the staging password")
    put(project, 2, "cleaner", box="inbox/in_process/batch_20260101T000000Z_000001")
    heartbeat.renew(str(project.handoffs("cleaner")), "codex", "conv-7")
    put(project, 3, "QA", depends_on=ident(5))
    put(project, 4, "coder", message="please rebase")
    put(project, 5, "QA", box="inbox/completed", completed_at=PAST)
    put(project, 6, "coder", depends_on=ident(1))
    now = time.time()
    report(project, 2, "cleaner", "RUNNING", "Started on the **parser**.", now - 600)
    report(project, 2, "cleaner", "RUNNING", "Half way:\n\n- lexer done\n- `parse()` next", now)
    return {
        "red": f"{ident(1)}@QA",
        "yellow": f"{ident(2)}@cleaner",
        "orange": f"{ident(3)}@QA",
        "orange-note": f"{ident(4)}@coder",
        "green": f"{ident(5)}@QA",
        "inherited": f"{ident(6)}@coder",
    }


KEY = "k" * 32  # the board's key in tests that act (a real one is random)


@contextmanager
def serving(
    root: Path | str,
    clock: Callable[[], float] = time.time,
    key: str | None = None,
    writable: bool = True,
) -> Iterator[str]:
    """Serve the board of `root` on 127.0.0.1:<free port> until the block ends; with a
    `key`, an operator holding it acts through the forms (unless not `writable`)."""
    from handoffd.adapters.web import Actions

    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    actions = Actions(str(root), by="ann") if key else None
    app = create_app(str(root), clock=clock, port=port, actions=actions, key=key,
                     writable=writable)  # fmt: skip
    config = uvicorn.Config(app, lifespan="off", log_level="warning",
                            timeout_graceful_shutdown=1)  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the board did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
