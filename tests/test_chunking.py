"""Chunking choices (issue 32 item 7): the passage size of a documents source is an option of
``ingest docs``, recorded so a rebuild cuts the same way, and ``chiezo eval --ab`` shows each
side's top hits with score, section breadcrumb and the opening of the passage (and writes the
same to JSON), as the chunking A/B design describes."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from chiezo.core.config import Settings
from chiezo.ops import operating
from chiezo.ops.context import Context
from chiezo.surfaces.cli.main import cli

from helpers import write_files

LONG = "\n\n".join(
    f"段落{i}では、{topic}について詳しく説明する。" * 6
    for i, topic in enumerate(("港の歴史", "灯台の仕組み", "漁業の暮らし", "祭りの由来"))
)
FILES = {
    "港町.md": f"# 港町\n\n## 歴史と暮らし\n\n{LONG}\n",
    "山里.md": "# 山里\n\n## 四季\n\n山里の四季は美しい。冬は雪が深い。\n",
}


def run(data: Path, *args: str):
    return CliRunner().invoke(cli, ["--data", str(data), *args])


def info_of(data: Path, name: str) -> dict:
    return {i["name"]: i for i in operating.sources(Context(Settings(data_dir=data)))}[name]


def chunks_of(data: Path, name: str) -> int:
    return info_of(data, name)["chunks"]


def test_the_passage_size_is_an_option_kept_for_rebuilds(tmp_path):
    folder = write_files(tmp_path / "docs", FILES)
    data = tmp_path / "data"
    assert run(data, "ingest", "docs", str(folder), "--name", "big", "--no-embed").exit_code == 0
    small = run(
        data, "ingest", "docs", str(folder), "--name", "small", "--chunk-chars", "150", "--no-embed"
    )
    assert small.exit_code == 0, small.output
    big_count, small_count = chunks_of(data, "big"), chunks_of(data, "small")
    assert small_count > big_count
    assert run(data, "rebuild", "small").exit_code == 0
    assert chunks_of(data, "small") == small_count  # rebuilt the same way
    assert info_of(data, "small")["input"]["options"]["chunk_chars"] == 150
    assert (
        run(data, "ingest", "docs", str(folder), "--name", "x", "--chunk-chars", "5").exit_code == 2
    )


def test_eval_ab_shows_each_sides_hits_with_score_section_and_passage(tmp_path):
    folder = write_files(tmp_path / "docs", FILES)
    data = tmp_path / "data"
    for name, size in (("big", "800"), ("small", "150")):
        built = run(
            data, "ingest", "docs", str(folder), "--name", name, "--chunk-chars", size, "--no-embed"
        )
        assert built.exit_code == 0, built.output
    questions = tmp_path / "q.jsonl"
    rows = [
        {"question": "灯台の仕組み", "relevant_titles": ["港町"]},
        {"question": "山里の冬", "relevant_titles": ["山里"]},
        {"question": "祭りの由来", "relevant_titles": ["山里"]},  # the wrong one: a difference
    ]
    questions.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows))
    shown = run(
        data,
        "eval",
        "big",
        str(questions),
        "--ab",
        "source=big",
        "source=small",
        "--show",
        "5",
        "--json",
    )
    assert shown.exit_code == 0, shown.output
    report = json.loads(shown.output)
    assert [r["config"] for r in report["results"]] == ["source=big", "source=small"]
    every = run(data, "eval", "big", str(questions), "--ab", "source=big", "source=big", "--json")
    assert json.loads(every.output)["differences"] == []  # the same side twice differs nowhere
    table = run(data, "eval", "big", str(questions), "--ab", "source=big", "source=small")
    assert "source=small" in table.output


def test_a_difference_lists_hits_with_their_passages():
    from chiezo.ops.evaluate import Question, Scores, differing

    hit = {
        "title": "港町",
        "relevant": True,
        "score": 0.91,
        "section": "歴史と暮らし",
        "passage": "段落1では、灯台の仕組みについて",
    }
    a = Scores({"source": "big"}, ranks=[1], gains=[1.0], top=[[hit]])
    b = Scores({"source": "small"}, ranks=[None], gains=[0.0], top=[[{**hit, "relevant": False}]])
    (row,) = differing(a, b, [Question("灯台", frozenset(), frozenset({"港町"}))], 5)
    assert row["a_hits"][0]["section"] == "歴史と暮らし" and row["a_hits"][0]["score"] == 0.91
    assert row["a_hits"][0]["passage"].startswith("段落1") and row["b_rank"] is None


def test_a_recorded_passage_size_outside_its_bounds_is_refused_not_used():
    """The record is read back from a stored or imported generation: an archive saying
    chunk_chars 0 (or a huge one) is refused at rebuild, as the flag would refuse it."""
    import pytest

    from chiezo.core.errors import BadQuery
    from chiezo.store.kinds import kind_named

    docs = kind_named("docs")
    assert docs.options_from_record({"options": {"chunk_chars": 300}}).chunk_chars == 300
    for hostile in (0, -5, 10**12):
        with pytest.raises(BadQuery, match="chunk_chars"):
            docs.options_from_record({"options": {"chunk_chars": hostile}})
