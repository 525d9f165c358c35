"""Power loss on the receiving side of §15 (docs/protocol.md §15, "Receiving", "Exactly once
across hosts"): every state a power cut may leave while a daemon writes copies that came
from another host, and acknowledges them, is recovered with every copy exactly once.

The run, recorded by the explorer of tests/test_power_loss.py (crashtrace.py records,
crashstates.py builds the states), on host b of a swarm whose stream holds two copies for
its role cleaner (published as host a's daemon does): b's daemon receives both on its first
run (`daemon/` and cleaner's `new/` made then); a peer publishes a third copy, and the first
one again under another id (a redelivery the stream could not drop); b's daemon receives
those in steady state, the last as a duplicate of the copy it holds.

What the daemon told the server before the cut is read from the run's own sends (`told`):
the acknowledgements it sent stay sent whatever the disk loses.  Each state is recovered the
way a reboot goes: the stream holds what was published and not acknowledged by then (laid
out afresh in a stream of its own, since the server's state is not the disk's), b's daemon
runs once, cleaner works through its inbox; and once more with cleaner taking what it sees
before the daemon restarts.  Before recovery, a copy the daemon had acknowledged must be in
cleaner's inbox, whole (a cut between the copy's rename and its acknowledgement may lose the
copy only while it is unacknowledged: the redelivery then writes it again).  After, every
copy published is completed by cleaner exactly once, whole; nothing is left unacknowledged,
refused or deferred; no temp file is left.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import sys
from pathlib import Path

import pytest

from handoffd.core import handoff as hf
from handoffd.remote import settings, setup
from handoffd.remote.server import Server
from tests import crashstates, crashtrace, shards
from tests.crashtrace import Op, Recording, Step
from tests.fault_support import strace_problem
from tests.nats_support import consumer_state, nats_fixture, project_name, publish_raw
from tests.test_power_loss import command, drain, env, explored, files_of
from tests.test_remote_receive import copy

nats_server = nats_fixture()

ROLE = "cleaner"
COPIES = [copy(1, message="first"), copy(2, message="second"), copy(3, message="third")]
# (name, bytes, message id) in the order the stream stores them: two before the run, then
# the third and the first again (another id: a sender that published it twice, say)
MESSAGES = [(name, data, f"{hf.name_id(name)}@{ROLE}#{n}") for n, (name, data) in
            enumerate([*COPIES, COPIES[0]])]  # fmt: skip
BEFORE = 2  # published before the run
CONF = """project {project}
nats {url}
host a
window coder shell master task
host b
window cleaner shell cleaner task
"""


def lay_out(root: Path, project: str, url: str) -> None:
    """Host b of the swarm, as `handoffd init --host b` leaves it, without git or tmux."""
    swarmforge = root / ".swarmforge"
    (root / "wt" / ROLE).mkdir(parents=True)
    swarmforge.mkdir(parents=True, exist_ok=True)
    (swarmforge / "swarmforge.conf").write_text(CONF.format(project=project, url=url))
    (swarmforge / "host").write_text("b\n")
    (swarmforge / "roles.tsv").write_text(
        "#handoffd-roles 2 hosts=a,b\n"
        f"coder\tmaster\t{swarmforge}/remote/a/coder\tcoder\tCoder\tshell\ttask\ta\n"
        f"{ROLE}\t{ROLE}\t{root}/wt/{ROLE}\t{ROLE}\tCleaner\tshell\ttask\n"
    )


def publish(root: Path, messages: list[tuple[str, bytes, str]]) -> None:
    network = settings.load(str(root))
    assert network is not None
    publish_raw(network.urls[0], network.stream,
                [(network.subject(ROLE), data, {"Nats-Msg-Id": ident, "Handoffd-Name": name})
                 for name, data, ident in messages])  # fmt: skip


PUBLISH = """
import sys
from pathlib import Path
from tests.test_power_loss_receive import MESSAGES, BEFORE, publish
publish(Path(sys.argv[1]), MESSAGES[BEFORE:])
"""


def told(ops: list[Op]) -> tuple[int, frozenset[int]]:
    """What the run had told the server before a cut: how many copies the stream held
    (the later two once the publishing step began), and which stream sequences the daemon
    had acknowledged (each ack it sent to a `$JS.ACK.…` subject names one: an empty
    payload, as nats-py sends it, or `+ACK`; `-NAK`, `+TERM` and `+WPI` are none)."""
    from nats.aio.msg import Msg

    published = len(MESSAGES) if any(o.kind == "began" and o.step >= 1 for o in ops) else BEFORE
    sent: dict[str, bytes] = {}
    for op in ops:
        if op.kind == "sent":
            sent[op.what] = sent.get(op.what, b"") + op.data
    acked = set()
    for data in sent.values():  # one connection's bytes, in order
        for frame in re.finditer(rb"PUB (\$JS\.ACK\.\S+) +(?:\S+ +)?(\d+)\r\n", data):
            if data[frame.end() : frame.end() + int(frame[2])] in (b"", b"+ACK"):  # both ack
                acked.add(Msg.Metadata._from_reply(frame[1].decode()).sequence.stream)
    return published, frozenset(acked)


class AfterAReceive(crashstates.Recovery):
    """A reboot of host b: the stream holds what was published and not acknowledged before
    the cut; b's daemon runs once; cleaner works through its inbox."""

    name = "daemon first"
    take_first = False
    _streams = itertools.count()

    def __init__(self, url: str) -> None:
        self.url = url

    def __call__(self, base: str, moved: crashstates.Moved, told: object = None) -> list[str]:
        assert isinstance(told, tuple)
        published, acked = told
        root = Path(base) / "proj"
        if self.take_first and not taken_first(root):
            return []  # nothing to take before the daemon: the daemon-first recovery, again
        network = self._stream(root)
        held = inbox(root)
        problems = [f"{name} was acknowledged, but after the cut it is not in the inbox whole"
                    for n, (name, data, _) in enumerate(MESSAGES[:published], 1)
                    if n in acked and data not in held.get(name, [])]  # fmt: skip
        waiting = [m for n, m in enumerate(MESSAGES[:published], 1) if n not in acked]
        try:
            publish(root, waiting)
            problems += self._recover(root)
            left = consumer_state(self.url, network.stream, network.consumer)
            if left != (0, 0):
                problems.append(f"the stream still waits on b (pending, unacknowledged): {left}")
        finally:
            _drop(network)
        return problems + audit(root, {name for name, _, _ in MESSAGES[:published]})

    def _stream(self, root: Path) -> settings.Network:
        """A stream of its own for this recovery, holding nothing yet."""
        name = f"{project_name()}r{os.getpid()}x{next(self._streams)}"
        conf = root / ".swarmforge" / "swarmforge.conf"
        conf.write_text(CONF.format(project=name, url=self.url))
        network = settings.load(str(root))
        assert network is not None
        setup.prepare(network)
        return network

    def _recover(self, root: Path) -> list[str]:
        problems = []
        cwd = str(root / "wt" / ROLE)
        if self.take_first:
            taken = crashstates.run(command("ready_for_next"), cwd, env(ROLE))
            problems += taken.problems(f"{ROLE}: ready_for_next", ok=(0,))
        daemon = crashstates.run(command("handoffd", "run", "--once", str(root)), str(root),
                                 env(), timeout=30)  # fmt: skip
        problems += daemon.problems("handoffd run --once", ok=(0,))
        return problems + drain(str(root), ROLE)


class TakenFirst(AfterAReceive):
    """As `AfterAReceive`, cleaner taking what it sees before the daemon restarts: a copy
    written again would then be a second one."""

    name = "cleaner first"
    take_first = True


def taken_first(root: Path) -> bool:
    """Whether cleaner sees a copy in `new/` to take before the daemon restarts."""
    new = root / "wt" / ROLE / ".swarmforge" / "handoffs" / "inbox" / "new"
    return any(hf.is_item(name) for name in (os.listdir(new) if new.is_dir() else []))


def inbox(root: Path) -> dict[str, list[bytes]]:
    """The bytes of each copy in cleaner's inbox, by name (batch folders included)."""
    found: dict[str, list[bytes]] = {}
    for path in files_of(str(root / "wt" / ROLE / ".swarmforge" / "handoffs" / "inbox")):
        found.setdefault(os.path.basename(path), []).append(Path(path).read_bytes())
    return found


def audit(root: Path, published: set[str]) -> list[str]:
    """Each copy published is completed once, whole; nothing else is in the inbox; no temp
    file is left; the daemon neither refused nor deferred anything."""
    problems = []
    completed = root / "wt" / ROLE / ".swarmforge" / "handoffs" / "inbox" / "completed"
    done = {os.path.basename(p): p for p in files_of(str(completed))}
    for name, data in COPIES:
        if name not in published:
            continue
        if name not in done:
            problems.append(f"{name}: not completed")
            continue
        copy = hf.read(done[name])
        if copy.body != hf.parse(data, name).body or not copy.get("completed_at"):
            problems.append(f"{name}: completed, but not whole")
    others = sorted(set(inbox(root)) - published)
    if others:
        problems.append(f"in the inbox beside the copies published: {others}")
    problems += [f"hidden temp file left: {name}" for name in hidden(root / "wt" / ROLE)]
    log = root / ".swarmforge" / "daemon" / "handoffd.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    problems += [f"the daemon logged {event}" for event in ("remote_refused", "remote_deferred",
                                                             "renamed_on_arrival")
                 if f'"{event}"' in text]  # fmt: skip
    return problems


def hidden(folder: Path) -> list[str]:
    return [name for _, _, names in os.walk(folder) for name in names
            if name.startswith(".") and name.endswith(".tmp")]  # fmt: skip


def _drop(network: settings.Network) -> None:
    """Remove a recovery's stream and bucket (every recovery makes its own)."""
    import nats

    async def drop() -> None:
        nc = await nats.connect(network.urls)
        try:
            js = nc.jetstream()
            await js.delete_stream(network.stream)
            await js.delete_key_value(network.bucket)
        except Exception:
            pass
        finally:
            await nc.close()

    asyncio.run(drop())


@pytest.fixture(scope="module")
def receiving(tmp_path_factory: pytest.TempPathFactory, nats_server: Server) -> Recording:
    """The run, recorded once per session on the server of the worker that comes first
    (a recovery lays out a stream of its own on its worker's server: `AfterAReceive`)."""
    problem = strace_problem()
    if problem:
        pytest.skip(problem)
    return shards.shared(tmp_path_factory, "power-receiving",
                         lambda folder: record_in(folder, nats_server.url))  # fmt: skip


def record_in(folder: Path, url: str) -> Recording:
    base = folder / "r0000000"  # see crashstates._worker_start
    root = base / "proj"
    lay_out(root, project_name(), url)
    network = settings.load(str(root))
    assert network is not None
    setup.prepare(network)
    publish(root, MESSAGES[:BEFORE])
    traces = folder / "traces"
    traces.mkdir()
    repository = str(Path(__file__).resolve().parents[1])
    daemon = Step("b: handoffd run --once", command("handoffd", "run", "--once", str(root)),
                  str(root), env())  # fmt: skip
    peer = Step("a peer publishes two more", [sys.executable, "-c", PUBLISH, str(root)],
                repository, env())  # fmt: skip
    from tests.test_power_loss import ignored

    return crashtrace.record([daemon, peer, daemon], str(base), str(traces), ignored)


def test_the_receive_run_does_what_its_audit_relies_on(receiving: Recording) -> None:
    """Both runs wrote their copies and acknowledged every message; the second found the
    first copy's second message a duplicate."""
    published, acked = told(receiving.ops)
    assert (published, acked) == (len(MESSAGES), frozenset(range(1, len(MESSAGES) + 1)))
    made = [op.what for op in receiving.ops if op.kind == "link" and "/inbox/new/" in op.what]
    named = [name for name, _ in COPIES]
    assert [w.rsplit("/", 1)[1] for w in made if not w.rsplit("/", 1)[1].startswith(".")] == named
    syncs = [op.step for op in receiving.ops if op.kind == "sync"]
    assert 0 in syncs and 2 in syncs


@pytest.mark.slow  # each state's recovery runs a daemon against the server: ~1 s apiece
@shards.parametrize()
def test_a_power_cut_anywhere_in_receiving_loses_and_duplicates_no_copy(
    receiving: Recording, nats_server: Server, shard: tuple[int, int]
) -> None:
    # more workers than cores: a recovery mostly waits on the server (a pull that comes
    # back empty after a second ends each daemon run)
    explored(receiving, [AfterAReceive(nats_server.url), TakenFirst(nats_server.url)],
             told=told, workers=6, shard=shard)  # fmt: skip
