"""Screenshots of the web board for the README: a live demo swarm, four pages, docs/*.png.

It starts `handoffd demo --keep` (two scripted agents, coder and cleaner, do their round
trips and stay up with the daemon), adds two roles (`lead`, `QA`) with `handoffd init`,
starts their sessions with `handoffd up` (each pane only waits: the script drives them),
and plays a short morning between them with the real helpers: handoffs
with dependencies, work taken and reported on in Markdown, a blocked card.  Then it
serves the board on a free loopback port and has headless Chromium (Debian's) shoot the
open cards, one card and the archive at a laptop's 1366x768, then opens the URL with the
board's key and shoots the blocked card's page with an answer typed into its form, and the
open page with a card for the operator and its Send work panel.  Run
from the checkout:

    .venv/bin/python scripts/web_screenshots.py [OUT_DIR]
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

from handoffd.demos.demo import configuration

BIN = os.path.dirname(sys.executable)
ROUNDS = 6
AGENTS = {"lead": "claude", "QA": "codex"}
MORE = "window lead shell lead task\nwindow QA shell qa batch\n"


def run(*args: str, role: str | None = None, cwd: str | None = None, text: str = "") -> str:
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ["PATH"]}
    env.pop("SWARMFORGE_ROLE", None)
    if role:
        env["SWARMFORGE_ROLE"] = role
        env["SWARMFORGE_AGENT"] = AGENTS[role]
    done = subprocess.run(args, cwd=cwd, env=env, input=text, capture_output=True, text=True,
                          check=False, timeout=300)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: {done.stdout}{done.stderr}")
    return done.stdout


class Swarm:
    """The demo's swarm, kept running, with `lead` and `QA` added."""

    def __init__(self) -> None:
        printed = run("handoffd", "demo", "--keep", "--rounds", str(ROUNDS))
        self.root = printed.split("handoffd down ", 1)[1].split()[0]
        conf = os.path.join(self.root, ".swarmforge", "web-screenshots.conf")
        with open(conf, "w", encoding="utf-8") as file:
            file.write(configuration(ROUNDS, 0.0, 1) + MORE)
        run("handoffd", "init", self.root, "--config", conf)
        with open(os.path.join(self.root, ".swarmforge", "daemon", "handoffd.pid")) as file:
            os.kill(int(file.read()), signal.SIGHUP)  # re-read roles.tsv: lead and QA
        # their sessions, so the board shows them at work, not `QA's session … is gone`:
        # a person drives them here, through the helpers, so their panes only wait
        run("handoffd", "up", self.root, "--agent", "shell=sleep 86400", "--check-after", "0")
        self.worktrees = {"lead": "lead", "QA": "qa"}
        self.sent = 0

    def cwd(self, role: str) -> str:
        return os.path.join(self.root, ".worktrees", self.worktrees[role])

    def send(self, role: str, **headers: str) -> str:
        """Queue a handoff from `role`; its id."""
        commit = run("git", "rev-parse", "--short=10", "HEAD", cwd=self.cwd(role)).strip()
        fields = {"type": "git_handoff", "priority": "50", "commit": commit, **headers}
        if fields["type"] == "note":
            fields.pop("commit")
        draft = os.path.join(self.root, "draft.txt")
        with open(draft, "w") as file:
            file.write("".join(f"{key}: {value}\n" for key, value in fields.items()))
        queued = run("swarm_handoff", draft, role=role, cwd=self.cwd(role)).strip()
        self.sent += 1
        name = os.path.basename(queued.split(": ", 1)[1])
        return name[3 : name.index("_to_")]

    def helper(self, role: str, *args: str, text: str = "") -> str:
        return run(*args, role=role, cwd=self.cwd(role), text=text)

    def delivered(self) -> None:
        """Wait until nothing of lead's or QA's waits in an outbox."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            cards = json.loads(run("handoffd", "status", "--json", "--root", self.root))
            if not any(card["state"] == "outbox" for card in cards):
                return
            time.sleep(0.1)
        raise SystemExit("the daemon did not deliver in time")


def morning(swarm: Swarm) -> tuple[str, str]:
    """Play the morning between lead and QA; the card whose page is shot, and the blocked
    one an operator answers."""
    smoke = swarm.send("lead", to="QA", task="smoke-test the 0.3 build")
    swarm.delivered()
    swarm.helper("QA", "ready_for_next")
    swarm.helper("QA", "handoffd", "report", smoke, "--status", "DONE", "--file", "-",
                 text="Smoke test passed on 0.3: 41 checks.\n")  # fmt: skip
    lex = swarm.send("lead", to="QA", task="parser: tokenize string literals", priority="40",
                     depends_on=smoke)  # fmt: skip
    swarm.send("lead", to="QA", task="parser: error recovery", depends_on=lex)
    swarm.send("lead", to="QA", type="note", message="staging creds rotate at noon")
    swarm.send("lead", to="QA", task="fuzz the config loader", priority="70")
    schema = swarm.send("lead", to="QA", task="migrate the schema to v4", priority="60")
    swarm.send("QA", to="lead", task="integration tests for v4", depends_on=schema)
    swarm.send("QA", to="lead", task="review: CLI help texts")
    swarm.send("QA", to="operator", type="note",
               message="Needs a person: approve dropping Python 3.9 from the 0.4 release?")
    swarm.delivered()
    swarm.helper("QA", "ready_for_next")
    swarm.helper("QA", "handoffd", "report", "--status", "RUNNING", "--file", "-",
                 text="Started: reading the lexer.\n")  # fmt: skip
    swarm.helper("QA", "handoffd", "report", "--status", "RUNNING", "--file", "-", text=(
        "## Tokenizer, half way\n\n"
        "- [x] plain and raw string literals\n- [ ] escapes (`\\u{…}`) next\n\n"
        "Tests: `pytest tests/test_lexer.py` — **18 passed**.\n\n"
        "<script>alert('reports are shown, never run')</script>\n"
    ))  # fmt: skip
    swarm.helper("QA", "handoffd", "block", schema,
                 "--reason", "needs the staging DB password from an operator")  # fmt: skip
    return f"{lex}@QA", f"{schema}@QA"


def shoot(url: str, keyed: str, card: str, blocked: str, out: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                             args=["--no-sandbox"])  # fmt: skip
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        for path, name in (("/", "web-open"), ("/card/" + card, "web-card"),
                           ("/archive", "web-archive")):  # fmt: skip
            page.goto(url + path)
            page.screenshot(path=os.path.join(out, name + ".png"))
        page.goto(keyed)  # the key becomes a cookie: the pages gain their forms
        page.goto(url + "/card/" + blocked)
        page.locator("form.act-answer textarea").fill(
            "The password is in the team vault under staging/db; it rotates at noon."
        )
        page.screenshot(path=os.path.join(out, "web-answer.png"))
        page.goto(url + "/")  # the For you section, and the Send work panel opened
        page.click("#send-work summary")
        page.locator('form.send input[name=to][value="QA"]').check()
        page.locator("form.send textarea").fill("Write the release notes for 0.4.")
        page.screenshot(path=os.path.join(out, "web-for-you.png"))
        browser.close()


def main() -> None:
    out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "docs")
    os.makedirs(out, exist_ok=True)
    swarm = Swarm()
    web = None
    try:
        card, blocked = morning(swarm)
        command = [os.path.join(BIN, "handoffd"), "web", swarm.root, "--port", "0"]
        web = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)  # fmt: skip
        assert web.stdout is not None and web.stderr is not None
        keyed = web.stderr.readline().split("open ", 1)[1].split()[0]
        url = web.stdout.readline().split(" on ", 1)[1].split()[0].rstrip("/")
        shoot(url, keyed, card, blocked, out)
        print(f"screenshots in {out}")
    finally:
        if web is not None:
            web.terminate()
            web.wait(10)
        run("handoffd", "down", swarm.root)
        shutil.rmtree(os.path.dirname(swarm.root), ignore_errors=True)


if __name__ == "__main__":
    main()
