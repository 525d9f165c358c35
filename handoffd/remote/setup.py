"""`handoffd init` with `nats` configured: the stream and the bucket, made if missing and
otherwise used as they are (never changed: other hosts use them), a refusal when the
stream cannot hold this swarm's mail as handoffd needs, and a plain word when the server's
acknowledgement is weaker than handoffd's own fsync."""

from __future__ import annotations

from nats.aio.client import Client
from nats.js import JetStreamContext, api
from nats.js.errors import BucketNotFoundError, NotFoundError

from handoffd.remote import link
from handoffd.remote.settings import DUPLICATE_WINDOW, Network

REPLICAS_CAP = 3
SINGLE_SERVER = (
    "WARNING: {servers} is a single NATS server: its acknowledgement is as durable as "
    "handoffd's own fsync only if it runs with `sync_interval: always` in its jetstream "
    "block (the default flushes every 2 minutes); or run a three-server cluster, which "
    "replicates every copy three times (docs/operations.md, More than one machine)"
)
FEWER_REPLICAS = (
    "WARNING: the NATS stream {stream} keeps {replicas} replica(s) of each copy where this "
    "cluster allows {wanted}; init changes no stream other hosts use: raise it with "
    "`nats stream edit {stream} --replicas {wanted}`"
)
MADE_DIFFERENTLY = (
    "the NATS stream {stream} already exists but {what}; init changes no stream other hosts "
    "use: give this swarm a `project` name of its own in swarmforge.conf, or, if nothing "
    "waits in that stream, remove it (`nats stream rm {stream}`) and run `handoffd init` again"
)


class Prepared:
    """What `prepare` made, and what it warns about."""

    def __init__(self) -> None:
        self.changes: list[str] = []
        self.found: list[str] = []  # what existed already, used as it is
        self.warnings: list[str] = []
        self.problem: str | None = None  # the stream cannot be used: nothing was made

    def found_line(self) -> str | None:
        """One line for what existed already (on every host's init but the first)."""
        if not self.found:
            return None
        them = "they are (they already existed)" if self.found[1:] else "it is (it already existed)"
        return f"using the NATS {' and '.join(self.found)} as {them}"


def cluster_size(nc: Client) -> int:
    """How many servers the connected cluster has (1 for a server alone), from its INFO."""
    info = nc._server_info
    if not info.get("cluster"):
        return 1
    return max(len(set(info.get("connect_urls") or [])), 1)


def differences(config: api.StreamConfig, network: Network) -> list[str]:
    """How an existing stream stores mail otherwise than handoffd needs, each said as
    `<what> <it has>, not <needed>`; empty when it will do."""
    found = []
    if network.subjects not in (config.subjects or []):
        found.append(f"stores {', '.join(config.subjects or []) or 'no subject'}, not "
                     f"{network.subjects}")  # fmt: skip
    if config.retention != api.RetentionPolicy.WORK_QUEUE:
        found.append(f"has {_word(config.retention)} retention, not workqueue")
    if config.storage != api.StorageType.FILE:
        found.append(f"has {_word(config.storage)} storage, not file")
    return found


def _word(value: object) -> str:
    return str(getattr(value, "value", value))


def prepare(network: Network) -> Prepared:
    """Make the stream and the bucket if missing, check the stream if not; raises
    `ConnectionError` (`nats: …`) when the servers cannot be reached or refuse."""

    async def work(nc: Client) -> Prepared:
        try:
            return await _prepare(nc, network)
        except Exception as error:
            raise ConnectionError(link.describe(error)) from None

    return link.once(network, work)


async def _prepare(nc: Client, network: Network) -> Prepared:
    js = nc.jetstream(timeout=link.REQUEST_TIMEOUT)
    wanted = min(cluster_size(nc), REPLICAS_CAP)
    done = Prepared()
    try:
        info = await js.stream_info(network.stream)
    except NotFoundError:
        await _make_stream(js, network, wanted)
        done.changes.append(f"NATS stream {network.stream} ({wanted} replica(s))")
        replicas = wanted
    else:
        replicas = _check_stream(info.config, network, wanted, done)
        if done.problem:
            return done
    try:
        await js.key_value(network.bucket)
        done.found.append(f"key-value bucket {network.bucket}")
    except BucketNotFoundError:
        await js.create_key_value(
            bucket=network.bucket, storage=api.StorageType.FILE, replicas=replicas, history=1
        )
        done.changes.append(f"NATS key-value bucket {network.bucket}")
    if replicas < 2 and wanted < 2:
        done.warnings.append(SINGLE_SERVER.format(servers=network.describe()))
    return done


async def _make_stream(js: JetStreamContext, network: Network, replicas: int) -> None:
    # A work queue: each copy is kept until the one consumer whose filter has its role
    # (that role's host) acknowledges it, however long that host is away.
    await js.add_stream(
        name=network.stream,
        subjects=[network.subjects],
        retention=api.RetentionPolicy.WORK_QUEUE,
        storage=api.StorageType.FILE,
        num_replicas=replicas,
        duplicate_window=DUPLICATE_WINDOW,
    )


def _check_stream(config: api.StreamConfig, network: Network, wanted: int, done: Prepared) -> int:
    """Another host's init made the stream: used as it is, or refused (`done.problem`) if it
    cannot hold this swarm's mail; its replicas."""
    what = differences(config, network)
    replicas = config.num_replicas or 1
    if what:
        done.problem = MADE_DIFFERENTLY.format(stream=network.stream, what="; ".join(what))
        return replicas
    done.found.append(f"stream {network.stream} ({replicas} replica(s))")
    if replicas < wanted:
        done.warnings.append(
            FEWER_REPLICAS.format(stream=network.stream, replicas=replicas, wanted=wanted)
        )
    return replicas
