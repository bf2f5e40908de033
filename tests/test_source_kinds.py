"""The seam for source kinds (store/kinds.py): a kind registered here, in the test, is built
by its generated ``chiezo ingest`` command, rebuilt by ``chiezo rebuild`` and by a server job
with the options it was built with, attributed by its own line — with no other module touched."""

import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from chiezo.core.errors import BadQuery
from chiezo.core.models import Chunk, Doc
from chiezo.ops import building, operating, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import SearchRequest
from chiezo.store.kinds import (
    Attribution,
    Capabilities,
    SourceKind,
    kind_named,
    kinds,
    option_field,
    recorded_options,
    register,
    unregister,
)
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app

from helpers import LOCAL, build_source


@dataclass
class LinesOptions:
    prefix: str = option_field("", help="Put this before every title.")
    skip: tuple[str, ...] = option_field((), help="Leave out lines starting with these.")


class LinesKind(SourceKind):
    """One document per line of a text file: the smallest kind there can be."""

    name = "lines"
    summary = "Build source NAME from a text file, one document per line."
    Options = LinesOptions
    argument = "FILE"
    capabilities = Capabilities(headed_pages=True)

    def build(self, settings, inputs, name, options, build, progress):
        path = inputs[0]
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        docs = [
            Doc(key=str(i), title=options.prefix + line, body=line, chunks=[Chunk(line)])
            for i, line in enumerate(lines, 1)
            if not line.startswith(options.skip or "\0")
        ]
        identity = {"path": str(path.resolve()), "options": recorded_options(options)}
        return build_source(
            settings,
            name,
            self.name,
            docs,
            input_identity=identity,
            options=build,
            progress=progress,
        )

    def attribution(self, info):
        return Attribution(f"lines of {Path(info.input['path']).name}", "CC0-1.0")


@pytest.fixture
def lines_kind():
    kind = register(LinesKind())
    yield kind
    unregister(kind.name)


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "haiku.txt"
    path.write_text("古池や\n蛙飛び込む\n# 注\n水の音\n", encoding="utf-8")
    return path


def run(settings, *args):
    return CliRunner().invoke(cli, ["--data", str(settings.data_dir), *args])


def test_a_registered_kind_has_its_ingest_command_with_its_options(lines_kind, settings, text_file):
    listed = run(settings, "ingest", "--help")
    assert "lines" in listed.output and "one document per line" in listed.output
    helped = run(settings, "ingest", "lines", "--help")
    assert "--prefix" in helped.output and "--skip" in helped.output and "FILE" in helped.output

    built = run(
        settings,
        "ingest",
        "lines",
        str(text_file),
        "--name",
        "haiku",
        "--prefix",
        "句: ",
        "--skip",
        "#",
        "--json",
    )
    assert built.exit_code == 0, built.output
    service = Context(settings)
    titles = [
        h.title
        for h in searching.search(service, SearchRequest.of(query="蛙", source="haiku")).hits
    ]
    assert titles == ["句: 蛙飛び込む"]
    assert service.library.get("haiku").info().docs == 3  # "# 注" left out

    missing = run(settings, "ingest", "lines", str(text_file))
    assert missing.exit_code == 2 and "--name" in missing.output  # no default name: required


def test_attribution_and_capabilities_come_from_the_kind(lines_kind, settings, service, text_file):
    building.ingest(service, "lines", text_file, "haiku", options=LinesOptions(prefix="句: "))
    (info,) = [i for i in operating.sources(service) if i["name"] == "haiku"]
    assert info["attribution"] == {"text": "lines of haiku.txt", "licence": "CC0-1.0", "url": None}
    assert service.library.get("haiku").kind is lines_kind
    page = TestClient(create_app(settings), base_url=LOCAL).get("/doc/haiku/1")
    assert page.status_code == 200 and "lines of haiku.txt" in page.text


def test_rebuild_reads_the_recorded_options_back(lines_kind, settings, service, text_file):
    building.ingest(
        service, "lines", text_file, "haiku", options=LinesOptions(prefix="句: ", skip=("#",))
    )
    text_file.write_text("古池や\n蛙飛び込む\n# 注\n水の音\n閑さや\n", encoding="utf-8")

    rebuilt = run(settings, "rebuild", "haiku", "--json")
    assert rebuilt.exit_code == 0, rebuilt.output
    titles = {
        h.title
        for h in searching.search(
            Context(settings), SearchRequest.of(query="閑さや", source="haiku")
        ).hits
    }
    assert titles == {"句: 閑さや"}  # the prefix was recorded and applied again
    assert Context(settings).library.get("haiku").info().docs == 4  # and "#" still skipped


@pytest.mark.slow
def test_a_server_job_rebuilds_a_registered_kind(lines_kind, settings, service, text_file):
    building.ingest(service, "lines", text_file, "haiku", options=LinesOptions(prefix="> "))
    client = TestClient(create_app(settings), base_url=LOCAL)
    plan = client.get("/v1/jobs/plan", params={"source": "haiku"}).json()
    assert plan["kind"] == "lines" and plan["input"]["options"] == {"prefix": "> ", "skip": []}
    job = client.post("/v1/jobs", json={"source": "haiku", "action": "rebuild"}).json()
    for _ in range(600):
        state = client.get(f"/v1/jobs/{job['id']}").json()
        if state["state"] != "running":
            break
        time.sleep(0.05)
    assert state["state"] == "done", state
    assert state["result"]["kind"] == "lines" and state["result"]["docs"] == 4


def test_unknown_kinds_and_wrong_options_are_refused_with_the_known_ones(service, text_file):
    with pytest.raises(BadQuery) as unknown:
        building.ingest(service, "gopher", text_file, "g")
    assert {"docs", "wikipedia", "geonames", "osm", "zim"} <= set(
        unknown.value.extras["known_kinds"]
    )
    with pytest.raises(BadQuery, match="DocsOptions"):
        building.ingest(service, "docs", text_file, "g", options=LinesOptions())
    with pytest.raises(BadQuery, match="not built from an input"):
        building.ingest(service, "notes", text_file, "notes")
    assert kind_named("notes").capabilities.writable and "notes" in kinds()


def test_every_built_in_kind_declares_what_the_seam_needs():
    for name, kind in kinds().items():
        assert kind.name == name and kind.summary, name
        assert kind.attribution.__func__ is not SourceKind.attribution, f"{name}: attribution"
        if kind.ingestable:
            assert type(kind).build is not SourceKind.build, f"{name}: build"
