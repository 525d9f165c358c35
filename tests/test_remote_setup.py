"""`handoffd init` with `nats` configured: the stream and the bucket, made if missing, and
the warning about a single server (docs/protocol.md §15)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from handoffd.remote import settings
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
    assert settings.msg_id("20260101T000000Z_000001_from_coder", "cleaner") == (
        "20260101T000000Z_000001_from_coder@cleaner"
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
