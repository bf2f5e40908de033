"""Which sources "all sources" means (issue 32 item 1): a per-source ``in_default`` setting,
kept beside the source's generations, off for the bundled samples; the hits' notes name the
sources left out, and a source left out is still searched when named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery, UnknownSource
from chiezo.ops import building, operating, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import ConfigureRequest, SearchRequest
from chiezo.surfaces.cli.main import cli

from helpers import TEMPLE_PAGES, wiki_library

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def data(tmp_path) -> Path:
    data = wiki_library(tmp_path, TEMPLE_PAGES) / "data"
    building.ingest(Context(Settings(data_dir=data)), "docs", ROOT / "sample", "guide", embed=False)
    return data


def run(data: Path, *args: str):
    return CliRunner().invoke(cli, ["--data", str(data), *args])


def sources_of(service: Context, query: str, source: str | None = None) -> tuple[set, list]:
    result = searching.search(service, SearchRequest.of(query=query, source=source, limit=20))
    return {h.source for h in result.hits}, [str(n) for n in result.notes]


def test_a_source_left_out_is_not_in_all_sources_but_is_when_named(data):
    service = Context(Settings(data_dir=data))
    assert sources_of(service, "Chiezo")[0] == {"guide"}  # every source is in by default
    assert run(data, "sources", "set", "guide", "--not-in-default").exit_code == 0
    found, notes = sources_of(service, "浅草寺")
    assert found == {"jawiki"}
    assert any("not searched by default: guide" in n for n in notes), notes
    assert sources_of(service, "Chiezo", source="guide")[0] == {"guide"}
    listed = {i["name"]: i for i in operating.sources(service)}
    assert listed["guide"]["in_default"] is False and listed["jawiki"]["in_default"] is True
    assert "searched when named" in run(data, "sources").output
    assert run(data, "sources", "set", "guide", "--in-default").exit_code == 0
    assert "guide" in sources_of(service, "Chiezo")[0]


def test_the_setting_outlives_a_rebuild_and_a_bad_file_is_the_default(data):
    service = Context(Settings(data_dir=data))
    building.configure(service, ConfigureRequest.of(source="guide", in_default=False))
    assert run(data, "rebuild", "guide").exit_code == 0
    assert service.library.settings_of("guide").in_default is False
    (data / "corpus" / "guide" / "settings.json").write_text("{not json")
    assert service.library.settings_of("guide").in_default is True


def test_a_library_of_only_sources_left_out_searches_them_all(data):
    service = Context(Settings(data_dir=data))
    for name in ("guide", "jawiki"):
        building.configure(service, ConfigureRequest.of(source=name, in_default=False))
    found, notes = sources_of(service, "浅草寺")
    assert "jawiki" in found and not any("not searched" in n for n in notes)
    assert sources_of(service, "Chiezo")[0] == {"guide"}


def test_what_cannot_be_set(data):
    service = Context(Settings(data_dir=data))
    with pytest.raises(UnknownSource):
        building.configure(service, ConfigureRequest.of(source="nosuch", in_default=False))
    with pytest.raises(BadQuery, match="notes"):
        building.configure(service, ConfigureRequest.of(source="notes", in_default=False))
    assert run(data, "sources", "set", "guide").exit_code == 2  # say which
    shown = run(data, "sources", "set", "guide", "--not-in-default", "--json")
    assert json.loads(shown.output) == {"source": "guide", "in_default": False}
