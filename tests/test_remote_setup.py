"""`handoffd init` with `nats` configured: the stream and the bucket, made if missing, and
the warning about a single server (docs/protocol.md §15)."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest

from handoffd.remote import settings, setup
from handoffd.remote.server import Server
from tests.nats_support import SWARM, handoffd, make_hosts, nats_fixture, project_name

nats_server = nats_fixture()


def stream_and_bucket(url: str, network: settings.Network) -> tuple[object, object]:
    import nats

    async def ask() -> tuple[object, object]:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            stream = await js.stream_info(network.stream)
            bucket = await js.stream_info(f"KV_{network.bucket}")
            return stream.config, bucket.config
        finally:
            await nc.close()

    return asyncio.run(ask())


def test_the_stream_is_named_after_the_project_upper_cased_with_underscores() -> None:
    network = settings.Network("my-swarm.2", ["nats://h:1"], "gpu", [])
    assert network.stream == "HANDOFFD_MY_SWARM_2"
    assert network.bucket == "handoffd_my-swarm.2_cards"
    assert network.subject("cleaner") == "handoffd.my-swarm.2.inbox.cleaner"
    assert network.consumer == "my-swarm.2-gpu"
    # the card, then what its bytes are: the first 16 hex digits of their SHA-256
    assert settings.msg_id("20260101T000000Z_000001_from_coder", "cleaner", b"a copy\n") == (
        "20260101T000000Z_000001_from_coder@cleaner#d0350f0bef26f46f"
    )


def test_init_creates_the_stream_and_the_bucket_on_file_storage_and_warns_of_one_server(
    tmp_path: Path, nats_server: Server
) -> None:
    name = project_name()
    root = tmp_path / "a"
    root.mkdir()
    (root / "swarm.conf").write_text(SWARM.format(project=name, urls=nats_server.url))
    done = handoffd("init", "--host", "a", "--config", str(root / "swarm.conf"), str(root))
    assert done.returncode == 0, done.stderr
    network = settings.load(str(root))
    assert network is not None
    assert f"created NATS stream {network.stream} (1 replica(s))" in done.stdout
    assert f"created NATS key-value bucket {network.bucket}" in done.stdout
    assert "cleaner (batch on b)" in done.stdout
    assert "is a single NATS server" in done.stderr
    assert "sync_interval: always" in done.stderr
    stream, bucket = stream_and_bucket(nats_server.url, network)
    assert stream.subjects == [f"handoffd.{name}.inbox.*"]  # type: ignore[attr-defined]
    assert stream.storage == "file"  # type: ignore[attr-defined]
    assert stream.retention == "workqueue"  # type: ignore[attr-defined]
    assert bucket.storage == "file"  # type: ignore[attr-defined]
    again = handoffd("init", str(root))
    assert again.returncode == 0, again.stderr
    assert "created" not in again.stdout
    assert "already up to date" in again.stdout


def init_host(root: Path, name: str) -> subprocess.CompletedProcess[str]:
    return handoffd("init", "--host", name, "--config", str(root / "swarm.conf"), str(root))


def test_init_on_a_second_host_says_in_one_line_it_uses_the_stream_and_bucket_as_they_are(
    tmp_path: Path, nats_server: Server
) -> None:
    (a,) = make_hosts(tmp_path, nats_server.url, names="a")
    network = settings.load(str(a.root))
    assert network is not None
    before = stream_and_bucket(nats_server.url, network)
    root = tmp_path / "b"
    root.mkdir()
    (root / "swarm.conf").write_text((a.root / "swarm.conf").read_text())
    done = init_host(root, "b")
    assert done.returncode == 0, done.stderr
    nats_lines = [line for line in done.stdout.splitlines() if "NATS" in line]
    assert nats_lines == [
        f"using the NATS stream {network.stream} (1 replica(s)) and key-value bucket "
        f"{network.bucket} as they are (they already existed)"
    ]
    assert "is a single NATS server" in done.stderr
    assert stream_and_bucket(nats_server.url, network) == before


def test_init_refuses_a_stream_of_that_name_made_otherwise_and_leaves_it_as_it_is(
    tmp_path: Path, nats_server: Server
) -> None:
    """Pins: a stream that would not keep this swarm's mail (another swarm's subjects,
    memory storage, limits retention) is an error naming each difference and how to fix
    it; nothing is changed or made, since other hosts may use that stream."""
    import nats
    from nats.js import api
    from nats.js.errors import NotFoundError

    (a,) = make_hosts(tmp_path, nats_server.url, names="a", prepare=False)
    network = settings.load(str(a.root))
    assert network is not None

    async def make() -> None:
        nc = await nats.connect(nats_server.url)
        try:
            await nc.jetstream().add_stream(
                name=network.stream, subjects=["elsewhere.>"], storage=api.StorageType.MEMORY
            )
        finally:
            await nc.close()

    asyncio.run(make())
    done = init_host(a.root, "a")
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"Error: the NATS stream {network.stream} already exists but stores elsewhere.>, not "
        f"{network.subjects}; has limits retention, not workqueue; has memory storage, not "
        "file; init changes no stream other hosts use: give this swarm a `project` name of "
        "its own in swarmforge.conf, or, if nothing waits in that stream, remove it (`nats "
        f"stream rm {network.stream}`) and run `handoffd init` again"
    )
    assert "NATS" not in done.stdout
    with pytest.raises(NotFoundError):  # the stream is there, the bucket was not made
        stream_and_bucket(nats_server.url, network)

    async def storage() -> object:
        nc = await nats.connect(nats_server.url)
        try:
            return (await nc.jetstream().stream_info(network.stream)).config.storage
        finally:
            await nc.close()

    assert asyncio.run(storage()) == "memory"


def test_a_stream_with_fewer_replicas_than_the_cluster_allows_is_used_with_a_warning() -> None:
    """Pins the decision on a stream another host made: what it stores decides (a
    difference refuses), its replicas only warn, and a stream made right says nothing."""
    network = settings.Network("shop", ["nats://h:1"], "gpu", [])
    right = api_config(subjects=[network.subjects], retention="workqueue", storage="file")
    assert setup.differences(right, network) == []
    done = setup.Prepared()
    right.num_replicas = 1
    assert setup._check_stream(right, network, 3, done) == 1
    assert done.problem is None
    assert done.warnings == [
        "WARNING: the NATS stream HANDOFFD_SHOP keeps 1 replica(s) of each copy where this "
        "cluster allows 3; init changes no stream other hosts use: raise it with "
        "`nats stream edit HANDOFFD_SHOP --replicas 3`"
    ]
    assert done.found_line() == (
        "using the NATS stream HANDOFFD_SHOP (1 replica(s)) as it is (it already existed)"
    )
    wider = api_config(subjects=["x.>", network.subjects], retention="workqueue", storage="file")
    assert setup.differences(wider, network) == []


def api_config(**fields: object) -> Any:
    from nats.js import api

    return api.StreamConfig.from_response(dict(fields))


def test_a_second_host_finds_the_stream_made_by_the_first(
    tmp_path: Path, nats_server: Server
) -> None:
    a, b = make_hosts(tmp_path, nats_server.url)
    assert a.roles["cleaner"].host == "b"
    assert b.roles["coder"].host == "a"
    assert b.roles["cleaner"].host == ""
    assert (b.root / ".worktrees" / "cleaner").is_dir()
    assert not (a.root / ".worktrees" / "cleaner").exists()


def test_init_warns_of_windows_before_the_first_host_line_and_lays_them_out_here(
    tmp_path: Path, nats_server: Server
) -> None:
    text = "window QA shell qa task\n" + SWARM
    root = tmp_path / "a"
    root.mkdir()
    (root / "swarm.conf").write_text(text.format(project=project_name(), urls=nats_server.url))
    done = handoffd("init", "--host", "a", "--config", str(root / "swarm.conf"), str(root))
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if "before the first `host`" in line]
    assert warning == [
        f"WARNING: {root / 'swarm.conf'}: QA comes before the first `host` line, so every "
        "host that runs `handoffd init` lays out its own QA (each host's mail to it stays on "
        "that host); move such a window below the `host` line of the one host it runs on"
    ]
    assert settings.load(str(root)) is not None and (root / ".worktrees" / "qa").is_dir()


def test_init_of_a_configuration_whose_every_window_has_a_host_warns_of_none(
    tmp_path: Path, nats_server: Server
) -> None:
    root = tmp_path / "a"
    root.mkdir()
    (root / "swarm.conf").write_text(SWARM.format(project=project_name(), urls=nats_server.url))
    done = handoffd("init", "--host", "a", "--config", str(root / "swarm.conf"), str(root))
    assert done.returncode == 0, done.stderr
    assert "before the first `host`" not in done.stderr
