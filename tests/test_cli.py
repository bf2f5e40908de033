"""The CLI: output, JSON, and exit codes scripts can rely on."""

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from chiezo.cli import cli

from helpers import write_files

FILES = {
    "a.md": "# 浅草寺\n\n東京都台東区にある寺。\n",
    "b.md": "# 台東区\n\n台東区には浅草寺がある。\n",
}


@pytest.fixture
def runner(tmp_path):
    data = tmp_path / "data"
    folder = write_files(tmp_path / "docs", FILES)
    runner = CliRunner()
    result = runner.invoke(cli, ["--data", str(data), "ingest", "docs", str(folder), "--name", "t"])
    assert result.exit_code == 0, result.output

    def run(*args):
        return runner.invoke(cli, ["--data", str(data), *args])

    return run


def test_ingest_reports_what_it_built(tmp_path):
    folder = write_files(tmp_path / "docs", FILES)
    result = CliRunner().invoke(
        cli, ["--data", str(tmp_path / "d"), "ingest", "docs", str(folder), "--name", "t", "--json"]
    )
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["docs"] == 2 and report["name"] == "t"


def test_search_prints_hits_and_exits_zero(runner):
    result = runner("search", "浅草寺")
    assert result.exit_code == 0
    assert "浅草寺" in result.stdout and "mode" in result.stdout


def test_search_json_has_hits_total_and_mode(runner):
    result = runner("search", "浅草寺", "--source", "t", "--json")
    data = json.loads(result.stdout)
    assert data["total"] == 2 and data["mode"] == "fts"
    assert data["hits"][0]["title"] == "浅草寺" and data["hits"][0]["title_match"]


def test_nothing_found_exits_3(runner):
    result = runner("search", "存在しない語句です", "-s", "t")
    assert result.exit_code == 3


def test_unknown_source_exits_2_and_lists_known_sources(runner):
    result = runner("search", "浅草寺", "-s", "nope")
    assert result.exit_code == 2
    assert "known sources: t" in result.stderr
    as_json = runner("search", "浅草寺", "-s", "nope", "--json")
    assert json.loads(as_json.stdout)["known_sources"] == ["t"]


def test_usage_errors_exit_2(runner):
    assert runner("search").exit_code == 2
    assert runner("search", "x", "--limit", "500").exit_code == 2
    assert runner("doc", "-s", "t").exit_code == 2


def test_doc_by_title_and_by_id(runner):
    result = runner("doc", "浅草寺", "-s", "t", "--json")
    data = json.loads(result.stdout)
    assert data["title"] == "浅草寺" and "台東区" in data["body"]
    by_id = json.loads(runner("doc", "-s", "t", "--id", str(data["doc_id"]), "--json").stdout)
    assert by_id["key"] == "a.md"


def test_doc_not_found_exits_3_with_candidates(runner):
    result = runner("doc", "浅草", "-s", "t")
    assert result.exit_code == 3
    assert "did you mean: 浅草寺" in result.stderr


def test_doc_with_unknown_fields_lists_the_allowed_ones(runner):
    result = runner("doc", "浅草寺", "-s", "t", "--fields", "title,nonsense", "--json")
    assert result.exit_code == 2
    assert "title" in json.loads(result.stdout)["allowed_fields"]


def test_sources_lists_counts(runner):
    data = json.loads(runner("sources", "--json").stdout)
    assert data[0]["name"] == "t" and data[0]["docs"] == 2 and data[0]["kind"] == "docs"


def test_the_installed_command_runs_end_to_end(tmp_path):
    """The real entry point in a separate process: build, search, exit codes."""
    env = {**os.environ, "CHIEZO_DATA": str(tmp_path / "data")}
    folder = write_files(tmp_path / "docs", FILES)

    def chiezo(*args):
        return subprocess.run(
            [sys.executable, "-m", "chiezo", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    built = chiezo("ingest", "docs", str(folder), "--name", "t")
    assert built.returncode == 0, built.stderr
    assert chiezo("search", "台東区", "--json").returncode == 0
    assert chiezo("search", "見つからない語句", "--json").returncode == 3
    missing = chiezo("ingest", "docs", str(tmp_path / "missing"), "--name", "t")
    assert missing.returncode == 2 and "no such folder" in missing.stderr
    assert chiezo("search", "台東区", "-s", "t").returncode == 0  # still serving
