"""Which release of its harness a role's command runs, and which of the flags `up` would add
that release accepts (docs/protocol.md §16, "Releases move" of §17).

Releases move: Codex 0.171 needs `--no-daemon` (else every session's commands run in one
shared server, with the environment of whichever session started it), and Codex 0.150
exits at once on that flag.  So `up` asks the installed program before it passes one:
`<command> --version` names the release, and `<command> --help` — asked once per release,
the answer cached by release in `.swarmforge/releases.json` (never under `~`) — lists the
flags it takes.  A release that cannot be learned gets only the flags every supported
release takes.

The cache is under `.swarmforge/`, so it is hostile input like the rest: read only as a
regular file of at most LIMIT bytes, every entry checked; anything else is asked again
and the file written anew (a new file renamed over it, never through a link).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
from dataclasses import dataclass

from handoffd.harness import profiles

CACHE = "releases.json"  # in the project's .swarmforge/
LIMIT = 64 * 1024  # bytes of the cache ever read
ASK_TIMEOUT = 15.0  # seconds a harness gets to print its version or its help
OUTPUT_LIMIT = 256 * 1024  # bytes of an answer read
# The flags `up` passes only to a release that lists them in its --help; every other word
# it adds (Codex's `-c`) every supported release takes.
OPTIONAL = {profiles.CODEX: ("--no-daemon",), profiles.CLAUDE: ()}
VERSION = re.compile(r"(?<![\w.])(\d+\.\d+(?:\.\d+)*(?:-[0-9A-Za-z.]+)?)(?![\w.])")
SHOWN_VERSION = re.compile(r"\d[0-9A-Za-z.+-]{0,39}")  # a version as recorded and shown


@dataclass(frozen=True)
class Release:
    """What a role's command runs: its harness, its version (None: it did not say), the
    optional flags it accepts, and why it could not be asked (None: it answered)."""

    harness: str
    version: str | None
    accepts: frozenset[str]
    trouble: str | None = None

    def name(self) -> str:
        """`codex 0.150.0`, or `codex` of a release that did not say."""
        return f"{self.harness} {self.version}" if self.version else self.harness

    def dropped(self) -> tuple[str, ...]:
        """The optional flags of its harness this release does not take (not passed)."""
        return tuple(flag for flag in OPTIONAL.get(self.harness, ()) if flag not in self.accepts)


def version_in(output: str) -> str | None:
    """The release a `--version` answer names (`codex-cli 0.150.0`, `2.0.77 (Claude
    Code)`): its first dotted number."""
    found = VERSION.search(output)
    return found.group(1) if found else None


def listed(help_text: str, flags: tuple[str, ...]) -> frozenset[str]:
    """Which of `flags` a `--help` answer lists as an option (the word itself, not a longer
    option that starts with it)."""
    return frozenset(
        flag for flag in flags
        if re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text)
    )  # fmt: skip


def shown(version: object) -> str | None:
    """A version as it may be recorded on a session and shown by `status`: a short word
    starting with a digit; anything else (a planted value) is none."""
    if isinstance(version, str) and SHOWN_VERSION.fullmatch(version):
        return version
    return None


def learn(root: str, harness: str, command: str, env: dict[str, str], cwd: str) -> Release:
    """The release `command` (a role's agent command line) runs, asking it `--version` and,
    for a release not in the cache, `--help`."""
    flags = OPTIONAL.get(harness, ())
    try:
        argv = _argv(command)
    except ValueError as error:
        return Release(harness, None, frozenset(), f"its command line: {error}")
    answer, trouble = _ask([*argv, "--version"], env, cwd)
    version = shown(version_in(answer)) if trouble is None else None
    if version is None:
        return Release(harness, None, frozenset(), trouble or "`--version` named no release")
    if not flags:
        return Release(harness, version, frozenset())
    cache = read_cache(root)
    key = f"{harness} {version}"
    known = cache.get(key)
    if known is not None and set(flags) <= known[0]:
        return Release(harness, version, frozenset(known[1] & set(flags)))
    answer, trouble = _ask([*argv, "--help"], env, cwd)
    if trouble is not None:
        return Release(harness, version, frozenset(), trouble)
    accepts = listed(answer, flags)
    cache[key] = (frozenset(flags), accepts)
    write_cache(root, cache)
    return Release(harness, version, accepts)


def _argv(command: str) -> list[str]:
    """The command line's words, less a leading `exec` (it is run without a shell)."""
    words = shlex.split(command)
    if words and words[0] == "exec":
        words = words[1:]
    if not words:
        raise ValueError("it is empty")
    return words


def _ask(argv: list[str], env: dict[str, str], cwd: str) -> tuple[str, str | None]:
    """What the program printed, and why it could not be asked (None: it exited 0).  Its
    own process group, killed whole at the timeout (an npm launcher runs the harness as
    its child)."""
    try:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, env=env, cwd=cwd,
                                   start_new_session=True)  # fmt: skip
    except OSError as error:
        return "", f"`{argv[-1]}` could not be run: {error.strerror or error}"
    try:
        out, _ = process.communicate(timeout=ASK_TIMEOUT)
    except subprocess.TimeoutExpired:
        _kill_group(process.pid)
        process.communicate()
        return "", f"`{argv[-1]}` did not answer in {ASK_TIMEOUT:.0f}s"
    if process.returncode != 0:
        return "", f"`{argv[-1]}` exited {process.returncode}"
    return out[:OUTPUT_LIMIT].decode(errors="replace"), None


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass  # gone already


Cache = dict[str, tuple[frozenset[str], frozenset[str]]]  # "codex 0.150.0" -> (asked, accepted)


def cache_path(root: str) -> str:
    from handoffd.core import config

    return os.path.join(root, config.SWARMFORGE, CACHE)


def read_cache(root: str) -> Cache:
    """The cached answers, each entry checked; {} for a cache missing or unusable."""
    from handoffd.core import safeio

    try:
        data = json.loads(safeio.read_regular(cache_path(root), LIMIT, below=root))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    found: Cache = {}
    for key, entry in data.items():
        if not isinstance(entry, dict):
            continue
        asked, accepts = entry.get("asked"), entry.get("accepts")
        if _words(asked) and _words(accepts):
            found[key] = (frozenset(asked), frozenset(accepts))  # type: ignore[arg-type]
    return found


def _words(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(word, str) for word in value)


def write_cache(root: str, cache: Cache) -> None:
    """Write the cache anew (best effort: unwritten, the release is only asked again)."""
    from handoffd.core import config, durable, safeio

    rows = {key: {"asked": sorted(asked), "accepts": sorted(accepts)}
            for key, (asked, accepts) in sorted(cache.items())}  # fmt: skip
    try:
        folder = safeio.open_dir(os.path.join(root, config.SWARMFORGE), below=root)
    except OSError:
        return
    try:
        durable.replace_at(folder, CACHE, (json.dumps(rows, indent=1) + "\n").encode())
    except OSError:
        pass
    finally:
        os.close(folder)
