"""Generations: built aside, validated, on disk before they are switched in atomically, one
previous kept, failures (a full disk among them) leave the current generation serving."""

import os
import threading

import pytest
from click.testing import CliRunner

from chiezo.core import db
from chiezo.core.errors import BuildError, SchemaMismatch, UnknownSource
from chiezo.core.models import Chunk, Doc
from chiezo.core.schema import SCHEMA_VERSION
from chiezo.ops import operating, searching
from chiezo.ops.requests import SearchRequest
from chiezo.store import generations
from chiezo.store.build import BuildOptions, GenerationBuilder
from chiezo.surfaces.cli.main import cli

from helpers import BOOK_FILES, build_docs, build_source, capped, trigram_side, write_files


def docs(n, prefix="doc", body="本文の例です。"):
    return [
        Doc(key=f"{prefix}-{i}", title=f"{prefix} title {i}", body=f"{body} {i}") for i in range(n)
    ]


def gen_files(settings, name):
    return generations.generation_files(settings.corpus_dir / name)


def test_a_build_switches_in_a_new_generation_and_keeps_one_previous(settings, service):
    for round_ in range(3):
        build_source(settings, "s", "test", docs(5, prefix=f"r{round_}"))
    files = gen_files(settings, "s")
    assert len(files) == 2  # current + exactly one previous
    current = generations.current_path(settings.corpus_dir / "s")
    assert current in files
    assert service.library.get("s").meta["doc_count"] == "5"
    assert (
        searching.search(service, SearchRequest.of(query="r2 title 1", source="s")).hits[0].key
        == "r2-1"
    )


def test_meta_records_schema_counts_and_input(settings, service):
    doc = Doc(
        key="a",
        title="Alpha",
        body="text",
        tags=["t1", "t2"],
        links=["b"],
        attrs={"color": ["red"]},
        point=(35.71, 139.79),
        chunks=[Chunk("text", "Alpha")],
    )
    build_source(
        settings, "m", "test", [doc, *docs(2)], input_identity={"path": "/in", "date": "20230501"}
    )
    info = service.library.get("m").info().to_dict()
    assert info["schema_version"] == SCHEMA_VERSION
    assert info["docs"] == 3 and info["chunks"] == 1 and info["tags"] == 2
    assert info["points"] == 1 and info["attributes"] == ["color"]
    assert info["input"] == {"path": "/in", "date": "20230501"}


def test_doc_ids_follow_popularity(settings, service):
    items = [
        Doc(key=f"k{i}", title=f"t{i}", body="x", rank_score=r)
        for i, r in enumerate([0.1, 0.9, 0.5])
    ]
    build_source(settings, "p", "test", items)
    conn = service.library.get("p").conn
    assert [r[0] for r in conn.execute("SELECT key FROM docs ORDER BY doc_id")] == [
        "k1",
        "k2",
        "k0",
    ]


def test_a_failing_source_leaves_the_previous_generation_serving_and_no_debris(settings, service):
    build_source(settings, "s", "test", docs(3))
    before = generations.current_path(settings.corpus_dir / "s")

    def broken():
        yield from docs(2, prefix="new")
        raise ValueError("the dump ended mid-page")

    with pytest.raises(ValueError):
        build_source(settings, "s", "test", broken())
    directory = settings.corpus_dir / "s"
    assert generations.current_path(directory) == before
    leftovers = [
        p.name for p in directory.iterdir() if p.name not in (before.name, "current", ".build.lock")
    ]
    assert leftovers == []
    assert searching.search(service, SearchRequest.of(query="doc title 1", source="s")).total == 1


def test_an_empty_input_fails_and_keeps_the_current_generation(settings, service):
    build_source(settings, "s", "test", docs(3))
    with pytest.raises(BuildError, match="at least"):
        build_source(settings, "s", "test", [])
    assert service.library.get("s").doc_count == 3


def test_minimum_doc_count(settings):
    with pytest.raises(BuildError, match="at least 10"):
        build_source(settings, "s", "test", docs(3), options=BuildOptions(min_docs=10))


def test_a_much_smaller_generation_is_refused_unless_allowed(settings, service):
    build_source(settings, "s", "test", docs(10))
    with pytest.raises(BuildError, match="shrink"):
        build_source(settings, "s", "test", docs(3))
    assert service.library.get("s").doc_count == 10
    build_source(settings, "s", "test", docs(3), options=BuildOptions(allow_shrink=True))
    assert service.library.get("s").doc_count == 3


def test_duplicate_keys_fail_the_build(settings):
    with pytest.raises(BuildError, match="share a key"):
        build_source(
            settings, "s", "test", [Doc(key="same", title="a"), Doc(key="same", title="b")]
        )


def test_documents_without_title_fail_the_build_naming_the_key(settings):
    with pytest.raises(BuildError, match="k1"):
        build_source(settings, "s", "test", [Doc(key="k1", title="  ")])


def test_invalid_source_names_are_refused(settings):
    with pytest.raises(Exception, match="invalid source name"):
        build_source(settings, "../escape", "test", docs(1))


def test_debris_of_a_crashed_build_is_removed_by_the_next_build(settings):
    build_source(settings, "s", "test", docs(2))
    directory = settings.corpus_dir / "s"
    (directory / "gen-20200101T000000-aaaaaa.db.building").write_bytes(b"half a file")
    (directory / "gen-20200101T000000-aaaaaa.db.building.stage").write_bytes(b"junk")
    build_source(settings, "s", "test", docs(2))
    assert not list(directory.glob("*.building*"))


def test_a_second_concurrent_build_of_the_same_source_is_refused(settings):
    with (
        GenerationBuilder(settings, "s", "test"),
        pytest.raises(BuildError, match="another build"),
        GenerationBuilder(settings, "s", "test"),
    ):
        pass


def test_a_reader_holding_the_old_generation_keeps_reading_it_while_new_ones_switch_in(
    settings, service
):
    build_source(settings, "s", "test", docs(4, prefix="old"))
    old = service.library.get("s")
    old_conn = old.conn
    for prefix in ("new", "newer"):  # two switches: the old file is even deleted
        build_source(settings, "s", "test", docs(4, prefix=prefix))
    assert not old.path.exists()
    # the open handle still reads the old generation, consistently
    assert old_conn.execute("SELECT count(*) FROM docs WHERE key LIKE 'old-%'").fetchone()[0] == 4
    assert trigram_side(old, "old title 2")[0].total == 1  # on the handle it holds
    # and the library hands out the newest generation without a restart
    current = service.library.get("s")
    assert current.path != old.path
    assert trigram_side(current, "newer title 2")[0].total == 1
    assert trigram_side(current, "old title 2")[0].total == 0  # every term: none of the old


def test_readers_in_other_threads_see_the_switch(settings, service):
    build_source(settings, "s", "test", docs(3, prefix="first"))
    seen = []

    def read():
        seen.append(
            searching.search(service, SearchRequest.of(query="second title 1", source="s")).total
        )

    build_source(settings, "s", "test", docs(3, prefix="second"))
    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    assert seen == [1]


def test_an_older_schema_is_reported_as_needing_a_rebuild(settings, service, tmp_path):
    folder = write_files(tmp_path / "in", {"a.md": "# A\n\ntext\n"})
    build_docs(service, folder, "old")
    path = generations.current_path(settings.corpus_dir / "old")
    import sqlite3

    os.chmod(path, 0o644)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    conn.close()
    fresh = type(service)(settings)
    with pytest.raises(SchemaMismatch) as info:
        fresh.library.get("old")
    assert info.value.status == 409
    assert (
        "rebuild" in info.value.extras["hint"]
        and str(folder.resolve()) in info.value.extras["hint"]
    )
    listed = operating.sources(fresh)
    assert listed[0]["status"] == "needs_rebuild"


def test_a_file_that_is_not_a_source_is_reported_not_misread(settings, service):
    directory = settings.corpus_dir / "junk"
    directory.mkdir(parents=True)
    (directory / "gen-20200101T000000-abcdef.db").write_bytes(b"this is not sqlite" * 100)
    os.symlink("gen-20200101T000000-abcdef.db", directory / "current")
    with pytest.raises(SchemaMismatch):
        service.library.get("junk")


def test_unknown_sources_list_the_known_ones(settings, service):
    build_source(settings, "alpha", "test", docs(1))
    with pytest.raises(UnknownSource) as info:
        service.library.get("beta")
    assert info.value.extras["known_sources"] == ["alpha"]
    assert info.value.status == 404


# -- a full disk, and durability ---------------------------------------------------------------


@pytest.mark.slow
def test_a_full_disk_fails_the_build_clearly_and_the_old_generation_serves(
    service, settings, tmp_path, monkeypatch
):
    folder = write_files(tmp_path / "docs", BOOK_FILES)
    first = build_docs(service, folder, "book")
    write_files(folder, {f"more{i}.md": f"# More {i}\n\n" + "text " * 4000 for i in range(30)})
    monkeypatch.setattr(db, "open_for_build", capped(db.open_for_build, 40))
    with pytest.raises(BuildError, match="the disk is full; the current generation keeps serving"):
        build_docs(service, folder, "book")
    directory = settings.corpus_dir / "book"
    assert generations.current_path(directory) == first.path
    assert not list(directory.glob("*.building*"))
    assert searching.search(service, SearchRequest.of(query="Chiezo", source="book")).total >= 1

    result = CliRunner().invoke(
        cli, ["--data", str(settings.data_dir), "ingest", "docs", str(folder), "--name", "book"]
    )
    assert result.exit_code == 1 and "the disk is full" in result.output
    assert "Traceback" not in result.output and "OperationalError" not in result.output


def test_a_generation_is_on_disk_before_current_points_to_it(service, tmp_path, monkeypatch):
    events: list[str] = []
    real_fsync, real_replace, real_switch = os.fsync, os.replace, generations.switch_current

    def fsync(fd):
        events.append("fsync " + os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    def replace(source, target):
        events.append(f"rename {os.path.basename(source)}")
        return real_replace(source, target)

    def switch(directory, generation):
        events.append("switch")
        return real_switch(directory, generation)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(generations, "switch_current", switch)
    report = build_docs(service, write_files(tmp_path / "docs", BOOK_FILES), "book")
    building = report.path.name + generations.BUILDING_SUFFIX
    order = [
        e for e in events if building in e or e == "switch" or e.endswith(str(report.path.parent))
    ]
    assert order[:4] == [
        f"fsync {report.path.parent / building}",
        f"rename {building}",
        f"fsync {report.path.parent}",
        "switch",
    ]
