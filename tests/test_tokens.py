"""What the agents spent (docs/protocol.md §19, "Tokens"): the one tally, `H/usage.jsonl`
under hostile hands, the harnesses' own records read from where they were left, and the
Stop hook and Codex's notify that record each turn, through the installed command."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from handoffd.core import handoff as hf
from handoffd.core import tokens, usage
from handoffd.core.tokens import Spend
from handoffd.harness import spend
from tests.conftest import Project
from tests.test_hooks import hook

NOW = 1_800_000_000.0
AT = hf.iso_now(NOW)
LINE = {"at": AT, "card": "a@coder", "harness": "claude", "input": 1, "output": 2,
        "cache_read": 3, "cache_write": 4}  # fmt: skip


def one(at: float = NOW, card: str | None = "a@coder", counts: tuple[int, ...] = (1, 2, 3, 4),
        harness: str = "claude") -> Spend:  # fmt: skip
    return Spend(at, card, harness, (counts[0], counts[1], counts[2], counts[3]))


# --- the tally: one pure function for every view ---------------------------------------


def test_the_tally_adds_up_per_role_and_harness_per_card_and_in_all() -> None:
    found = tokens.tally({
        "coder": [one(), one(card="b@coder"), one(harness="codex", card=None)],
        "cleaner": [one(card="z@cleaner", counts=(10, 0, 0, 0))],
    })  # fmt: skip
    assert found.role("coder").to_json() == {"input": 3, "output": 6, "cache_read": 9,
                                             "cache_write": 12, "turns": 3}  # fmt: skip
    assert found.card("a@coder").input == 1 and found.card("nothing@coder").turns == 0
    assert found.total().input == 13 and found.team(["coder", "cleaner"]).input == 13
    assert ("coder", "codex", "cache_write", 4) in found.samples()
    assert ("cleaner", "claude", "input", 10) in found.samples()


def test_the_tally_since_a_time_counts_only_the_records_from_then() -> None:
    found = tokens.tally({"coder": [one(NOW - 100), one(NOW)]}, since=NOW - 10)
    assert found.role("coder").turns == 1


@pytest.mark.parametrize("value", [1e308, -1, "5", True, None, 10**13, 2.0, [1]])
def test_a_line_whose_count_is_no_whole_number_in_range_is_skipped(value: object) -> None:
    bad = json.dumps({**LINE, "input": value}).encode()
    good = json.dumps(LINE).encode()
    assert usage.parse_line(bad) is None
    assert [s.counts for s in usage.records(b"\n".join([bad, good, b"not json", b""]))] == [
        (1, 2, 3, 4)
    ]


@pytest.mark.parametrize(
    "change",
    [{"at": "yesterday"}, {"at": 5}, {"card": 7}, {"card": "x" * 600}, {"harness": ""},
     {"harness": "a\x1bb"}, {"turns": -2}],
)  # fmt: skip
def test_a_line_with_a_field_of_the_wrong_kind_is_skipped(change: dict[str, object]) -> None:
    assert usage.parse_line(json.dumps({**LINE, **change}).encode()) is None


def test_a_record_reads_back_as_it_was_written() -> None:
    for spent in (one(), one(card=None), Spend(NOW + 0.25, "b@coder", "codex", (5, 6, 7, 8), 9)):
        back = usage.parse_line(usage.encode(spent).rstrip(b"\n"))
        assert back is not None
        assert (back.at, back.card, back.harness, back.counts, back.turns) == (
            spent.at, spent.card, spent.harness, spent.counts, spent.turns)  # fmt: skip


# --- the file: bounded, rotated, never written through a link -------------------------


def test_a_file_rotated_keeps_every_total_and_stays_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(usage, "ROTATE_AT", 4096)
    cards = [f"c{k}@coder" for k in range(8)]
    written = []
    for k in range(400):  # old turns of eight cards, then a day's worth of recent ones
        at = NOW - 3 * 86400 + k * 60 if k < 300 else NOW - 3600 + k
        written.append(one(at, cards[k % 8], (k, 1, 2, 3)))
        usage.append(str(tmp_path), written[-1], at)
        assert os.path.getsize(usage.path(str(tmp_path))) <= 4096
    kept = usage.read(str(tmp_path))
    before, after = tokens.tally({"r": written}), tokens.tally({"r": kept})
    assert after.role("r").to_json() == before.role("r").to_json()
    assert {c: after.card(c).to_json() for c in cards} == {
        c: before.card(c).to_json() for c in cards}  # fmt: skip
    assert len(kept) < len(written)


def test_compacting_past_the_limit_carries_the_oldest_together_and_keeps_the_totals() -> None:
    many = [one(NOW - k, f"c{k}@coder") for k in range(200)]
    kept = usage.compact(many, NOW, limit=2000)
    assert tokens.tally({"r": kept}).role("r").to_json() == tokens.tally(
        {"r": many}).role("r").to_json()  # fmt: skip
    assert len(kept) == 1 and kept[0].card is None and kept[0].turns == 200


def test_the_file_behind_a_link_or_a_fifo_reads_as_none_and_is_replaced_on_append(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(usage.encode(one()))
    handoffs = tmp_path / "H"
    handoffs.mkdir()
    (handoffs / usage.FILE).symlink_to(outside)
    assert usage.read(str(handoffs)) == []
    usage.append(str(handoffs), one(counts=(9, 9, 9, 9)), NOW)
    assert outside.read_bytes() == usage.encode(one())  # never written through
    assert [s.counts for s in usage.read(str(handoffs))] == [(9, 9, 9, 9)]
    (handoffs / usage.FILE).unlink()
    os.mkfifo(handoffs / usage.FILE)
    started = time.monotonic()
    assert usage.read(str(handoffs)) == []
    usage.append(str(handoffs), one(), NOW)
    assert time.monotonic() - started < 1 and len(usage.read(str(handoffs))) == 1


def test_a_hard_link_to_the_file_is_moved_aside_never_appended_to(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.write_bytes(b"")
    handoffs = tmp_path / "H"
    handoffs.mkdir()
    os.link(outside, handoffs / usage.FILE)
    usage.append(str(handoffs), one(), NOW)
    assert outside.read_bytes() == b"" and len(usage.read(str(handoffs))) == 1


# --- budgets, the pure part -------------------------------------------------------------


def test_a_budget_counts_input_output_and_cache_writes_over_its_window() -> None:
    budget = tokens.Budget("coder", 100, "hour")
    assert tokens.spent(budget, [one(counts=(40, 50, 10_000, 9))], NOW) is None  # 99
    held = tokens.spent(budget, [one(NOW - 1800, counts=(60, 0, 0, 0)),
                                 one(NOW - 60, counts=(0, 30, 0, 10))], NOW)  # fmt: skip
    assert held is not None and held.used == 100
    # the first record leaves the window at NOW + 1800: 40 left, under budget
    assert held.resumes == NOW + 1800
    assert (
        held.line("T") == "BUDGET_SPENT: 100 of 100 tokens in the last hour; work resumes after T"
    )
    assert tokens.spent(budget, [one(NOW - 3601, counts=(500, 0, 0, 0))], NOW) is None


def test_a_record_from_the_future_counts_as_now_and_never_lengthens_the_wait() -> None:
    held = tokens.spent(tokens.Budget("c", 10, "day"), [one(NOW + 10**6, counts=(20, 0, 0, 0))],
                        NOW)  # fmt: skip
    assert held is not None and held.resumes == NOW + 86400


def test_budget_lines_are_read_plainly_and_a_bad_one_is_passed_over() -> None:
    text = "window coder x master\nbudget coder 5 per day  # a note\nbudget QA x per day\n"
    found = tokens.budgets(text)
    assert list(found) == ["coder"] and (found["coder"].tokens, found["coder"].window) == (5, "day")
    for words, said in [("budget c 0 per day", "from 1"), ("budget c 5 per week", "per hour"),
                        ("budget c 5 day", "expected")]:  # fmt: skip
        with pytest.raises(ValueError, match=said):
            tokens.budget_of(words.split())


# --- the harnesses' records -------------------------------------------------------------


def assistant(ident: str, counts: tuple[int, int, int, int], block: str = "text") -> str:
    keys = spend.CLAUDE_USAGE
    return json.dumps({"type": "assistant", "requestId": "req", "message": {
        "id": ident, "content": [{"type": block}],
        "usage": {**dict(zip(keys, counts, strict=True)), "cache_creation": {}}}})  # fmt: skip


def test_a_claude_code_message_written_as_several_lines_counts_once(tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    first = (100, 20, 300, 40)
    lines = [json.dumps({"type": "user", "message": {"content": "hi"}}),
             assistant("msg_1", first), assistant("msg_1", first, "tool_use"),
             assistant("msg_2", (1, 2, 3, 4)), '{"type": "assistant", "message": {"id": "msg_3", '
             '"usage": {"input_tokens": 1e308}}}', "torn {"]  # fmt: skip
    transcript.write_text("\n".join(lines) + "\n")
    counts, state = spend.claude_turn(str(transcript), None, time.monotonic() + 1)
    assert counts == (101, 22, 303, 44)
    assert state.offset == transcript.stat().st_size and state.ids == ["msg_1", "msg_2"]
    with transcript.open("a") as file:  # the next turn: msg_2 again (rewritten), and a new one
        file.write(assistant("msg_2", (1, 2, 3, 4)) + "\n" + assistant("msg_4", (5, 0, 0, 0)))
    counts, later = spend.claude_turn(str(transcript), state, time.monotonic() + 1)
    assert counts == (0, 0, 0, 0)  # msg_4's line is not whole yet: read at the next turn
    with transcript.open("a") as file:
        file.write("\n")
    counts, _ = spend.claude_turn(str(transcript), later, time.monotonic() + 1)
    assert counts == (5, 0, 0, 0)


def test_a_transcript_that_is_a_fifo_or_a_link_is_never_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    real = tmp_path / "real.jsonl"
    real.write_text(assistant("m", (1, 1, 1, 1)) + "\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    for path in (fifo, link, tmp_path / "gone.jsonl"):
        started = time.monotonic()
        with pytest.raises(OSError):
            spend.claude_turn(str(path), None, time.monotonic() + 1)
        assert time.monotonic() - started < 0.5


def token_count(total: tuple[int, int, int, int]) -> str:
    fresh, output, cached, written = total
    usage_ = {"input_tokens": fresh + cached, "cached_input_tokens": cached,
              "cache_write_input_tokens": written, "output_tokens": output,
              "reasoning_output_tokens": 0, "total_tokens": fresh + cached + output}  # fmt: skip
    info = {"total_token_usage": usage_, "last_token_usage": usage_}
    return json.dumps({"timestamp": AT, "type": "event_msg",
                       "payload": {"type": "token_count", "info": info}})  # fmt: skip


THREAD = "01a24e29-1a01-79b1-b050-b04014a8c42e"


def codex_rollout(home: Path, *lines: str) -> Path:
    day = home / "sessions" / "2026" / "12" / "07"
    day.mkdir(parents=True, exist_ok=True)
    rollout = day / f"rollout-2026-12-07T01-40-46-{THREAD}.jsonl"
    with rollout.open("a") as file:
        file.write("".join(line + "\n" for line in lines))
    return rollout


def test_a_codex_turn_spent_the_difference_of_its_running_totals(tmp_path: Path) -> None:
    rollout = codex_rollout(tmp_path, '{"type": "session_meta"}', token_count((100, 20, 300, 0)),
                            token_count((200, 40, 600, 5)))  # fmt: skip
    found = spend.codex_turn(THREAD, None, time.monotonic() + 1, str(tmp_path))
    assert found is not None and found[0] == (200, 40, 600, 5) and found[1].source == str(rollout)
    codex_rollout(tmp_path, token_count((250, 41, 900, 5)), '{"bad": 1e999}')
    later = spend.codex_turn(THREAD, found[1], time.monotonic() + 1, str(tmp_path))
    assert later is not None and later[0] == (50, 1, 300, 0)
    assert spend.codex_turn("0000-1111", None, time.monotonic() + 1, str(tmp_path)) is None


# --- the Stop hook and Codex's notify, as the harnesses run them -------------------------


def usage_lines(project: Project, role: str = "coder") -> list[dict[str, object]]:
    path = project.handoffs(role) / usage.FILE
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def claude_stop(project: Project, transcript: Path, role: str = "coder") -> str:
    done = hook(project, "stop", {"hook_event_name": "Stop", "stop_hook_active": False,
                                  "transcript_path": str(transcript),
                                  "cwd": str(project.worktrees[role])}, role)  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout


def test_the_stop_hook_records_the_turn_against_the_card_in_process_once(
    project: Project, tmp_path: Path
) -> None:
    name = "50_20260101T000000Z_000001_from_QA_to_coder.handoff"
    project.put("coder", name, box="inbox/in_process")
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(assistant("msg_a", (100, 20, 300, 40)) + "\n"
                          + assistant("msg_a", (100, 20, 300, 40)) + "\n")  # fmt: skip
    assert claude_stop(project, transcript) == ""
    [line] = usage_lines(project)
    assert {k: v for k, v in line.items() if k != "at"} == {
        "card": "20260101T000000Z_000001_from_QA@coder", "harness": "claude", "input": 100,
        "output": 20, "cache_read": 300, "cache_write": 40}  # fmt: skip
    assert claude_stop(project, transcript) == "" and len(usage_lines(project)) == 1  # nothing new
    offset = json.loads((project.handoffs("coder") / spend.OFFSET).read_text())
    assert offset["offset"] == transcript.stat().st_size
    (project.box("coder", "inbox/in_process") / name).unlink()
    with transcript.open("a") as file:
        file.write(assistant("msg_b", (1, 0, 0, 0)) + "\n")
    claude_stop(project, transcript)
    assert usage_lines(project)[-1]["card"] is None  # nothing in process at the turn's end
    shown = project.run("handoffd", "status", "--roles", "--json", str(project.root), role=None,
                        cwd=project.root)  # fmt: skip
    status = json.loads(shown.out)
    coder = next(row for row in status if row["role"] == "coder")
    assert coder["tokens"] == {"input": 101, "output": 20, "cache_read": 300, "cache_write": 40,
                               "turns": 2}  # fmt: skip


def test_a_transcript_that_is_a_fifo_never_holds_the_hook_nor_its_announcement(
    project: Project, tmp_path: Path
) -> None:
    project.put("coder", "50_20260101T000000Z_000001_from_QA_to_coder.handoff", **{"from": "QA"})
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.open("w").close(), daemon=True)
    writer.start()  # a writer that opens it and says nothing: a blocking read would wait
    started = time.monotonic()
    said = claude_stop(project, fifo)
    assert time.monotonic() - started < 1.0
    assert '"decision": "block"' in said and usage_lines(project) == []
    fifo.unlink()
    assert '"decision"' not in claude_stop(project, fifo)  # vanished: told once already
    writer.join(timeout=1)


def test_codex_notify_records_what_its_session_spent(project: Project, tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    codex_rollout(home, token_count((100, 20, 300, 0)))
    notify = json.dumps({"type": "agent-turn-complete", "thread-id": THREAD, "turn-id": "t",
                         "cwd": str(project.worktrees["cleaner"])})  # fmt: skip
    env = {"CODEX_HOME": str(home)}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        for _ in range(2):
            done = hook(project, "stop", None, "cleaner", notify, stdin=b"")
            assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    finally:
        for key, value in old.items():
            os.environ.pop(key) if value is None else os.environ.update({key: value})
    [line] = usage_lines(project, "cleaner")
    assert (line["harness"], line["input"], line["output"], line["cache_read"]) == (
        "codex", 100, 20, 300)  # fmt: skip
