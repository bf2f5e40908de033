"""docs/operations.md says what an operator runs; what it says is run here: the systemd unit is
checked by systemd-analyze, the notes backup one-liner makes a consistent copy while the notes
are written. (Its llama.cpp command line is started by tests/test_answer_e2e.py.)"""

import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from chiezo.core.config import Settings
from chiezo.ops import remembering
from chiezo.ops.context import Context
from chiezo.ops.requests import RememberRequest

DOC = Path(__file__).resolve().parents[1] / "docs" / "operations.md"


def block(language: str, containing: str) -> str:
    """The first fenced block of ``language`` in docs/operations.md containing ``containing``."""
    for found in re.finditer(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S):
        if containing in found.group(1):
            return found.group(1)
    raise AssertionError(f"no ```{language} block with {containing!r} in {DOC.name}")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not here")
def test_the_systemd_unit_is_accepted_by_systemd_analyze(tmp_path):
    unit = block("ini", "ExecStart=")
    chiezo = Path(sys.executable).with_name("chiezo")
    assert chiezo.exists()
    # the documented install places, pointed at this checkout (verify checks they exist)
    unit = unit.replace("/opt/chiezo/.venv/bin/chiezo", str(chiezo))
    unit = unit.replace("WorkingDirectory=/opt/chiezo", f"WorkingDirectory={tmp_path}")
    path = tmp_path / "chiezo.service"
    path.write_text(unit, encoding="utf-8")
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "chiezo.service" not in done.stderr, done.stderr  # no warning about our unit
    assert "serve --host 127.0.0.1" in unit and "ReadWritePaths=/var/lib/chiezo" in unit


def test_the_notes_backup_one_liner_copies_notes_while_they_are_written(tmp_path):
    settings = Settings(data_dir=tmp_path / "data")
    service = Context(settings)
    for i in range(50):
        remembering.remember(service, RememberRequest.of(text=f"覚え書き {i}", tags=["backup"]))
    stop = threading.Event()

    def keep_writing() -> None:
        i = 0
        while not stop.is_set():
            remembering.remember(Context(settings), RememberRequest.of(text=f"書き足し {i}"))
            i += 1

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        line = block("sh", "s.backup(d)")
        command = line.strip().replace("data/notes/notes.db", str(settings.notes_path))
        command = command.replace("notes-$(date +%F).db", str(tmp_path / "copy.db"))
        command = command.replace("python -c", f"{sys.executable} -c", 1)
        done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=60)
    finally:
        stop.set()
        writer.join()
    assert done.returncode == 0, done.stderr
    import sqlite3

    copy = sqlite3.connect(tmp_path / "copy.db")
    assert copy.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    titles = [r[0] for r in copy.execute("SELECT title FROM docs")]
    assert sum(t.startswith("覚え書き") for t in titles) == 50


def test_every_command_the_page_names_exists():
    from click.testing import CliRunner

    from chiezo.surfaces.cli.main import cli

    text = DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"`chiezo ([a-z]+)", text))
    assert named >= {"serve", "rebuild", "sources", "doctor"}
    for command in sorted(named):
        result = CliRunner().invoke(cli, [command, "--help"])
        assert result.exit_code == 0, f"chiezo {command}: {result.output}"
