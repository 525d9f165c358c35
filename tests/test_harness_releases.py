"""Which release a role's command runs and which flags it takes (docs/protocol.md §17,
"Releases move"): asked of the program itself — `--version` at each `up`, `--help` once per
release, cached by release under `.swarmforge/` (a hostile place: the cache is read with
care and written anew, never through a link)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from handoffd.harness import releases
from handoffd.harness.profiles import CLAUDE, CODEX
from tests.conftest import HANG, HOSTILE, plant
from tests.swarm_support import calls, stand_in

# from the real releases' answers (offline, 2026-12-07)
CODEX_171_HELP = """Usage: codex [OPTIONS] [PROMPT]

  -c, --config <key=value>
      --no-alt-screen
          Disable alternate screen mode
      --no-daemon
          Run without the shared background server, even if it is already running
"""
CODEX_150_HELP = """Usage: codex [OPTIONS] [PROMPT]
  agents            Browse all agent sessions on the shared local app-server daemon
  -c, --config <key=value>
      --no-alt-screen
          Disable alternate screen mode
"""


def test_a_version_answer_names_its_release_whatever_the_harness_prints_around_it() -> None:
    assert releases.version_in("codex-cli 0.150.0\n") == "0.150.0"
    assert releases.version_in("2.0.77 (Claude Code)\n") == "2.0.77"
    assert releases.version_in("codex-cli 0.172.0-alpha.3") == "0.172.0-alpha.3"
    assert releases.version_in("Codex CLI\nUsage: codex [OPTIONS]") is None
    assert releases.shown("0.150.0") == "0.150.0"
    assert [releases.shown(v) for v in ("", "x1", "1 2", "1|2", "1" * 41, None, 7)] == [None] * 7


def test_a_flag_is_taken_only_where_the_help_lists_that_very_option() -> None:
    assert releases.listed(CODEX_171_HELP, ("--no-daemon",)) == {"--no-daemon"}
    assert releases.listed(CODEX_150_HELP, ("--no-daemon",)) == frozenset()  # "daemon" is there
    assert releases.listed("      --no-daemon-ever", ("--no-daemon",)) == frozenset()


def project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    (root / ".swarmforge").mkdir(parents=True)
    return root


def learn(root: Path, program: Path, harness: str = CODEX) -> releases.Release:
    command = f"exec env HOME={root.parent} {program}"
    return releases.learn(str(root), harness, command, dict(os.environ), str(root))


def test_help_is_asked_once_per_release_and_the_answer_cached_by_release(tmp_path: Path) -> None:
    root = project(tmp_path)
    bin_ = tmp_path / "bin"
    old = stand_in(bin_, "codex", "0.150.0", no_daemon=False)
    first = learn(root, old)
    assert (first.name(), first.accepts, first.dropped()) == ("codex 0.150.0", frozenset(),
                                                              ("--no-daemon",))  # fmt: skip
    again = learn(root, old)
    assert again == first
    assert calls(old) == ["--version", "--help", "--version"]  # help once for this release
    cached = json.loads((root / ".swarmforge" / releases.CACHE).read_text())
    assert cached == {"codex 0.150.0": {"asked": ["--no-daemon"], "accepts": []}}

    new = stand_in(bin_, "codex", "0.171.0", no_daemon=True)  # upgraded in place
    assert learn(root, new).accepts == {"--no-daemon"}
    assert calls(new)[-2:] == ["--version", "--help"]
    assert set(json.loads((root / ".swarmforge" / releases.CACHE).read_text())) == {
        "codex 0.150.0", "codex 0.171.0"}  # fmt: skip

    claude = stand_in(tmp_path / "cbin", "claude", "2.0.77", no_daemon=False)
    assert learn(root, claude, CLAUDE) == releases.Release(CLAUDE, "2.0.77", frozenset())
    assert calls(claude) == ["--version"]  # no optional flag of Claude Code's to ask about


def test_a_program_that_names_no_release_or_hangs_gets_no_optional_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path)
    quiet = tmp_path / "quiet"
    quiet.write_text("#!/bin/sh\nexit 0\n")
    quiet.chmod(0o755)
    said = learn(root, quiet)
    assert (said.version, said.accepts) == (None, frozenset())
    assert said.trouble == "`--version` named no release"
    assert learn(root, tmp_path / "missing").trouble == "`--version` exited 127"  # env says so
    monkeypatch.setattr(releases, "ASK_TIMEOUT", 1.0)
    hangs = tmp_path / "hangs"
    marker = tmp_path / "child.pid"
    hangs.write_text(f"#!/bin/sh\nsleep 600 &\necho $! > {marker}\nwait\n")
    hangs.chmod(0o755)
    started = time.monotonic()
    said = learn(root, hangs)
    assert time.monotonic() - started < 5 and said.trouble == "`--version` did not answer in 1s"
    child = int(marker.read_text())
    with pytest.raises(ProcessLookupError):  # its whole group was killed, grandchild and all
        for _ in range(50):
            os.kill(child, 0)
            time.sleep(0.05)
    assert not (root / ".swarmforge" / releases.CACHE).exists()


@pytest.mark.parametrize("what", [*HOSTILE, "garbage", "huge"])
def test_a_cache_that_is_no_regular_file_of_json_is_asked_again_and_written_anew(
    tmp_path: Path, what: str
) -> None:
    root = project(tmp_path)
    cache = root / ".swarmforge" / releases.CACHE
    target = None
    if what == "garbage":
        cache.write_text('{"codex 0.150.0": {"asked": "--no-daemon", "accepts": [1]}, "x": [')
    elif what == "huge":
        cache.write_text(json.dumps({"codex 0.150.0": {"asked": ["--no-daemon"],
                                                       "accepts": ["--no-daemon"]}})
                         + " " * releases.LIMIT)  # fmt: skip
    else:
        target = plant(cache, what, tmp_path)
    program = stand_in(tmp_path / "bin", "codex", "0.150.0", no_daemon=False)
    started = time.monotonic()
    assert learn(root, program).accepts == frozenset()  # asked, never taken from the cache
    assert time.monotonic() - started < HANG
    assert calls(program) == ["--version", "--help"]
    assert not cache.is_symlink() and cache.is_file()
    assert json.loads(cache.read_text()) == {"codex 0.150.0": {"asked": ["--no-daemon"],
                                                               "accepts": []}}  # fmt: skip
    if target is not None:
        assert not target.is_file()  # the link's target, a FIFO, was never written


def test_a_swarmforge_folder_behind_a_link_gets_no_cache_written_through_it(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / ".swarmforge").symlink_to(elsewhere)
    program = stand_in(tmp_path / "bin", "codex", "0.171.0", no_daemon=True)
    assert learn(root, program).accepts == {"--no-daemon"}
    assert os.listdir(elsewhere) == []
