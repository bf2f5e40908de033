"""Fetching dumps: from a real-format dumps site served on loopback (directory listing,
dumpstatus.json with checksums, HTTP Range for resuming)."""

import hashlib
import json
import shutil

import pytest

from chiezo.core.config import Settings
from chiezo.core.errors import InputError
from chiezo.ingest.download import download
from chiezo.ingest.wikifetch import fetch_dump
from chiezo.ingest.wikipedia import WikiOptions
from chiezo.ops import building, reading
from chiezo.ops.context import Context
from chiezo.ops.requests import DocRequest

from helpers import DumpSite, data_file, free_port

# dumps downloaded from a local site and built: left out of `make test-fast`
pytestmark = pytest.mark.slow

JA = "wikipedia/jawiki-20230501-excerpt.xml.bz2"


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    folder = root / "jawiki" / "20230501"
    folder.mkdir(parents=True)
    (root / "jawiki" / "20230601").mkdir()  # newer, but its articles dump is not finished
    name = "jawiki-20230501-pages-articles-multistream.xml.bz2"
    shutil.copy(data_file(JA), folder / name)
    sha1 = hashlib.sha1((folder / name).read_bytes()).hexdigest()
    status = {
        "jobs": {
            "articlesmultistreamdump": {
                "status": "done",
                "files": {
                    name: {
                        "size": (folder / name).stat().st_size,
                        "sha1": sha1,
                        "url": f"/jawiki/20230501/{name}",
                    }
                },
            }
        }
    }
    (folder / "dumpstatus.json").write_text(json.dumps(status))
    unfinished = {"jobs": {"articlesmultistreamdump": {"status": "in-progress", "files": {}}}}
    (root / "jawiki" / "20230601" / "dumpstatus.json").write_text(json.dumps(unfinished))
    server = DumpSite(root)
    yield server
    server.close()


def test_fetches_the_newest_finished_dump_verifies_and_builds(site, tmp_path):
    settings = Settings(data_dir=tmp_path / "data")
    fetched = fetch_dump(settings, "ja", mirror=site.url)
    assert fetched.date == "20230501"
    assert fetched.dump.read_bytes() == data_file(JA).read_bytes()
    service = Context(settings)
    report = building.ingest(service, "wikipedia", fetched.dump, None, options=WikiOptions())
    assert (
        report.name == "jawiki" and report.docs == 71
    )  # the articles of the excerpt (tests/data/README.md)
    # fetching again finds the verified file and downloads nothing
    before = len(site.requests)
    fetch_dump(settings, "ja", mirror=site.url)
    assert not any("pages-articles" in path for path, _ in site.requests[before:])


def test_a_multistream_index_listed_beside_the_dump_is_fetched_too(site, tmp_path):
    """The index lets the workers of `ingest wikipedia --ray` read their own streams; it is
    verified like the dump, and saved where wikistreams.index_beside finds it."""
    from chiezo.ingest.wikistreams import index_beside, write_multistream

    folder = site.root / "jawiki" / "20230501"
    dump = folder / "jawiki-20230501-pages-articles-multistream.xml.bz2"
    dump.unlink()
    plain = tmp_path / "jawiki-20230501-pages-articles.xml.bz2"
    shutil.copy(data_file(JA), plain)
    assert write_multistream(plain, folder) == dump
    index = index_beside(dump)
    status = json.loads((folder / "dumpstatus.json").read_text())
    status["jobs"]["articlesmultistreamdump"]["files"] = {
        p.name: {"size": p.stat().st_size, "sha1": hashlib.sha1(p.read_bytes()).hexdigest()}
        for p in (dump, index)
    }
    (folder / "dumpstatus.json").write_text(json.dumps(status))
    fetched = fetch_dump(Settings(data_dir=tmp_path / "data"), "ja", mirror=site.url)
    assert fetched.index is not None and fetched.index.read_bytes() == index.read_bytes()
    assert index_beside(fetched.dump) == fetched.index


def test_an_interrupted_download_resumes_with_a_range_request(site, tmp_path):
    data = data_file(JA).read_bytes()
    dest = tmp_path / "dump.xml.bz2"
    dest.with_name(dest.name + ".part").write_bytes(data[:100_000])
    url = f"{site.url}/jawiki/20230501/jawiki-20230501-pages-articles-multistream.xml.bz2"
    download(url, dest, checksum=("sha1", hashlib.sha1(data).hexdigest()))
    assert dest.read_bytes() == data
    assert (url.removeprefix(site.url), "bytes=100000-") in site.requests


def test_a_checksum_mismatch_deletes_the_file_and_fails(site, tmp_path):
    dest = tmp_path / "dump.xml.bz2"
    url = f"{site.url}/jawiki/20230501/jawiki-20230501-pages-articles-multistream.xml.bz2"
    with pytest.raises(InputError, match="sha1 check"):
        download(url, dest, checksum=("sha1", "0" * 40))
    assert not dest.exists() and not dest.with_name(dest.name + ".part").exists()


def test_a_given_date_without_finished_articles_is_refused(site, tmp_path):
    with pytest.raises(InputError, match="no finished articles dump"):
        fetch_dump(Settings(data_dir=tmp_path / "data"), "ja", date="20230601", mirror=site.url)


def test_offline_is_a_clear_error(tmp_path):
    closed = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(InputError) as info:
        fetch_dump(Settings(data_dir=tmp_path / "data"), "ja", mirror=closed)
    assert "cannot reach" in info.value.message
    assert "offline?" in info.value.extras["hint"]


def test_the_cli_fetches_with_extras_and_builds(site, tmp_path):
    import bz2
    import gzip

    from click.testing import CliRunner

    from chiezo.surfaces.cli.main import cli

    folder = site.root / "jawiki" / "20230501"
    props = folder / "jawiki-20230501-page_props.sql.gz"
    props.write_bytes(
        gzip.compress(b"INSERT INTO `page_props` VALUES (11,'wikibase_item','Q5287',NULL);\n")
    )
    status = json.loads((folder / "dumpstatus.json").read_text())
    status["jobs"]["pagepropstable"] = {
        "status": "done",
        "files": {props.name: {"md5": hashlib.md5(props.read_bytes()).hexdigest()}},
    }
    (folder / "dumpstatus.json").write_text(json.dumps(status))
    month = site.root / "other" / "pageview_complete" / "monthly" / "2023" / "2023-04"
    month.mkdir(parents=True)
    views = month / "pageviews-202304-user.bz2"
    views.write_bytes(bz2.compress("ja.wikipedia 日本語 11 desktop 5000 A5000\n".encode()))
    (month / "md5sums.txt").write_text(
        f"{hashlib.md5(views.read_bytes()).hexdigest()}  {views.name}\n"
    )
    result = CliRunner().invoke(
        cli,
        [
            "--data",
            str(tmp_path / "data"),
            "ingest",
            "wikipedia",
            "--lang",
            "ja",
            "--mirror",
            site.url,
            "--with-extras",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    service = Context(Settings(data_dir=tmp_path / "data"))
    doc = reading.doc(
        service,
        DocRequest.of(source="jawiki", title="日本語", fields=["attrs", "rank_score", "doc_id"]),
    )
    assert doc["attrs"]["wikidata"] == ["Q5287"]
    assert doc["rank_score"] == 1.0 and doc["doc_id"] == 1
