"""The NATS connection, on an asyncio loop of its own in a background thread.

The daemon's pass is synchronous and must never wait on the network: everything it asks
of NATS is handed to this loop (`submit`) and comes back as a `concurrent.futures.Future`
whose completion pokes the daemon, so a slow or absent server costs a pass nothing.  The
loop connects, reconnects forever with backoff, and keeps the pull consumer of this host's
local roles fetching into a hand-over queue the daemon empties.

The remote package, and with it the NATS client, is imported only when a project's
configuration names NATS servers.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import ssl
import threading

import nats
import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api

from handoffd.remote import held
from handoffd.remote.settings import ACK_WAIT, Network

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from typing import Any, TypeVar

    from structlog.typing import FilteringBoundLogger

    T = TypeVar("T")

CONNECT_TIMEOUT = 2.0  # seconds for one attempt at one server
RECONNECT_WAIT = 0.5  # seconds between attempts, and the first pause before another round
REQUEST_TIMEOUT = 5.0  # seconds for one publish's acknowledgement or one API request
FETCH_BATCH = 64  # messages per pull: one batch of copies costs one new/ flush per role
FETCH_WAIT = 1.0  # seconds a pull waits on the server for messages
# Pulls failed in a row (one every RECONNECT_WAIT or so) before the consumer is made again:
# a cluster takes up to ~9 s to elect a new leader for it after its leader died, and a
# request sent to make it meanwhile can wait out its whole timeout. A consumer really gone
# (deleted, its store lost) is made again after that long.
REMAKE_AFTER = 20
MAX_ACK_PENDING = 1000  # messages handed to this host not yet acknowledged, at most


class Link:
    """One project's connection to its NATS servers, run on a background thread."""

    def __init__(
        self,
        network: Network,
        log: FilteringBoundLogger,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.network = network
        self.log = log
        self.on_change = on_change  # called from the loop's thread: a reply or a message
        self.generation = 0  # counts connections made: a new one makes deferred mail due
        self.received: collections.deque[Msg] = collections.deque()
        self.loop = asyncio.new_event_loop()
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._thread = threading.Thread(target=self._run, name="nats", daemon=True)
        self._closed = False
        self._subjects: tuple[str, ...] = ()
        self._consuming: asyncio.Task[None] | None = None
        self._room: asyncio.Event | None = None
        self._quiet = False  # an unreachable server was logged: not again until connected
        self.problem = ""  # why the servers cannot be reached now, in a person's words
        self.down_since: float | None = None  # since when (the wall clock), while they cannot
        self.tried = False  # a first connection was made or failed: the state is known
        self.empty_pulls = 0  # pulls that brought nothing since the last batch handed over
        self.draining = False  # `run --once`: an empty pull pokes the daemon too

    # --- life ----------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        self.submit(self._connect_forever())

    def close(self, timeout: float = 2.0) -> None:
        """Stop fetching, close the connection and the loop's thread; never raises."""
        if self._closed:
            return
        self._closed = True
        try:
            self.submit(self._close()).result(timeout)
        except Exception:  # a wedged connection must not keep the daemon from stopping
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)

    @property
    def connected(self) -> bool:
        nc = self._nc
        return nc is not None and nc.is_connected

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coroutine` on the loop; its future pokes the daemon when it completes."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        future.add_done_callback(lambda _: self.on_change())
        return future

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    async def _close(self) -> None:
        if self._consuming is not None:
            self._consuming.cancel()
        if self._nc is not None:
            try:  # the last acknowledgements reach the server: no redelivery after a stop
                await asyncio.wait_for(self._nc.flush(), 1.0)
            except Exception:
                pass
            try:
                await asyncio.wait_for(self._nc.close(), 1.0)
            except Exception:
                pass

    # --- connecting ------------------------------------------------------------------

    async def _connect_forever(self) -> None:
        """Connect; nats-py itself keeps trying every server, then reconnects after any
        loss, for as long as the daemon runs."""
        try:
            self._nc = await nats.connect(**connect_options(self.network, self._events()))
        except Exception as error:  # only when closed meanwhile
            self.log.warning("nats_unreachable", servers=self.network.describe(),
                             error=describe(error))  # fmt: skip
            return
        self._js = self._nc.jetstream(timeout=REQUEST_TIMEOUT)
        await self._connected()

    def _events(self) -> dict[str, Any]:
        async def disconnected() -> None:
            if not self._closed:
                self.log.warning("nats_disconnected", servers=self.network.describe())
                self._down("disconnected")

        async def reconnected() -> None:
            await self._connected()

        async def error(problem: Exception) -> None:
            self._down(unreachable_why(problem))
            # once per outage: a server that stays away is retried every RECONNECT_WAIT
            if not self._quiet:
                self._quiet = True
                self.log.warning("nats_unreachable", servers=self.network.describe(),
                                 error=describe(problem))  # fmt: skip

        return {"disconnected_cb": disconnected, "reconnected_cb": reconnected, "error_cb": error}

    def _down(self, why: str) -> None:
        """The servers cannot be reached now (`why`): said to the daemon at once, which
        keeps it for `status` (`held.py`)."""
        import time

        changed = (self.problem, self.tried) != (why, True)
        self.problem, self.tried = why, True
        self.down_since = self.down_since or time.time()
        if changed:
            self.on_change()

    def status(self) -> held.Link:
        """The link as the views say it: connecting, up, or down with why and since when."""
        if self.connected:
            return held.Link(held.UP)
        if not self.tried:
            return held.Link(held.CONNECTING)
        return held.Link(held.DOWN, self.problem or "disconnected", self.down_since)

    async def _connected(self) -> None:
        self.problem, self.down_since, self.tried = "", None, True
        self._quiet = False
        self.generation += 1
        url = self._nc.connected_url if self._nc is not None else None
        self.log.info("nats_connected", server=url.netloc if url else None)
        self.on_change()

    def jetstream(self) -> JetStreamContext:
        if self._js is None or not self.connected:
            raise ConnectionError(f"nats: not connected to {self.network.describe()}")
        return self._js

    # --- sending ---------------------------------------------------------------------

    async def publish(self, subject: str, data: bytes, msg_id: str, name: str) -> api.PubAck:
        """Store one copy in the stream, once (the stream drops a repeated `msg_id`)."""
        headers = {"Nats-Msg-Id": msg_id, "Handoffd-Name": name}
        return await self.jetstream().publish(
            subject, data, timeout=REQUEST_TIMEOUT, stream=self.network.stream, headers=headers
        )

    async def put(self, bucket: str, key: str, value: bytes) -> int:
        kv = await self.jetstream().key_value(bucket)
        return await kv.put(key, value)

    # --- receiving -------------------------------------------------------------------

    def consume(self, subjects: list[str]) -> None:
        """Fetch the messages of `subjects` (this host's local roles) from now on."""
        wanted = tuple(sorted(subjects))
        if wanted != self._subjects:
            self._subjects = wanted
            self.loop.call_soon_threadsafe(self._restart_consuming)

    def drained(self) -> bool:
        """Whether nothing waits for this host's roles: a pull came back empty since the
        last batch was handed over and taken (or there is nothing to pull for)."""
        return not self._subjects or (self.empty_pulls > 0 and not self.received)

    def taken(self) -> None:
        """The daemon emptied `received`: the loop may fetch the next batch."""
        self.loop.call_soon_threadsafe(self._make_room)

    def ack(self, message: Msg) -> None:
        """Acknowledge a message (fire and forget: a lost ack is a redelivery the
        recipient's duplicate check absorbs)."""
        self.submit(_quietly(message.ack()))

    def nak(self, message: Msg, delay: float) -> None:
        """Have the server send a message again in `delay` seconds (it could not be written
        now; fire and forget: a lost nak is a redelivery after the ack wait)."""
        self.submit(_quietly(message.nak(delay=delay)))

    def term(self, message: Msg) -> None:
        """Tell the server never to redeliver a message no daemon can use."""
        self.submit(_quietly(message.term()))

    def _make_room(self) -> None:
        if self._room is not None:
            self._room.set()

    def _restart_consuming(self) -> None:
        if self._consuming is not None:
            self._consuming.cancel()
        self._consuming = None
        if self._subjects and not self._closed:
            self._consuming = self.loop.create_task(self._consume(self._subjects))

    async def _consume(self, subjects: tuple[str, ...]) -> None:
        """Keep fetching for `subjects`; each batch waits until the last one was taken.

        One subscription (one reply inbox) for the task's whole life: the client subscribes
        it again after every reconnection, and every pull request this loop ever sent names
        it, so whatever the servers answer (a request buffered through an outage, one left
        lingering when a fetch gave up) lands where the next fetch takes it. A fresh inbox
        would leave those answers with nobody, and their messages would wait out the ack
        wait (`ACK_WAIT`) before the server sent them again."""
        self._room = asyncio.Event()
        self._room.set()
        pulls = _Pulls()
        try:
            while not self._closed:
                await self._room.wait()
                messages = await self._fetch(subjects, pulls)
                if messages:
                    self._room.clear()
                    self.empty_pulls = 0
                    self.received.extend(messages)
                    self.on_change()
                elif messages is not None:  # nothing came: a timeout, or a status (408, 409)
                    self.empty_pulls += 1
                    if self.draining:
                        self.on_change()
        finally:  # the subjects changed, or the link closes: this inbox is done with
            if pulls.subscription is not None:
                await _quietly(pulls.subscription.unsubscribe())

    async def _fetch(self, subjects: tuple[str, ...], pulls: _Pulls) -> list[Msg] | None:
        """One pull for the next batch: what it brought ([] when nothing came), or None when
        no pull could be made."""
        if not self.connected:
            # a pull now would wait in the client's reconnect buffer, to be answered only
            # after the reconnection, when no fetch waits for it any more
            await asyncio.sleep(RECONNECT_WAIT)
            return None
        try:
            if not pulls.made or pulls.failures >= REMAKE_AFTER:
                pulls.made = False
                await asyncio.wait_for(self._ensure_consumer(subjects), 2 * REQUEST_TIMEOUT)
                pulls.made, pulls.failures = True, 0
            if pulls.subscription is None:
                pulls.subscription = await self._bind()
            fetch = pulls.subscription.fetch(FETCH_BATCH, timeout=FETCH_WAIT)
            messages = await asyncio.wait_for(fetch, FETCH_WAIT + REQUEST_TIMEOUT)
        except (TimeoutError, nats.errors.TimeoutError):
            return [] if pulls.made else None  # the pull timed out; or making the consumer did
        except asyncio.CancelledError:
            raise
        except Exception as error:  # no consumer leader: one being elected, or none at all
            if self.connected:
                self.log.warning("nats_fetch_failed", error=describe(error))
            # pulling again is what finds a new leader first: a request to make the consumer
            # sent now could wait its whole timeout on the leader that is gone
            pulls.failures += 1
            await asyncio.sleep(RECONNECT_WAIT)
            return None
        pulls.failures = 0
        return messages

    async def _ensure_consumer(self, subjects: tuple[str, ...]) -> None:
        """The durable consumer `<project>-<host>`, made or brought up to date."""
        network = self.network
        consumer = api.ConsumerConfig(
            durable_name=network.consumer,
            ack_policy=api.AckPolicy.EXPLICIT,
            deliver_policy=api.DeliverPolicy.ALL,
            ack_wait=ACK_WAIT,
            max_ack_pending=MAX_ACK_PENDING,
            filter_subjects=list(subjects),
        )
        await self.jetstream().add_consumer(network.stream, consumer)

    async def _bind(self) -> JetStreamContext.PullSubscription:
        """The subscription pulls for the consumer are answered on (no server request)."""
        return await self.jetstream().pull_subscribe_bind(
            self.network.consumer, self.network.stream
        )


class _Pulls:
    """What a consuming task keeps between fetches."""

    def __init__(self) -> None:
        self.subscription: JetStreamContext.PullSubscription | None = None
        self.made = False  # the consumer made (or found up to date) by this task
        self.failures = 0  # pulls failed in a row


async def _quietly(coroutine: Coroutine[Any, Any, None]) -> None:
    try:
        await coroutine
    except Exception:  # the connection went: the server redelivers, the duplicate is dropped
        pass


def connect_options(network: Network, events: dict[str, Any] | None = None) -> dict[str, Any]:
    """`nats.connect`'s arguments: every server of the cluster, reconnecting forever, the
    credentials and CA the configuration names."""
    options: dict[str, Any] = {
        "servers": network.urls,
        "name": f"handoffd {network.project}@{network.here}",
        "connect_timeout": CONNECT_TIMEOUT,
        "reconnect_time_wait": RECONNECT_WAIT,
        "max_reconnect_attempts": -1,
        "allow_reconnect": True,
        **(events or {}),
    }
    if network.creds:
        options["user_credentials"] = network.creds
    if network.tls_ca:
        options["tls"] = ssl.create_default_context(cafile=network.tls_ca)
    return options


def unreachable_why(error: BaseException) -> str:
    """Why a server cannot be reached, in a person's words: `connection refused`, `timed
    out`, `no server answered`, else the client's own line."""
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, asyncio.TimeoutError | nats.errors.TimeoutError | TimeoutError):
        return "timed out"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    return describe(error).removeprefix("nats: ")


def describe(error: BaseException) -> str:
    """An error in one line that says it came from NATS: `nats: <what>`."""
    text = str(error).strip() or type(error).__name__
    if isinstance(error, nats.errors.NoServersError):
        text = "no server answered"
    elif isinstance(error, nats.errors.NoRespondersError):
        text = "no JetStream stream answered (run `handoffd init` to create it)"
    elif isinstance(error, asyncio.TimeoutError | nats.errors.TimeoutError):
        text = "timed out"
    text = text.removeprefix("nats: ")
    return f"nats: {text.splitlines()[0]}"


def once(network: Network, work: Callable[[Client], Coroutine[Any, Any, T]]) -> T:
    """Connect once (no retries), run `work`, close: for a command, not the daemon.
    Raises `ConnectionError` with a `nats: …` line if the servers cannot be reached."""

    async def run() -> T:
        async def quiet(_: Exception) -> None:
            pass

        # each server tried twice, then NoServersError (0 would mean "for ever")
        options = connect_options(network, {"error_cb": quiet})
        options.update(max_reconnect_attempts=1, reconnect_time_wait=0.1)
        try:
            nc = await nats.connect(**options)
        except Exception as error:
            raise ConnectionError(describe(error)) from None
        try:
            return await work(nc)
        finally:
            await nc.close()

    return asyncio.run(run())
