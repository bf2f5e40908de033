"""Background jobs: rebuild and re-embed real sources over REST, with live progress and a log;
the embedding models a job may take are the server's, named without paths."""

import json
import shutil
import sqlite3
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from chiezo.core.errors import BadQuery
from chiezo.ops import building, reading, remembering
from chiezo.ops.jobs import JobProgress
from chiezo.ops.rebuilding import rebuild_call, rebuild_call_for, source_info
from chiezo.ops.requests import DocRequest, RememberRequest
from chiezo.store.kinds import register, unregister
from chiezo.store.source_info import SourceInfo
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app
from job_kinds import HeldKind, HeldOptions

from helpers import LOCAL, ON_THIS_MACHINE, build_docs, error_body, write_files

FILES = {
    "sensoji.md": "---\ntitle: 浅草寺\ntags: [寺院, 東京]\n---\n東京都台東区にある寺。\n",
    "kiyomizu.md": "---\ntitle: 清水寺\ntags: [寺院, 京都]\n---\n京都市東山区の寺。\n",
    "todaiji.md": "---\ntitle: 東大寺\ntags: [寺院, 奈良]\n---\n奈良市にある華厳宗の大本山。\n",
    "kinkaku.md": "---\ntitle: 金閣寺\ntags: [寺院, 京都]\n---\n京都市北区の臨済宗の寺。\n",
}
MODEL = "use-m"  # the fast built-in embedder


@pytest.fixture
def folder(tmp_path):
    return write_files(tmp_path / "docs", FILES)


@pytest.fixture
def client(settings, service, folder):
    build_docs(service, folder, "kb", language="ja")
    return TestClient(create_app(settings), base_url=LOCAL, client=ON_THIS_MACHINE)


def _finished(client, job_id: int, **headers) -> dict:
    """Poll the job until it has ended (the deadline only guards against a hang)."""
    deadline = time.monotonic() + 60
    while True:
        job = client.get(f"/v1/jobs/{job_id}", headers=headers).json()
        if job["state"] != "running":
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.02)


def _generation(client, name: str = "kb") -> str:
    (src,) = [s for s in client.get("/v1/sources").json()["sources"] if s["name"] == name]
    return src["generation"]


def _titles(client, q: str) -> list[str]:
    return [h["title"] for h in client.get("/v1/kb/search", params={"q": q}).json()["hits"]]


# -- plans --------------------------------------------------------------------------------------


def test_a_rebuild_plan_states_the_input_the_generation_and_what_keeps_serving(client, folder):
    plan = client.get("/v1/jobs/plan", params={"source": "kb"}).json()
    assert plan["action"] == "rebuild" and plan["kind"] == "docs" and plan["status"] == "ok"
    assert plan["input"] == {
        "path": str(folder.resolve()),
        "paths": [str(folder.resolve())],
        "exists": True,
        "bytes": plan["input"]["bytes"],
        "files": 4,
        "options": {"chunk_chars": 800, "language": "ja"},  # rebuilt the same way
    }
    assert plan["input"]["bytes"] > 0 and plan["docs"] == 4 and plan["built_at"]
    assert plan["generation"] == _generation(client)
    assert plan["embed_model"] is None  # no vectors before: none after
    assert plan["serving_during"].startswith("the current generation keeps serving")
    assert plan["problem"] is None and plan["running_job"] is None and plan["ready"] is True


@pytest.mark.slow
def test_an_embed_plan_needs_a_model_until_the_source_has_one(client, service):
    refused = client.get("/v1/jobs/plan", params={"source": "kb", "action": "embed"})
    assert refused.status_code == 400 and "no vectors" in refused.json()["error"]
    assert MODEL in refused.json()["known_models"]
    unknown = client.get(
        "/v1/jobs/plan", params={"source": "kb", "action": "embed", "model": "no-such-model"}
    )
    assert unknown.status_code == 400 and "e5-small" in unknown.json()["known_models"]

    plan = client.get(
        "/v1/jobs/plan", params={"source": "kb", "action": "embed", "model": MODEL}
    ).json()
    assert plan["model"] == MODEL and plan["current_model"] is None and plan["chunks"] == 4
    assert plan["unit_chars"] == 60 and plan["max_chunks"] is None and plan["ready"]

    building.embed(service, "kb", MODEL, unit_chars=0, max_chunks=3)
    again = client.get("/v1/jobs/plan", params={"source": "kb", "action": "embed"}).json()
    assert again["model"] == again["current_model"] == MODEL  # the source's own model
    assert again["unit_chars"] == 0 and again["max_chunks"] == 3  # its coverage and unit size
    rebuild = client.get("/v1/jobs/plan", params={"source": "kb"}).json()
    assert rebuild["embed_model"] == MODEL  # a rebuild re-embeds with the previous model


def test_bad_requests_are_refused_with_the_reason(client):
    assert client.get("/v1/jobs/plan", params={"source": "nope"}).status_code == 404
    assert "kb" in client.get("/v1/jobs/plan", params={"source": "nope"}).json()["known_sources"]
    wrong = client.get("/v1/jobs/plan", params={"source": "kb", "action": "delete"})
    assert wrong.status_code == 400 and "'rebuild' or 'embed'" in wrong.json()["error"]
    unknown = client.get("/v1/jobs/plan", params={"source": "kb", "colour": "red"})
    assert unknown.status_code == 400 and "colour" in unknown.json()["error"]
    extra = client.post("/v1/jobs", json={"source": "kb", "action": "rebuild", "force": True})
    assert extra.status_code == 400
    assert client.get("/v1/jobs/12345").status_code == 404


# -- running ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_rebuild_over_rest_switches_in_a_new_generation_with_phases_and_a_log(client, folder):
    before = _generation(client)
    (folder / "horyuji.md").write_text("---\ntitle: 法隆寺\n---\n斑鳩町の寺。\n", encoding="utf-8")
    (folder / "broken.docx").write_bytes(b"not a zip at all")  # skipped with a warning

    started = client.post("/v1/jobs", json={"source": "kb", "action": "rebuild"})
    assert started.status_code == 202
    job = started.json()
    assert job["source"] == "kb" and job["action"] == "rebuild" and job["id"] >= 1
    assert job["started_at"].endswith("+00:00") and job["error"] is None

    done = _finished(client, job["id"])
    assert done["state"] == "done", done
    assert done["finished_at"] and done["elapsed_s"] >= 0 and done["error"] is None
    assert done["result"]["docs"] == 5 and done["result"]["previous"].endswith(before)
    assert _generation(client) != before and _titles(client, "法隆寺") == ["法隆寺"]

    texts = [line["text"] for line in done["log"]]
    assert texts[0] == "rebuild kb started" and texts[-1].startswith("built 5 documents")
    assert any(t.startswith("reading") for t in texts) and "validating" in texts
    assert {"warning"} == {line["level"] for line in done["log"] if "broken.docx" in line["text"]}
    assert done["warnings"] == 1 and done["phase"]["name"] == "switching"
    assert all(set(line) == {"t", "level", "text"} for line in done["log"])
    assert done["log_from"] == 0 and done["log_next"] == len(texts) and done["log_dropped"] == 0

    newer = client.get(f"/v1/jobs/{job['id']}", params={"log_from": len(texts) - 2}).json()
    assert newer["log"] == done["log"][-2:] and newer["log_from"] == len(texts) - 2
    assert client.get(f"/v1/jobs/{job['id']}", params={"log_from": len(texts)}).json()["log"] == []

    listed = client.get("/v1/jobs").json()
    assert listed["running"] is None and listed["jobs"][0]["id"] == job["id"]
    assert "log" not in listed["jobs"][0] and listed["jobs"][0]["state"] == "done"


@pytest.mark.slow
def test_an_embed_job_adds_vectors(client):
    started = client.post("/v1/jobs", json={"source": "kb", "action": "embed", "model": MODEL})
    assert started.status_code == 202 and started.json()["model"] == MODEL
    done = _finished(client, started.json()["id"])
    assert done["state"] == "done", done
    assert done["result"]["embedded_chunks"] == 4 and done["result"]["model"] == MODEL
    assert any(line["text"].startswith("embedding with use-m") for line in done["log"])
    (src,) = client.get("/v1/sources").json()["sources"]
    assert src["vectors"]["model"] == MODEL


@pytest.fixture
def held(settings, service, tmp_path):
    """Source "slow" of the test kind ``held`` (tests/job_kinds.py): its rebuilds wait while
    the returned hold file exists."""
    kind = register(HeldKind())
    lines = tmp_path / "lines.txt"
    lines.write_text("古池や\n蛙飛び込む\n水の音\n", encoding="utf-8")
    building.ingest(service, "held", lines, "slow")
    yield lines.with_name(lines.name + ".hold")
    unregister(kind.name)


@pytest.mark.slow
def test_a_second_start_while_one_runs_is_a_409_naming_it(client, held):
    held.touch()  # the first job waits until the test lets it go
    try:
        first = client.post("/v1/jobs", json={"source": "slow", "action": "rebuild"}).json()
        second = client.post("/v1/jobs", json={"source": "kb", "action": "rebuild"})
        assert second.status_code == 409
        assert second.json()["running_job"] == first["id"]
        assert f"job {first['id']} (rebuild slow) is running" in second.json()["error"]
        plan = client.get("/v1/jobs/plan", params={"source": "kb", "action": "rebuild"}).json()
        assert plan["running_job"]["id"] == first["id"] and plan["ready"] is False
        assert client.get("/v1/jobs").json()["running"] == first["id"]
        assert client.get(f"/v1/jobs/{first['id']}").json()["state"] == "running"
    finally:
        held.unlink()
    assert _finished(client, first["id"])["state"] == "done"
    after = client.post("/v1/jobs", json={"source": "kb", "action": "rebuild"})
    assert after.status_code == 202  # the next job may start once the first has ended
    assert _finished(client, after.json()["id"])["state"] == "done"


@pytest.mark.slow
def test_a_failed_rebuild_is_reported_and_the_old_generation_keeps_serving(client, folder):
    before = _generation(client)
    for name in ("kiyomizu.md", "todaiji.md", "kinkaku.md"):
        (folder / name).unlink()  # 1 document left of 4: the builder's shrink guard refuses

    job = client.post("/v1/jobs", json={"source": "kb", "action": "rebuild"}).json()
    failed = _finished(client, job["id"])
    assert failed["state"] == "failed" and failed["result"] is None
    assert "shrink" in failed["error"]["error"] and "--allow-shrink" in failed["error"]["hint"]
    assert failed["error"]["status"] == 500  # BuildError's, in the one error shape
    levels = [line["level"] for line in failed["log"]]
    assert "error" in levels and "validating" in [line["text"] for line in failed["log"]]
    assert "keeps serving" in failed["log"][-1]["text"]
    assert _generation(client) == before
    assert _titles(client, "清水寺") == ["清水寺"]  # a removed file's document still answers


@pytest.mark.slow
def test_a_rebuild_whose_embedding_fails_keeps_the_build_and_says_so(client, service, tmp_path):
    from chiezo.store.embedders import UseMultilingual

    model_dir = tmp_path / "model"  # the use-m graph as a user's own model directory
    model_dir.mkdir()
    (model_dir / "model.onnx").symlink_to(UseMultilingual.model_path())
    model = f"onnx:{model_dir}"
    building.embed(service, "kb", model)
    shutil.rmtree(model_dir)  # gone before the rebuild embeds again with it

    job = client.post("/v1/jobs", json={"source": "kb", "action": "rebuild"}).json()
    assert job["model"] == model
    failed = _finished(client, job["id"])
    assert failed["state"] == "failed" and failed["result"]["docs"] == 4
    assert (
        failed["error"]["error"]
        == f"built, but embedding failed: no model directory at {model_dir}"
    )
    assert _generation(client) == Path(failed["result"]["path"]).name  # the build stands
    assert _titles(client, "浅草寺") == ["浅草寺"]


@pytest.mark.slow
def test_an_unexpected_exception_fails_the_job_not_the_server(client, held, service, caplog):
    from chiezo.store.kinds import recorded_options

    source = service.library.get("slow")
    recorded = source.info().input  # rebuilt as "broken": the test kind's build raises a bug
    assert recorded_options(HeldOptions()) == recorded["options"]
    with sqlite3.connect(source.path) as conn:
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'input'",
            (json.dumps({**recorded, "options": {"broken": True}}),),
        )
    conn.close()
    service.library.forget("slow")
    job = client.post("/v1/jobs", json={"source": "slow", "action": "rebuild"}).json()
    failed = _finished(client, job["id"])
    assert failed["state"] == "failed"
    assert failed["error"] == {
        "error": "internal error (RuntimeError): the disk caught fire",
        "status": 500,
        "hint": "this is a bug; the server log has the details",
    }
    logged = [r.getMessage() for r in caplog.records if r.name == "chiezo.jobs"]
    assert any("RuntimeError: the disk caught fire" in m and "Traceback" in m for m in logged)
    assert client.get("/v1/jobs").json()["running"] is None
    assert _titles(client, "浅草寺") == ["浅草寺"]


def test_a_rebuild_whose_input_folder_is_gone_is_a_400_naming_the_path(client, folder):
    shutil.rmtree(folder)
    plan = client.get("/v1/jobs/plan", params={"source": "kb"}).json()
    assert plan["input"]["exists"] is False and plan["ready"] is False
    assert str(folder.resolve()) in plan["problem"]["error"]
    refused = client.post("/v1/jobs", json={"source": "kb", "action": "rebuild"})
    assert refused.status_code == 400
    assert refused.json()["path"] == str(folder.resolve())
    assert str(folder.resolve()) in refused.json()["error"]
    assert client.get("/v1/jobs").json()["jobs"] == []  # nothing was started


@pytest.mark.slow
def test_a_source_that_needs_a_rebuild_can_be_rebuilt(client, settings):
    from chiezo.store import generations

    current = generations.current_path(settings.corpus_dir / "kb")
    with sqlite3.connect(current) as conn:  # as if built by an older Chiezo
        conn.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    conn.close()
    assert client.get("/v1/sources").json()["sources"][0]["status"] == "needs_rebuild"
    plan = client.get("/v1/jobs/plan", params={"source": "kb"}).json()
    assert plan["status"] == "needs_rebuild" and plan["kind"] == "docs" and plan["ready"]
    job = client.post("/v1/jobs", json={"source": "kb", "action": "rebuild"}).json()
    assert _finished(client, job["id"])["state"] == "done"
    assert client.get("/v1/sources").json()["sources"][0]["status"] == "ok"
    assert _titles(client, "浅草寺") == ["浅草寺"]


def test_notes_cannot_be_rebuilt(client, service):
    remembering.remember(service, RememberRequest.of(text="牛乳を買う"))
    refused = client.post("/v1/jobs", json={"source": "notes", "action": "rebuild"})
    assert refused.status_code == 400
    assert refused.json()["error"] == "notes is written in place; it has no rebuild"
    assert client.get("/v1/jobs/plan", params={"source": "notes"}).status_code == 400
    embed = client.post("/v1/jobs", json={"source": "notes", "action": "embed", "model": MODEL})
    assert embed.status_code == 400
    with pytest.raises(BadQuery, match="no rebuild"):
        rebuild_call(source_info(service, "notes"))


# -- security -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_beyond_loopback_starting_a_job_needs_the_token(settings, service, folder):
    build_docs(service, folder, "kb")
    body = {"source": "kb", "action": "rebuild"}
    closed = TestClient(create_app(settings, bind_host="0.0.0.0"), base_url=LOCAL)
    assert closed.post("/v1/jobs", json=body).status_code == 403
    assert closed.get("/v1/jobs").status_code == 200  # reading jobs and plans is not a write
    assert closed.get("/v1/jobs/plan", params={"source": "kb"}).status_code == 200

    guarded = TestClient(
        create_app(replace(settings, token="s3cret"), bind_host="0.0.0.0"), base_url=LOCAL
    )
    assert guarded.post("/v1/jobs", json=body).status_code == 401
    wrong = guarded.post("/v1/jobs", json=body, headers={"authorization": "Bearer nope"})
    assert wrong.status_code == 401
    started = guarded.post("/v1/jobs", json=body, headers={"authorization": "Bearer s3cret"})
    assert started.status_code == 202
    assert _finished(guarded, started.json()["id"])["state"] == "done"


# -- what a rebuild calls -----------------------------------------------------------------------


def test_a_geonames_rebuild_keeps_its_admin1_and_alternate_names(service, tmp_path):
    """A real GeoNames build (rows in the real 19-column format) rebuilt from its record: the
    Japanese area names from the alternate-names and admin1 files are still there."""
    export = tmp_path / "JP.txt"
    export.write_text(
        "1857910\tKyoto\tKyoto\tKioto\t35.02107\t135.75385\tP\tPPLA\tJP\t\t22\t\t\t\t1459640"
        "\t\t50\tAsia/Tokyo\t2022-01-01\n",
        encoding="utf-8",
    )
    admin1 = tmp_path / "admin1CodesASCII.txt"
    admin1.write_text("JP.22\tKyoto\tKyoto\t1857907\n", encoding="utf-8")
    alternates = tmp_path / "alternateNamesV2.txt"
    alternates.write_text(
        "1\t1857910\tja\t京都市\t1\t\t\t\t\t\n3\t1857907\tja\t京都府\t1\t\t\t\t\t\n",
        encoding="utf-8",
    )
    from chiezo.ingest.geonames import GeoNamesOptions

    building.ingest(service, "geonames", export, "jp", options=GeoNamesOptions(admin1, alternates))
    before = service.library.get("jp").info().generation

    call = rebuild_call_for(service, "jp")
    assert (call.kind, call.inputs) == ("geonames", [export.resolve()])
    assert call.options.alternate_names == alternates.resolve()  # recorded absolute
    progress = JobProgress()
    building.ingest(
        service,
        call.kind,
        call.inputs,
        "jp",
        options=call.options,
        build=call.build,
        progress=progress,
    )
    assert "reading alternate names" in progress.phases
    assert service.library.get("jp").info().generation != before
    kyoto = reading.doc(service, DocRequest.of(source="jp", title="京都市", fields=["attrs"]))
    assert kyoto["attrs"]["area"] == ["京都府"]

    alternates.unlink()
    with pytest.raises(BadQuery) as refused:
        rebuild_call_for(service, "jp")
    assert refused.value.extras["path"] == str(alternates)


def test_recorded_options_come_back_as_each_kinds_options(settings, tmp_path):
    """Each kind's recorded input becomes its Options again, with the values recorded — also
    for sources built before options were recorded under "options" (read from the identity)."""
    from chiezo.ingest.osm import OsmOptions
    from chiezo.ingest.wikipedia import WikiOptions

    dump = write_files(
        tmp_path,
        {
            "jawiki-20250301-pages-articles.xml.bz2": b"x",
            "pageviews": b"x",
            "extract.osm.pbf": b"x",
            "w.zim": b"x",
        },
    )
    wiki_info = SourceInfo(
        "jawiki",
        kind="wikipedia",
        language="ja",
        input={
            "path": str(dump / "jawiki-20250301-pages-articles.xml.bz2"),
            "language": "ja",
            "pageviews": str(dump / "pageviews"),
            "page_props": None,
            "chunk_chars": 300,
            "truncated": "at byte 9",
        },
    )
    call = rebuild_call(wiki_info)
    wiki = call.options
    assert isinstance(wiki, WikiOptions) and call.inputs == [Path(wiki_info.input["path"])]
    assert (wiki.language, wiki.chunk_chars, wiki.allow_truncated) == ("ja", 300, True)
    assert wiki.pageviews == dump / "pageviews" and wiki.page_props is None
    assert wiki.workers is None and wiki.date is None  # not recorded: defaults

    osm_info = SourceInfo(
        "osm_x",
        kind="osm",
        input={"path": str(dump / "extract.osm.pbf"), "admin_levels": ["4", "7"]},
    )
    assert rebuild_call(osm_info).options == OsmOptions(admin_levels=("4", "7"))

    zim = rebuild_call(SourceInfo("zim_w", kind="zim", input={"path": str(dump / "w.zim")}))
    assert (zim.kind, zim.inputs) == ("zim", [dump / "w.zim"])

    (dump / "pageviews").unlink()
    with pytest.raises(BadQuery, match="pageviews"):
        rebuild_call(wiki_info)
    with pytest.raises(BadQuery, match="cannot be rebuilt") as unknown:
        rebuild_call(SourceInfo("x", kind="gopher", input={"path": str(dump / "w.zim")}))
    assert "docs" in unknown.value.extras["known_kinds"]


def test_the_job_log_keeps_the_newest_lines_and_counts_the_dropped():
    progress = JobProgress(max_lines=3)
    progress.phase("reading", 10)
    progress.advance(4)
    progress.retotal(20)
    for n in range(4):
        progress.warn(f"w{n}")
    snap = progress.snapshot()
    phase = {k: snap["phase"][k] for k in ("name", "done", "total", "unit")}
    assert phase == {"name": "reading", "done": 4, "total": 20, "unit": "docs"}
    assert [line["text"] for line in snap["log"]] == ["w1", "w2", "w3"]
    assert snap["log_dropped"] == 2 and snap["log_next"] == 5 and snap["log_from"] == 2
    assert [line["text"] for line in progress.snapshot(4)["log"]] == ["w3"]


# -- the command line ---------------------------------------------------------------------------


def test_chiezo_rebuild_rebuilds_from_the_recorded_input(tmp_path, folder):
    data = tmp_path / "data"

    def run(*args):
        return CliRunner().invoke(cli, ["--data", str(data), *args])

    assert run("ingest", "docs", str(folder), "--name", "t").exit_code == 0
    (folder / "horyuji.md").write_text("# 法隆寺\n\n斑鳩町の寺。\n", encoding="utf-8")
    result = run("rebuild", "t", "--no-embed", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["docs"] == 5 and report["previous"] and report["embedding"] is None
    plain = run("rebuild", "t")
    assert plain.exit_code == 0 and "built t: 5 documents" in plain.stdout

    assert run("rebuild", "notes").exit_code == 2
    shutil.rmtree(folder)
    gone = run("rebuild", "t", "--json")
    assert gone.exit_code == 2 and json.loads(gone.stdout)["path"] == str(folder.resolve())


@pytest.mark.slow
def test_every_worker_process_sees_every_job(settings, service, folder):
    """``serve --workers N``: a poll may reach a worker that did not start the job."""
    from chiezo.ops.context import Context
    from chiezo.ops.jobs import JobRunner

    build_docs(service, folder, "kb")
    starter, other = JobRunner(service), JobRunner(Context(settings))
    job = starter.start("kb", "rebuild")
    assert job.wait(60)
    seen = other.get(job.id).to_dict()
    assert seen["state"] == "done" and seen["result"]["docs"] == job.result["docs"]
    assert seen["log"] == job.to_dict()["log"]
    assert other.get(job.id).to_dict(log_from=seen["log_next"] - 1)["log"] == seen["log"][-1:]
    assert [j.id for j in other.list()] == [job.id]
    second = other.start("kb", "rebuild")
    assert second.id == job.id + 1  # ids stay unique across workers
    assert second.wait(60)


def test_a_running_record_left_by_a_dead_process_reads_as_failed(settings):
    import os

    from chiezo.ops.context import Context
    from chiezo.ops.jobs import STALE_S, JobRunner

    records = settings.data_dir / "jobs"
    records.mkdir(parents=True)
    path = records / "7.json"
    path.write_text(
        json.dumps(
            {
                "id": 7,
                "source": "kb",
                "action": "rebuild",
                "state": "running",
                "log": [],
                "log_next": 0,
                "log_dropped": 0,
            }
        )
    )
    old = time.time() - STALE_S - 5
    os.utime(path, (old, old))
    job = JobRunner(Context(settings)).get(7).to_dict()
    assert job["state"] == "failed" and "stopped" in job["error"]["error"]
    assert job["error"]["status"] == 500


# -- the models a job may take -----------------------------------------------------------------


@pytest.mark.slow
def test_jobs_take_only_the_servers_models_and_reveal_no_paths(server, tmp_path):
    existing = httpx.get(
        f"{server.url}/v1/jobs/plan",
        params={"source": "book", "action": "embed", "model": f"onnx:{tmp_path}"},
    )
    missing = httpx.get(
        f"{server.url}/v1/jobs/plan",
        params={"source": "book", "action": "embed", "model": "onnx:/no/such"},
    )
    first, second = error_body(existing, 400), error_body(missing, 400)
    assert first["known_models"] == second["known_models"] == ["e5-small", "use-m"]
    assert first["error"].replace(str(tmp_path), "P") == second["error"].replace("/no/such", "P")
    started = httpx.post(
        f"{server.url}/v1/jobs",
        json={"source": "book", "action": "embed", "model": f"st:{tmp_path}"},
    )
    error_body(started, 400)


def test_an_operator_can_offer_more_models_to_jobs(settings):
    from dataclasses import replace

    from chiezo.ops.context import Context
    from chiezo.ops.jobs import JobRunner

    runner = JobRunner(Context(replace(settings, job_models=("onnx:/srv/models/e5",))))
    assert runner.models() == ["e5-small", "onnx:/srv/models/e5", "use-m"]
