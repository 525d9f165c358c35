"""systemd/handoffd@.service: a user unit per project, and the daemon's side of its contract.

`systemd-analyze verify` checks the unit where it can run; the notify protocol the unit
relies on (Type=notify, WatchdogSec=) is checked against a real unix datagram socket.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.swarm_support import HANDOFFD, command_env

UNIT = Path(__file__).resolve().parent.parent / "systemd" / "handoffd@.service"
INSTALLED = "@HANDOFFD@"  # the install recipe puts the absolute path of handoffd here
CHECKOUT = "@CHECKOUT@"


def sections(text: str) -> dict[str, dict[str, list[str]]]:
    """The unit's sections: key → every value given (systemd allows repeated keys)."""
    parsed: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = parsed.setdefault(line[1:-1], {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return parsed


@pytest.fixture(scope="module")
def unit() -> dict[str, dict[str, list[str]]]:
    return sections(UNIT.read_text(encoding="utf-8"))


# --- the unit's settings ------------------------------------------------------------------


def test_the_unit_is_a_notify_service_whose_readiness_comes_from_the_daemon_itself(
    unit: dict[str, dict[str, list[str]]],
) -> None:
    assert unit["Service"]["Type"] == ["notify"]
    assert unit["Service"]["NotifyAccess"] == ["main"]


def test_the_unit_restarts_on_failure_and_has_a_watchdog_and_a_stop_timeout(
    unit: dict[str, dict[str, list[str]]],
) -> None:
    service = unit["Service"]
    assert service["Restart"] == ["on-failure"]
    assert re.fullmatch(r"[1-9]\d*s?", service["WatchdogSec"][0])
    assert re.fullmatch(r"[1-9]\d*s?", service["TimeoutStopSec"][0])


def test_the_instance_is_the_project_path_run_by_the_installed_handoffd(
    unit: dict[str, dict[str, list[str]]],
) -> None:
    assert unit["Service"]["ExecStart"] == [f"{INSTALLED} run %f"]
    assert "%f" in unit["Unit"]["Description"][0]
    assert unit["Install"]["WantedBy"] == ["default.target"]


def test_a_mistyped_project_path_fails_loudly_and_the_unit_names_its_documentation(
    unit: dict[str, dict[str, list[str]]],
) -> None:
    assert unit["Unit"]["AssertPathIsDirectory"] == ["%f/.swarmforge"]
    assert "ConditionPathIsDirectory" not in unit["Unit"]
    assert unit["Unit"]["Documentation"] == [
        f"file://{CHECKOUT}/docs/protocol.md file://{CHECKOUT}/README.md"
    ]


def recipe_in_the_unit() -> str:
    """The install recipe of the unit's comment, as shell text."""
    lines = UNIT.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if "handoffd_bin=" in line)
    commands = []
    for line in lines[start:]:
        if not line.startswith("#   "):
            break
        commands.append(line[4:])
    return "\n".join(commands)


def test_the_unit_and_the_readme_give_the_same_install_recipe() -> None:
    readme = (UNIT.parent.parent / "README.md").read_text(encoding="utf-8")
    install = recipe_in_the_unit().split("systemctl --user daemon-reload")[0]
    assert install in readme


def run_recipe(home: Path, path: str) -> subprocess.CompletedProcess[str]:
    install = recipe_in_the_unit().split("systemctl --user daemon-reload")[0]
    env = {**command_env(), "HOME": str(home), "PATH": path}
    return subprocess.run(["bash", "-c", install], cwd=UNIT.parent.parent, env=env,
                          capture_output=True, text=True, timeout=30, check=False)  # fmt: skip


def test_the_recipe_installs_a_unit_that_runs_this_handoffd(tmp_path: Path) -> None:
    result = run_recipe(tmp_path, os.path.dirname(HANDOFFD) + os.pathsep + "/usr/bin:/bin")
    assert result.returncode == 0, result.stderr
    installed = sections((tmp_path / ".config/systemd/user/handoffd@.service").read_text())
    assert installed["Service"]["ExecStart"] == [f"{HANDOFFD} run %f"]
    checkout = UNIT.parent.parent
    assert installed["Unit"]["Documentation"] == [
        f"file://{checkout}/docs/protocol.md file://{checkout}/README.md"
    ]


def test_the_recipe_stops_with_a_message_when_handoffd_is_not_on_path(tmp_path: Path) -> None:
    result = run_recipe(tmp_path, "/usr/bin:/bin")
    assert result.returncode != 0
    assert "handoffd is not on PATH: activate the venv or pipx install ." in result.stderr
    assert not (tmp_path / ".config/systemd/user/handoffd@.service").exists()


# --- systemd-analyze verify ---------------------------------------------------------------


def verify(unit_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["systemd-analyze", "verify", str(unit_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def complaints(result: subprocess.CompletedProcess[str]) -> list[str]:
    """verify's messages about our unit (it may also talk about the host's own units)."""
    return [line for line in result.stderr.splitlines() if "handoffd@" in line]


@pytest.fixture
def instance_dir(tmp_path: Path) -> Path:
    """A place for unit instances, once systemd-analyze is known to work here."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    probe = tmp_path / "probe.service"
    probe.write_text("[Service]\nExecStart=/bin/true\n")
    result = verify(probe)
    if result.returncode != 0:
        pytest.skip(f"systemd-analyze verify cannot run here: {result.stderr.strip()}")
    return tmp_path


def instance(directory: Path, text: str, name: str = "handoffd@tmp-x.service") -> Path:
    """The template as an instance, run by this environment's handoffd (verify checks that
    ExecStart's program exists and is executable)."""
    path = directory / name
    path.write_text(text.replace(INSTALLED, HANDOFFD).replace(CHECKOUT, str(UNIT.parent.parent)))
    return path


def test_systemd_analyze_verify_accepts_the_unit(instance_dir: Path) -> None:
    result = verify(instance(instance_dir, UNIT.read_text(encoding="utf-8")))
    assert result.returncode == 0, result.stderr
    assert complaints(result) == []


def test_systemd_analyze_verify_would_catch_a_broken_unit_here(instance_dir: Path) -> None:
    broken = UNIT.read_text(encoding="utf-8").replace("Type=notify", "Type=notifyy")
    result = verify(instance(instance_dir, broken))
    assert any("notifyy" in line for line in complaints(result)), result.stderr


# --- the daemon keeps the notify contract -------------------------------------------------


@pytest.fixture(params=["path", "abstract"])
def notify_socket(request: pytest.FixtureRequest) -> Iterator[tuple[socket.socket, str]]:
    """A supervisor's datagram socket and the $NOTIFY_SOCKET value naming it."""
    directory = tempfile.mkdtemp(prefix="hd-", dir="/tmp")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if request.param == "abstract":
        name = f"handoffd-test-{os.getpid()}-{os.path.basename(directory)}"
        sock.bind("\0" + name)
        address = "@" + name
    else:
        address = os.path.join(directory, "n")
        sock.bind(address)
    try:
        yield sock, address
    finally:
        sock.close()
        shutil.rmtree(directory, ignore_errors=True)


def messages(sock: socket.socket, until: str, timeout: float = 15.0) -> list[str]:
    """Every datagram up to and including the first equal to `until`."""
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while until not in got:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            got.append(sock.recv(4096).decode())
        except TimeoutError:
            pytest.fail(f"no {until} within {timeout}s; got {got}")
    return got


def test_run_as_the_unit_runs_it_says_ready_pings_the_watchdog_and_says_stopping(
    project: Project, notify_socket: tuple[socket.socket, str]
) -> None:
    sock, address = notify_socket
    env = command_env(NOTIFY_SOCKET=address, WATCHDOG_USEC="200000")
    daemon = subprocess.Popen(
        [HANDOFFD, "run", str(project.root)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert messages(sock, "READY=1")[0] == "READY=1"
        # Pinged at least every half watchdog interval while idle (0.1 s here).
        pings = messages(sock, "WATCHDOG=1") + messages(sock, "WATCHDOG=1")
        assert pings.count("WATCHDOG=1") == 2
        daemon.send_signal(signal.SIGTERM)
        assert "STOPPING=1" in messages(sock, "STOPPING=1")
        _, errors = daemon.communicate(timeout=15)
        assert daemon.returncode == 0, errors
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.communicate()
