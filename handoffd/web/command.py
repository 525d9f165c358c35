"""`handoffd web`: serve the board over HTTP (docs/protocol.md §9, §13).

The socket is bound here, before uvicorn starts, so `--port 0` can print the port the
system chose and a port already in use is a one-line error, not a traceback.  The board's
key is made (or read from `--key-file`) here too, and its URL printed once on stderr.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import socket
import stat
import sys

import click

from handoffd.adapters.commands import option, project_of, root_argument
from handoffd.ops.table import WINDOW


def is_loopback(host: str) -> bool:
    """Is `host` this machine only (127.0.0.0/8, ::1, `localhost`)?"""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host`:`port` (0: a free port the system picks)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host.strip("[]"), port, type=socket.SOCK_STREAM
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


KEY_BYTES = 24  # 192 bits: the contract asks for 128 at least


def board_key(key_file: str | None) -> str:
    """A new random key, or the one kept in `key_file` (made there, mode 0600, if missing)."""
    if key_file is None:
        return secrets.token_urlsafe(KEY_BYTES)
    try:
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return _read_key(key_file)
    except OSError as error:
        raise click.ClickException(f"cannot make {key_file}: {error.strerror}") from None
    key = secrets.token_urlsafe(KEY_BYTES)
    try:
        os.write(fd, f"{key}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


def _read_key(key_file: str) -> str:
    from handoffd.core import safeio

    try:
        fd = safeio.open_regular(key_file)  # never a link, nor a FIFO
        try:
            mode = os.fstat(fd).st_mode
        finally:
            os.close(fd)
        _private(key_file, mode)
        key = safeio.read_line(key_file, 256)
    except (OSError, ValueError) as error:
        raise click.ClickException(f"cannot read the key in {key_file}: {error}") from None
    if len(key) < 22 or not all(c.isalnum() or c in "-_" for c in key):
        raise click.ClickException(
            f"{key_file} holds no board key (22 or more of A-Z a-z 0-9 - _); remove it to "
            "have a new one made"
        )
    return key


def _private(key_file: str, mode: int) -> None:
    """Refuse a key file that another user may read or write: whoever reads the key acts
    on the board, whoever writes it chooses the key."""
    if mode & 0o077:
        import shlex

        raise click.ClickException(
            f"{key_file} is open to other users (mode {stat.S_IMODE(mode):o}), and the "
            f"board's key with it: chmod 600 {shlex.quote(key_file)}"
        )


@click.command("web")
@root_argument
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
@option(WINDOW)
@click.option("--all-hosts", is_flag=True, help="Every host's open cards (docs/protocol.md §15).")
@click.option("--key-file", type=click.Path(dir_okay=False), metavar="F",
              help="Keep the board's key in F (made with mode 0600 if missing).")  # fmt: skip
@click.option("--read-only", is_flag=True, help="Serve no forms; refuse every POST (405).")
def web(
    root: str | None,
    host: str,
    port: int,
    window: float,
    all_hosts: bool,
    key_file: str | None,
    read_only: bool,
) -> None:
    """Serve the board in a browser: open cards live, the archive, each card's reports,
    and, for whoever holds its key, the operator's actions."""
    project = project_of(root)
    key = board_key(key_file)
    try:
        import uvicorn

        from handoffd.web.app import create_app
    except ImportError as error:
        raise click.ClickException(
            f"the web board needs its extra ({error.name} is missing): pip install 'handoffd[web]'"
        ) from None
    if not is_loopback(host):
        click.echo(
            f"handoffd web: WARNING: listening on {host}, not on loopback: anyone who can "
            "reach it reads the swarm's mail (every handoff and report).",
            err=True,
        )
    try:
        sock = bind(host, port)
    except OSError as error:
        raise click.ClickException(f"cannot listen on {host}:{port}: {error.strerror}") from None
    from handoffd.adapters.web import Actions

    loopback = is_loopback(host)
    app = create_app(project, window_s=window * 60, host=host, port=sock.getsockname()[1],
                     all_hosts=all_hosts, actions=Actions(project), key=key,
                     writable=not read_only, loopback=loopback)  # fmt: skip
    config = uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False,
                            server_header=False, timeout_graceful_shutdown=2)  # fmt: skip
    if not (read_only and loopback):  # before the line that says it serves
        what = "to read it" if read_only else "to act on it"
        click.echo(f"handoffd web: open {url(sock)}?key={key} {what} (the key is printed "
                   "only here)", err=True)  # fmt: skip
    click.echo(f"handoffd web: {project} on {url(sock)} (Ctrl-C to stop)")
    sys.stdout.flush()
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it has already handled
        pass
    click.echo("handoffd web: stopped", err=True)
