"""`handoffd init` with `nats` configured: the stream and the bucket, made if missing, and
a plain word when the server's acknowledgement is weaker than handoffd's own fsync."""

from __future__ import annotations

from nats.aio.client import Client
from nats.js import api
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


class Prepared:
    """What `prepare` made, and what it warns about."""

    def __init__(self) -> None:
        self.changes: list[str] = []
        self.warnings: list[str] = []


def cluster_size(nc: Client) -> int:
    """How many servers the connected cluster has (1 for a server alone), from its INFO."""
    info = nc._server_info
    if not info.get("cluster"):
        return 1
    return max(len(set(info.get("connect_urls") or [])), 1)


def prepare(network: Network) -> Prepared:
    """Make the stream and the bucket if missing; raises `ConnectionError` (`nats: …`)
    when the servers cannot be reached or refuse."""

    async def work(nc: Client) -> Prepared:
        try:
            return await _prepare(nc, network)
        except Exception as error:
            raise ConnectionError(link.describe(error)) from None

    return link.once(network, work)


async def _prepare(nc: Client, network: Network) -> Prepared:
    js = nc.jetstream(timeout=link.REQUEST_TIMEOUT)
    replicas = min(cluster_size(nc), REPLICAS_CAP)
    done = Prepared()
    try:
        info = await js.stream_info(network.stream)
        replicas = info.config.num_replicas or 1
    except NotFoundError:
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
        done.changes.append(f"NATS stream {network.stream} ({replicas} replica(s))")
    try:
        await js.key_value(network.bucket)
    except BucketNotFoundError:
        await js.create_key_value(
            bucket=network.bucket, storage=api.StorageType.FILE, replicas=replicas, history=1
        )
        done.changes.append(f"NATS key-value bucket {network.bucket}")
    if replicas < 2:
        done.warnings.append(SINGLE_SERVER.format(servers=network.describe()))
    return done
