"""What the CLI prints never acts on the terminal (issue #42 item 12): text stored by anyone who
can call the API or write to the library — a question in the answers log, a note, a document —
may carry ``ESC[2J``, an OSC title, an 8-bit CSI (U+009B), a carriage return or a bidi
override; `chiezo logs`, `notes recall`, `search`, `doc` and their errors show each one
spelt out (``\\x1b``) and `--json` escapes it as JSON does, while Japanese and emoji pass.
Stored through the real API on loopback (the answer by the scripted LLM endpoint), read back
with the real CLI."""

import io
import json
import logging
import re

import httpx
import pytest
from click.testing import CliRunner

from chiezo.core.config import Settings
from chiezo.ops.context import Context
from chiezo.surfaces.cli.common import VisibleConsole
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app
from llm_stub import ScriptedLLM

from helpers import RunningServer, build_docs, wiki_library, write_files

# C0 but tab and newline, DEL, C1, bidi embeddings/overrides/isolates: what must not reach a
# terminal raw (written out here, not taken from the code under test)
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# clear the screen, retitle the window, an 8-bit CSI (red), and a name reversed by RLO;
# with text that must pass unchanged (a ZWJ family emoji)
HOSTILE = "\x1b[2J\x1b]0;pwned\x07\x9b31m evil\u202egnp.exe 京都 👨‍👩‍👧"
SHOWN = ("\\x1b[2J", "\\x1b]0;pwned\\x07", "\\x9b31m", "\\u202egnp.exe", "京都 👨‍👩‍👧")
QUESTION = "夏目漱石はいつ生まれましたか？" + HOSTILE + "\roverwritten"


def reply(body):
    if "search queries" in body["messages"][0]["content"]:
        return {"content": '{"queries": ["夏目漱石"]}'}
    return {"content": "夏目漱石は1867年2月9日に生まれた [1]。" + HOSTILE}


@pytest.fixture
def stored(tmp_path):
    """A library holding the hostile text: an answered question (asked over the API), a note
    (posted to the API) and a document (built from a file)."""
    root = wiki_library(tmp_path, [(1, "夏目漱石", "'''夏目漱石'''は1867年2月9日に生まれた。")])
    with ScriptedLLM(reply) as llm:
        settings = Settings(data_dir=root / "data", llm_url=llm.url, llm_model="stub-model")
        with RunningServer(create_app(settings)) as server:
            asked = httpx.get(f"{server.url}/v1/ask", params={"q": QUESTION}, timeout=30)
            assert asked.status_code == 200, asked.text
            note = {"text": "note " + HOSTILE + "\roverwritten", "title": "title " + HOSTILE}
            noted = httpx.post(f"{server.url}/v1/notes", json=note, timeout=30)
            assert noted.status_code == 201, noted.text
    page = f"# Kyoto {HOSTILE}\n\nTemple body {HOSTILE} end.\n"
    build_docs(Context(settings), write_files(tmp_path / "docs", {"k.md": page}), "hostile")
    return root / "data"


def chiezo(data, *args, code: int = 0):
    run = CliRunner().invoke(cli, ["--data", str(data), *args])
    assert run.exit_code == code, run.output
    return run


def assert_shown_not_obeyed(printed: str) -> None:
    assert RAW.search(printed) is None, repr(printed)
    for spelt in SHOWN:
        assert spelt in printed, (spelt, printed)


@pytest.mark.slow
def test_logs_show_a_hostile_question_and_answer_spelt_out(stored):
    printed = chiezo(stored, "logs").stdout
    assert_shown_not_obeyed(printed)
    assert "\\roverwritten" in printed  # the carriage return is shown, not obeyed
    assert "夏目漱石はいつ生まれましたか？" in printed

    as_json = chiezo(stored, "logs", "--json").stdout
    assert RAW.search(as_json) is None, repr(as_json)
    assert "\\u009b" in as_json and "\\u202e" in as_json  # escaped as JSON escapes them
    (entry,) = json.loads(as_json)["entries"]
    assert entry["question"] == QUESTION  # the very text that was asked
    assert entry["answer"].endswith(HOSTILE)


@pytest.mark.slow
def test_notes_search_doc_and_errors_show_stored_text_spelt_out(stored):
    recalled = chiezo(stored, "notes", "recall").stdout
    assert_shown_not_obeyed(recalled)
    assert "\\roverwritten" in recalled
    assert_shown_not_obeyed(chiezo(stored, "search", "Temple", "-s", "hostile").stdout)
    assert_shown_not_obeyed(chiezo(stored, "doc", "-s", "hostile", f"Kyoto {HOSTILE}").stdout)
    # an error quoting what was asked for, and the candidates it offers
    missing = chiezo(stored, "doc", "-s", "hostile", f"Kyot {HOSTILE}", code=3).stderr
    assert_shown_not_obeyed(missing)
    notes = json.loads(chiezo(stored, "notes", "recall", "--json").stdout)["notes"]
    assert notes[0]["title"] == "title " + HOSTILE


def test_styling_still_reaches_a_terminal_and_stored_text_does_not():
    """On a terminal the console's own escape codes (bold) are kept; only the text's are
    spelt out."""
    screen = io.StringIO()
    terminal = VisibleConsole(
        file=screen, force_terminal=True, color_system="standard", highlight=False
    )
    terminal.print(f"[bold]{HOSTILE}[/]")
    printed = screen.getvalue()
    assert printed.startswith("\x1b[1m")  # bold, from the console itself
    assert RAW.search(re.sub(r"\x1b\[[0-9;]*m", "", printed)) is None, repr(printed)
    assert all(spelt in printed for spelt in SHOWN)


def test_a_warning_logged_while_a_command_runs_is_spelt_out(tmp_path, capsys):
    """A process with no logging set up prints warnings through logging's last resort, and a
    traceback may quote a request's text (`chiezo serve`: "unexpected error on PATH")."""
    chiezo(tmp_path / "data", "sources")
    record = logging.makeLogRecord(
        {"msg": "unexpected error on %s", "args": ("/v1/" + HOSTILE,), "levelno": logging.ERROR}
    )
    logging.lastResort.handle(record)
    assert_shown_not_obeyed(capsys.readouterr().err)
