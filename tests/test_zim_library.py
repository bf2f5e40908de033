"""A Kiwix library (a folder of ZIM files) with broken files in it: each one — empty,
truncated, not a ZIM, a directory named ``*.zim``, a dangling link — is skipped and named with
why, the others are built and searchable; the command fails only when none can be built.
And two pairs of files that would each be one source are refused with a line for each pair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery, InputError
from chiezo.ops import building, operating, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import SearchRequest
from chiezo.store.kinds import Skipped
from chiezo.surfaces.cli.main import cli

from helpers import zim_page


def write_zim(path: Path, name: str, title: str, text: str) -> Path:
    """A ZIM of one article, ``A/{title}``, whose Name metadata is ``name``."""
    from libzim.writer import Creator

    with Creator(str(path)).config_indexing(False, "eng") as creator:
        creator.add_metadata("Name", name)
        html = f"<html><body><h1>{title}</h1><p>{text}</p></body></html>"
        creator.add_item(zim_page(f"A/{title}", title, html))
    return path


def truncated(path: Path) -> None:
    whole = write_zim(path, "cut", "Cut", "never read").read_bytes()
    path.write_bytes(whole[: len(whole) // 2])


# each broken kind: how it is made in the library, and what the skip says of it
BROKEN = {
    "empty": (lambda p: p.write_bytes(b""), "an empty file"),
    "not_a_zim": (lambda p: p.write_text("<html>a page saved as .zim</html>"), "not a ZIM file"),
    "truncated": (truncated, "truncated or damaged"),
    "directory": (lambda p: p.mkdir(), "a directory"),
    "dangling_link": (lambda p: p.symlink_to(p.parent / "gone.zim"), "a broken link"),
}


def library(root: Path, broken: list[str]) -> Path:
    """A folder with one good ZIM (source zim_teas) and a file of each ``broken`` kind."""
    folder = root / "kiwix"
    folder.mkdir()
    write_zim(folder / "teas.zim", "teas", "Sencha", "Sencha is a steamed green tea.")
    for kind in broken:
        BROKEN[kind][0](folder / f"{kind}.zim")
    return folder


def assert_the_good_book_is_searchable(data: Path) -> None:
    service = Context(Settings(data_dir=data))
    hits = searching.search(
        service, SearchRequest.of(query="steamed green tea", source="zim_teas")
    ).hits
    assert [hit.title for hit in hits] == ["Sencha"]


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_the_service_skips_a_broken_file_and_builds_the_rest(tmp_path, kind):
    folder = library(tmp_path, [kind])
    service = Context(Settings(data_dir=tmp_path / "data"))
    outcomes = list(building.ingest_each(service, "zim", [folder]))
    skipped = [report for _, report in outcomes if isinstance(report, Skipped)]
    assert [one.input for one in skipped] == [str(folder / f"{kind}.zim")]
    assert skipped[0].why.startswith(BROKEN[kind][1])
    built = {name: report for name, report in outcomes if not isinstance(report, Skipped)}
    assert list(built) == ["zim_teas"] and built["zim_teas"].docs == 1
    assert_the_good_book_is_searchable(tmp_path / "data")


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_the_command_names_a_skipped_file_and_why_and_exits_zero(tmp_path, kind):
    folder = library(tmp_path, [kind])
    data = tmp_path / "data"
    result = CliRunner().invoke(cli, ["--data", str(data), "ingest", "zim", str(folder)])
    assert result.exit_code == 0, result.output
    bad = folder / f"{kind}.zim"
    assert f"skipped {bad}: {BROKEN[kind][1]}" in result.stdout
    assert "built zim_teas: 1 documents" in result.stdout
    assert f"1 of 2 inputs not built: {bad}" in result.stdout  # said again at the end
    assert_the_good_book_is_searchable(data)


def test_every_broken_kind_at_once_is_listed_in_the_json_report(tmp_path):
    folder = library(tmp_path, sorted(BROKEN))
    data = tmp_path / "data"
    result = CliRunner().invoke(cli, ["--data", str(data), "ingest", "zim", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    skipped = {Path(one["input"]).stem: one["skipped"] for one in shown if "skipped" in one}
    assert set(skipped) == set(BROKEN)
    for kind, why in skipped.items():
        assert why.startswith(BROKEN[kind][1]), (kind, why)
    assert [one["name"] for one in shown if "name" in one] == ["zim_teas"]
    assert_the_good_book_is_searchable(data)


def test_a_library_with_nothing_to_build_fails_naming_each_file_and_why(tmp_path):
    folder = library(tmp_path, sorted(BROKEN))
    (folder / "teas.zim").unlink()
    data = tmp_path / "data"
    result = CliRunner().invoke(cli, ["--data", str(data), "ingest", "zim", str(folder)])
    assert result.exit_code != 0
    assert "no zim source can be built" in result.stderr
    for kind, (_, why) in BROKEN.items():
        assert f"{folder / kind}.zim: {why}" in result.stderr
    with pytest.raises(InputError, match="empty.zim: an empty file"):
        list(building.ingest_each(Context(Settings(data_dir=data)), "zim", [folder]))
    assert operating.sources(Context(Settings(data_dir=data))) == []


def test_two_pairs_of_files_sharing_a_name_are_said_pair_by_pair(tmp_path):
    folder = tmp_path / "kiwix"
    folder.mkdir()
    for file, name in (("a", "teas"), ("b", "teas"), ("c", "maps"), ("d", "maps")):
        write_zim(folder / f"{file}.zim", name, file.upper(), f"page {file}")
    service = Context(Settings(data_dir=tmp_path / "data"))
    with pytest.raises(BadQuery) as refused:
        list(building.ingest_each(service, "zim", [folder]))
    assert refused.value.message.splitlines() == [
        f"{folder / 'c.zim'}, {folder / 'd.zim'} would all be source zim_maps",
        f"{folder / 'a.zim'}, {folder / 'b.zim'} would all be source zim_teas",
    ]
    result = CliRunner().invoke(
        cli, ["--data", str(tmp_path / "data"), "ingest", "zim", str(folder)]
    )
    assert result.exit_code != 0
    assert f"{folder / 'a.zim'}, {folder / 'b.zim'} would all be source zim_teas" in result.stderr
    assert f"{folder / 'c.zim'}, {folder / 'd.zim'} would all be source zim_maps" in result.stderr
    assert operating.sources(service) == []  # refused before any build
