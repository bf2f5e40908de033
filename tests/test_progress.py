"""Progress that never goes silent (issue 19): real builds and embeddings, watched through a
Progress that timestamps every call, the CLI's bars and a background job's polled phase."""

from __future__ import annotations

import io
import re
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from chiezo.core import progress as progress_module
from chiezo.core.progress import RichProgress, Ticking, ticking
from chiezo.ingest.documents import DocsOptions
from chiezo.ops import building
from chiezo.ops.context import Context
from chiezo.ops.jobs import JobProgress, JobRunner
from chiezo.surfaces.cli.main import cli

from helpers import write_files

MODEL = "use-m"  # the fast built-in embedder (tests/test_semantic.py)
TICK = 0.05  # the heartbeat in these tests: far below the gap they allow
MAX_GAP = 1.0  # a 2-core CI machine under load still updates within this (production: 1 s ticks)
FILES = {
    "sensoji.md": "---\ntitle: 浅草寺\ntags: [寺院]\n---\n東京都台東区にある寺。雷門で知られる。\n",
    "kiyomizu.md": "# 清水寺\n\n京都市東山区の寺。清水の舞台から飛び降りる、という言い回しがある。\n",
    "tea.md": "# Tea ceremony\n\nA host prepares matcha for guests. Sen no Rikyū shaped it.\n",
    "broken.docx": b"not a zip at all",  # a file that is skipped still counts as read
}
SAMPLE = Path(__file__).resolve().parents[1] / "sample"  # the folder the README builds


class Recorder:
    """A Progress that keeps every call as ``(t, call, phase, done, total)``; the heartbeat
    calls from another thread, hence the lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[float, str, str | None, int, int | None]] = []
        self.name: str | None = None
        self.done, self.total = 0, None
        self.warnings: list[str] = []
        self.closed = False

    def _note(self, call: str) -> None:
        self.events.append((time.monotonic(), call, self.name, self.done, self.total))

    def phase(self, name, total=None, unit="docs") -> None:
        with self.lock:
            self.name, self.done, self.total = name, 0, total
            self._note("phase")

    def advance(self, n=1) -> None:
        with self.lock:
            self.done += n
            self._note("advance")

    def retotal(self, total) -> None:
        with self.lock:
            self.total = total
            self._note("retotal")

    def warn(self, message) -> None:
        self.warnings.append(message)

    def close(self) -> None:
        self.closed = True

    def phases(self) -> list[str]:
        return [name for _, call, name, _, _ in self.events if call == "phase"]

    def ends(self) -> dict[str, tuple[int, int | None]]:
        """Each phase's (count, total) as it was left."""
        return {name: (done, total) for _, _, name, done, total in self.events}


def over_total(events) -> list:
    return [e for e in events if e[4] is not None and e[3] > e[4]]


def longest_gaps(events, longer_than: float) -> dict[str, float]:
    """Per phase that lasted more than ``longer_than`` s (until the next phase began): the
    longest time without a call, the silence before the next phase included."""
    spans: list[tuple[str, list[float]]] = []
    for t, call, name, *_ in events:
        if call == "phase":
            if spans:
                spans[-1][1].append(t)
            spans.append((name, []))
        spans[-1][1].append(t)
    gaps = {}
    for name, times in spans:
        if times[-1] - times[0] > longer_than:
            gaps[name] = max(b - a for a, b in zip(times, times[1:], strict=False))
    return gaps


@pytest.fixture
def docs(tmp_path):
    from openpyxl import Workbook

    folder = write_files(tmp_path / "docs", FILES)
    book = Workbook()  # one file, three documents: the cause of "reading 139/138"
    book.active.title = "東京"
    book.active.append(["名前", "区"])
    book.active.append(["浅草寺", "台東区"])
    for title, row in (("京都", ["清水寺", "東山区"]), ("奈良", ["東大寺", "奈良市"])):
        sheet = book.create_sheet(title)
        sheet.append(["名前", "区"])
        sheet.append(row)
    book.save(folder / "temples.xlsx")
    return folder


@pytest.fixture
def fast_ticks(monkeypatch):
    monkeypatch.setattr(progress_module, "TICK_S", TICK)


# -- a real build and embedding, every call timestamped -------------------------------------------


@pytest.mark.slow
def test_a_build_and_its_embedding_never_go_silent_nor_count_past_a_total(
    settings, docs, fast_ticks
):
    recorder = Recorder()
    report = building.ingest(
        Context(settings), "docs", docs, "kb", options=DocsOptions(), progress=recorder, embed=MODEL
    )
    assert report.docs == 3 + 3 and report.embedding["embedded_chunks"] == report.chunks

    phases = recorder.phases()
    build = [
        "reading",
        "ordering by popularity",
        "writing documents",
        "writing tags, links, chunks",
        "indexing",
        "indexing full text",
        "merging full-text segments",
        "counting trigrams",
        "splitting words",
        "indexing words",
        "counting tags and attributes",
        "validating",
        "switching",
    ]
    embedding = [
        f"loading {MODEL}",
        f"embedding with {MODEL}",
        "copying the generation",
        "writing vectors",
        "building the vector index",
        "calibrating",
        "checking and switching",
    ]
    assert phases == build + embedding
    assert over_total(recorder.events) == []
    # a phase cut into counted steps ends at its total: the count is exact, not a guess
    ends = recorder.ends()
    assert ends["reading"] == (5, 5)  # files, not the 6 documents they hold
    for name, (done, total) in ends.items():
        assert total is None or done == total, name
    assert ends["writing vectors"][1] == report.embedding["vectors"]
    assert ends["building the vector index"][1] == report.embedding["vectors"]
    # the heartbeat: no phase of more than 0.3 s went MAX_GAP without an update...
    gaps = longest_gaps(recorder.events, longer_than=0.3)
    assert max(gaps.values(), default=0.0) < MAX_GAP, gaps  # (a fast machine has no long phase)
    assert not recorder.closed  # the display belongs to the caller, also after the build


@pytest.mark.slow
def test_a_slow_model_batch_does_not_silence_the_embedding(settings, docs, fast_ticks, monkeypatch):
    from chiezo.store import embed

    real = embed.get_embedder(MODEL)

    class Slow:  # the real model, its first batch as slow as e5-small's on 2 cores (~18 s)
        name, dim, slow = real.name, real.dim, True

        def embed(self, texts, kind="passage"):
            if kind == "passage" and self.slow:
                self.slow = False
                time.sleep(3 * MAX_GAP)
            return real.embed(texts, kind)

    monkeypatch.setattr(embed, "get_embedder", lambda model: Slow())
    service = Context(settings)
    building.ingest(service, "docs", docs, "kb", options=DocsOptions())
    recorder = Recorder()
    building.embed(service, "kb", MODEL, progress=recorder)
    assert recorder.phases()[0] == f"loading {MODEL}"
    assert over_total(recorder.events) == []
    gaps = longest_gaps(recorder.events, longer_than=0.3)
    assert f"embedding with {MODEL}" in gaps  # it lasted, and
    assert max(gaps.values()) < MAX_GAP, gaps  # it was never silent


# -- the heartbeat itself ---------------------------------------------------------------------------


@pytest.mark.slow
def test_the_heartbeat_ticks_while_the_work_is_silent_and_stops_with_the_block():
    recorder = Recorder()
    with ticking(recorder, interval=TICK) as shown:
        assert isinstance(shown, Ticking)
        with ticking(shown) as again:  # a builder inside a command: one heartbeat, not two
            assert again is shown
        shown.phase("one long statement", None, "steps")
        time.sleep(TICK * 10)
    beats = [e for e in recorder.events if e[1] == "advance"]
    assert 4 <= len(beats) <= 12 and all(e[3] == 0 for e in beats)
    stopped = len(recorder.events)
    time.sleep(TICK * 4)
    assert len(recorder.events) == stopped and not recorder.closed  # stopped, not closed


@pytest.mark.slow
def test_a_heartbeat_waits_while_the_work_reports():
    recorder = Recorder()
    shown = Ticking(recorder, interval=0.3)
    shown.phase("busy", 100)
    for _ in range(20):
        shown.advance(1)
        time.sleep(0.02)
    shown.close()
    assert [e[3] for e in recorder.events if e[1] == "advance"] == list(range(1, 21))
    assert recorder.closed


# -- what is shown ----------------------------------------------------------------------------------


def _rendered(progress: RichProgress) -> str:
    console = Console(file=io.StringIO(), width=160)
    console.print(progress._bar.make_tasks_table(progress._bar.tasks))
    return console.file.getvalue()


@pytest.mark.slow
def test_the_rich_bar_moves_its_rate_and_eta_between_updates_and_never_shows_more_than_all():
    shown = RichProgress(Console(file=io.StringIO(), width=160, force_terminal=True))
    try:
        shown.phase("embedding with use-m", 100, "chunks")
        shown.advance(10)
        first = _rendered(shown)
        time.sleep(1.2)
        later = _rendered(shown)  # no update in between: the ETA is worked out as it is drawn
        eta = [int(text.split("ETA ")[1].split()[0]) for text in (first, later)]
        assert "10/100" in first and "chunks/s" in first and eta[1] > eta[0]
        shown.retotal(8)  # an estimate the count has passed
        assert re.search(r"\b10/10\b", _rendered(shown)) and "/8" not in _rendered(shown)
        shown.close()
        shown.phase("after close", 3, "steps")  # a phase after close is shown again
        assert shown._bar.live.is_started and "steps/s" not in _rendered(shown)
    finally:
        shown.close()


@pytest.mark.slow
def test_off_a_terminal_each_phase_is_a_line_and_a_long_one_repeats_it(monkeypatch):
    monkeypatch.setattr(progress_module, "PLAIN_EVERY_S", 0.2)
    log = io.StringIO()  # e.g. a service's journal: a live display would print only at the end
    shown = Ticking(RichProgress(Console(file=log, width=160)), interval=TICK)
    shown.phase("embedding with use-m", 100, "chunks")
    shown.advance(10)
    time.sleep(0.7)  # one model batch: no update but the heartbeat's
    running = log.getvalue().splitlines()
    shown.advance(90)
    shown.phase("building the vector index", 5, "vectors")
    shown.close()
    lines = log.getvalue().splitlines()
    assert len(running) >= 2 and all("10/100" in line and "ETA" in line for line in running)
    assert "100/100" in lines[len(running)] and "building the vector index" in lines[-1]


@pytest.mark.slow
def test_a_job_phase_polled_has_a_live_rate_and_eta_and_no_count_past_its_total():
    job = JobProgress()
    job.phase("embedding with use-m", 100, "chunks")
    time.sleep(0.2)
    job.advance(20)
    first = job.snapshot()["phase"]
    time.sleep(0.3)
    later = job.snapshot()["phase"]
    assert first["done"] == 20 and first["rate"] > 0 and first["eta_s"] > 0
    assert later["elapsed_s"] > first["elapsed_s"] and later["eta_s"] > first["eta_s"]
    job.retotal(10)
    assert job.snapshot()["phase"]["total"] == 20  # an estimate passed shows as the count
    job.phase("validating", 4, "checks")
    assert job.snapshot()["log"][-1]["text"] == "validating"  # steps are not "(4 checks)"


@pytest.mark.slow
def test_the_cli_shows_the_embedding_after_the_build(tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "--data",
            str(tmp_path / "data"),
            "ingest",
            "docs",
            str(SAMPLE),
            "--name",
            "sample",
            "--embed",
            MODEL,
        ],
    )
    assert result.exit_code == 0, result.output
    shown = result.stderr
    # the build used to close the display, and everything after it went unseen
    for phase in (
        "reading",
        "validating",
        f"embedding with {MODEL}",
        "building the vector index",
        "calibrating",
        "checking and switching",
    ):
        assert phase in shown, phase
    assert "5/5" in shown and "files/s" in shown
    assert "embedded" in result.stdout


@pytest.mark.slow
def test_a_rebuild_job_with_embedding_shows_the_embedding_phase_to_pollers(settings, docs):
    service = Context(settings)
    building.ingest(service, "docs", docs, "kb", options=DocsOptions(), embed=MODEL)
    job = JobRunner(service).start("kb", "rebuild")  # re-embeds with the model it had
    seen = []
    while not job.wait(0.02):
        seen.append(job.to_dict(with_log=False)["phase"])
    done = job.to_dict()
    assert done["state"] == "done", done
    assert done["result"]["embedding"]["model"] == MODEL
    assert f"embedding with {MODEL}" in job.progress.phases
    assert "building the vector index (" in " ".join(line["text"] for line in done["log"])
    polled = [p for p in seen if p]
    assert polled and all(p["total"] is None or p["done"] <= p["total"] for p in polled)
    assert any(p["rate"] and p["eta_s"] is not None for p in polled)
