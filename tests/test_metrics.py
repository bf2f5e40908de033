"""``/metrics``: the Prometheus text format, scraped from a real server and parsed — counters move
with the requests that made them, and only those allowed to read them can (an attacker's tries
included)."""

import json
import math
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pytest

from chiezo.ops import building
from chiezo.search import retrieval
from chiezo.surfaces.rest import create_app

from helpers import RunningServer, build_docs, free_port, write_files

FILES = {
    "sensoji.md": "---\ntitle: 浅草寺\ntags: [寺院]\n---\n東京都台東区にある寺。雷門が有名。\n",
    "kiyomizu.md": "---\ntitle: 清水寺\ntags: [寺院]\n---\n京都市東山区の寺。舞台で知られる。\n",
}
SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')


def parse(text: str) -> dict[str, dict[frozenset, float]]:
    """The exposition format, strictly: every sample belongs to a family declared by # HELP and
    # TYPE before it; returns {sample name: {labels: value}}."""
    assert text.endswith("\n")
    declared: dict[str, str] = {}
    samples: dict[str, dict[frozenset, float]] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name not in declared, f"{name} declared twice"
            declared[name] = kind
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        name = match["name"]
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in declared or declared.get(family) == "histogram", f"{name} undeclared"
        raw = match["labels"] or ""
        labels = LABEL.findall(raw)
        assert ",".join(f'{k}="{v}"' for k, v in labels) == raw, f"bad labels: {raw!r}"
        key = frozenset(labels)
        series = samples.setdefault(name, {})
        assert key not in series, f"duplicate series {line!r}"
        series[key] = float(match["value"])
    _check_histograms(declared, samples)
    return samples


def _check_histograms(declared, samples) -> None:
    """Buckets are cumulative and end with +Inf, which equals _count."""
    for family, kind in declared.items():
        if kind != "histogram":
            continue
        by_series: dict[frozenset, list[tuple[float, float]]] = {}
        for labels, value in samples.get(family + "_bucket", {}).items():
            le = dict(labels)["le"]
            rest = frozenset(p for p in labels if p[0] != "le")
            by_series.setdefault(rest, []).append((math.inf if le == "+Inf" else float(le), value))
        for rest, buckets in by_series.items():
            counts = [v for _, v in sorted(buckets)]
            assert counts == sorted(counts), f"{family} buckets not cumulative"
            assert sorted(buckets)[-1][0] == math.inf
            assert counts[-1] == samples[family + "_count"][rest]


def value(samples, name: str, **labels) -> float:
    return samples.get(name, {}).get(frozenset(labels.items()), 0.0)


def scrape(url: str, client=httpx, **headers) -> dict:
    response = client.get(url + "/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    return parse(response.text)


@pytest.fixture
def server(settings, service, tmp_path):
    build_docs(service, write_files(tmp_path / "docs", FILES), "temples")
    with RunningServer(create_app(settings)) as running:
        yield running


SEARCH = "/v1/{source}/search"


@pytest.mark.slow
def test_a_search_increments_its_route_and_source_and_nothing_else(server):
    before = scrape(server.url)
    assert httpx.get(server.url + "/v1/temples/search", params={"q": "浅草寺"}).status_code == 200
    after = scrape(server.url)
    ok = {"route": SEARCH, "method": "GET", "status": "200", "source": "temples"}
    assert (
        value(after, "chiezo_http_requests_total", **ok)
        == value(before, "chiezo_http_requests_total", **ok) + 1
    )
    timing = {"route": SEARCH, "method": "GET", "source": "temples"}
    assert value(after, "chiezo_http_request_duration_seconds_count", **timing) == 1
    assert 0 < value(after, "chiezo_http_request_duration_seconds_sum", **timing) < 10
    # the first scrape is counted by the second, under its own route
    scraped = {"route": "/metrics", "method": "GET", "status": "200", "source": ""}
    assert value(after, "chiezo_http_requests_total", **scraped) == 1
    assert value(after, "chiezo_source_documents", source="temples") == 2
    assert value(after, "chiezo_source_needs_rebuild", source="temples") == 0
    assert value(after, "chiezo_search_semantic_fallbacks_total", source="temples") == 0


@pytest.mark.slow
def test_errors_count_by_status_under_the_route_template(server):
    httpx.get(server.url + "/v1/temples/search", params={"q": "浅草寺", "bogus": "1"})  # 400
    httpx.get(server.url + "/v1/no-such-source/search", params={"q": "x"})  # 404
    httpx.get(server.url + "/nowhere/at/all")  # no route
    samples = scrape(server.url)
    requests = samples["chiezo_http_requests_total"]
    assert (
        value(
            samples,
            "chiezo_http_requests_total",
            route=SEARCH,
            method="GET",
            status="400",
            source="temples",
        )
        == 1
    )
    # an unknown name is not a label: asking for new names cannot grow the series
    assert (
        value(
            samples,
            "chiezo_http_requests_total",
            route=SEARCH,
            method="GET",
            status="404",
            source="",
        )
        == 1
    )
    assert (
        value(
            samples,
            "chiezo_http_requests_total",
            route="unrouted",
            method="GET",
            status="404",
            source="",
        )
        == 1
    )
    assert not any("no-such-source" in v or "nowhere" in v for k in requests for _, v in k)


@pytest.mark.slow
def test_generation_age_is_the_time_since_built_at(server):
    (info,) = httpx.get(server.url + "/v1/sources").json()["sources"]
    built = time.mktime(time.strptime(info["built_at"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    age = value(scrape(server.url), "chiezo_source_generation_age_seconds", source="temples")
    assert abs(age - (time.time() - built)) < 2


@pytest.mark.slow
def test_a_finished_job_is_counted_once_with_its_duration(server):
    started = httpx.post(server.url + "/v1/jobs", json={"source": "temples", "action": "rebuild"})
    assert started.status_code == 202, started.text
    job_id = started.json()["id"]
    deadline = time.monotonic() + 60
    while (job := httpx.get(f"{server.url}/v1/jobs/{job_id}").json())["state"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert job["state"] == "done"
    labels = {"source": "temples", "action": "rebuild", "state": "done"}
    for _ in range(2):  # a second scrape does not count the same job again
        samples = scrape(server.url)
        assert value(samples, "chiezo_job_duration_seconds_count", **labels) == 1
        assert value(samples, "chiezo_job_duration_seconds_sum", **labels) == pytest.approx(
            job["elapsed_s"], abs=0.01
        )
        assert value(samples, "chiezo_jobs_running") == 0


@pytest.mark.slow
def test_semantic_fallbacks_count_per_source_on_every_surface(
    settings, service, tmp_path, monkeypatch
):
    build_docs(service, write_files(tmp_path / "docs", FILES), "temples")
    building.embed(service, "temples", "use-m")
    build_docs(service, write_files(tmp_path / "plain", {"a.md": "# 寺\n\n寺の話。\n"}), "plain")

    def slow(source, text):  # the meaning side outlives its budget
        time.sleep(0.5)
        raise AssertionError("the budget should have expired first")

    with RunningServer(create_app(settings)) as server:
        monkeypatch.setattr(retrieval, "SEMANTIC_BUDGET", 0.05)
        monkeypatch.setattr(retrieval, "embed_query", slow)
        one = httpx.get(server.url + "/v1/temples/search", params={"q": "雷門"}).json()
        assert one["retrieval"] == "keyword-fallback"
        every = httpx.get(server.url + "/v1/search", params={"q": "寺", "mode": "hybrid"})
        assert "keyword-fallback" in every.json()["retrieval"]
        page = httpx.get(server.url + "/", params={"q": "舞台", "source": "temples"})
        assert page.status_code == 200
        samples = scrape(server.url)
    assert value(samples, "chiezo_search_semantic_fallbacks_total", source="temples") == 3
    assert value(samples, "chiezo_search_semantic_fallbacks_total", source="plain") == 0


@pytest.mark.slow
def test_a_switched_in_generation_is_warmed_before_it_is_asked(settings, service, tmp_path):
    build_docs(service, write_files(tmp_path / "docs", FILES), "temples")
    with RunningServer(create_app(settings)) as server:
        server_library = server.server.config.app.state.service.library
        assert server_library.warm_new_generations
        generation = Path(
            building.embed(service, "temples", "use-m").path
        ).name  # as another process would
        deadline = time.monotonic() + 30
        while server_library.warmed.get("temples", {}).get("generation") != generation:
            assert time.monotonic() < deadline, server_library.warmed
            time.sleep(0.05)
        warmed = server_library.warmed["temples"]
        source = server_library._open["temples"]  # noqa: SLF001 - what the warm left behind
        assert source.path.name == generation and source._vectors is not None
        samples = scrape(server.url)
    assert value(samples, "chiezo_source_warm_seconds", source="temples") == warmed["seconds"]
    assert value(samples, "chiezo_source_vectors", source="temples") > 0


# -- who may read it -----------------------------------------------------------------------------


@pytest.mark.slow
def test_beyond_loopback_metrics_need_a_token(settings, service, tmp_path):
    build_docs(service, write_files(tmp_path / "docs", FILES), "temples")
    with RunningServer(create_app(settings, bind_host="0.0.0.0")) as server:
        refused = httpx.get(server.url + "/metrics")
        assert refused.status_code == 403 and "CHIEZO_TOKEN" in refused.json()["hint"]
        assert httpx.get(server.url + "/v1/sources").status_code == 200  # other reads stay open
    with RunningServer(
        create_app(replace(settings, token="s3cret"), bind_host="0.0.0.0")
    ) as server:
        for tried in (
            {},
            {"authorization": "Bearer wrong"},
            {"authorization": "s3cret"},
            {"authorization": "Basic czNjcmV0"},
            {"x-chiezo-token": "s3cret"},
        ):
            assert httpx.get(server.url + "/metrics", headers=tried).status_code == 401, tried
        assert httpx.get(server.url + "/metrics", params={"token": "s3cret"}).status_code == 401
        samples = scrape(server.url, authorization="Bearer s3cret")
        assert value(samples, "chiezo_source_documents", source="temples") == 2
        # a page whose name was re-pointed at this machine (DNS rebinding) gets nothing
        rebinding = httpx.get(
            server.url + "/metrics",
            headers={"host": "evil.example", "authorization": "Bearer s3cret"},
        )
        assert rebinding.status_code == 421


@pytest.mark.slow
def test_metrics_never_carry_what_was_searched_or_written(server):
    secret = "極秘の合言葉"
    httpx.get(server.url + "/v1/temples/search", params={"q": secret})
    httpx.get(server.url + "/v1/search", params={"q": secret})
    httpx.post(server.url + "/v1/notes", json={"text": f"{secret} は金庫の中", "tags": [secret]})
    httpx.request("PROPFIND", server.url + "/v1/sources")  # a method of its own: no new label
    text = httpx.get(server.url + "/metrics").text
    assert secret not in text and "金庫" not in text and "PROPFIND" not in text
    samples = parse(text)
    assert (
        value(
            samples,
            "chiezo_http_requests_total",
            route="/v1/sources",
            method="other",
            status="405",
            source="",
        )
        == 1
    )


def test_each_worker_of_several_labels_its_series_with_its_process_id(monkeypatch):
    import os

    from chiezo.surfaces.rest.metrics import Metrics, worker_label
    from chiezo.surfaces.rest.supervision import SUPERVISOR_ENV

    monkeypatch.setenv(SUPERVISOR_ENV, str(os.getpid()))  # a single-process server
    assert worker_label() is None
    monkeypatch.setenv(SUPERVISOR_ENV, str(os.getppid()))  # started by `serve --workers N`
    assert worker_label() == str(os.getpid())
    metrics = Metrics(worker="4242")
    metrics.request("/v1/{source}/search", "GET", 200, "temples", 0.02)
    counted = parse("\n".join([*metrics.requests.lines(), *metrics.latency.lines()]) + "\n")
    for name, series in counted.items():
        assert all(dict(labels)["worker"] == "4242" for labels in series), name
    assert (
        value(
            counted,
            "chiezo_http_requests_total",
            route="/v1/{source}/search",
            method="GET",
            status="200",
            source="temples",
            worker="4242",
        )
        == 1
    )


# -- several workers, one scrape -----------------------------------------------------------------


def _sample_for(pid: int, count: float = 1.0, route: str = "/v1/sources"):
    """What a worker with process id ``pid`` would share after ``count`` requests to ``route``."""
    from chiezo.surfaces.rest.metrics import HTTP_BUCKETS, Sample

    labels = (("route", route), ("method", "GET"), ("status", "200"), ("source", ""))
    timing = (("route", route), ("method", "GET"), ("source", ""))
    worker = (("worker", str(pid)),)
    return Sample(
        worker=str(pid),
        pid=pid,
        started=time.time(),
        requests={labels + worker: count},
        latency={timing + worker: [count] + [0.0] * len(HTTP_BUCKETS) + [count * 0.01]},
        fallbacks={},
        warmed={"temples": ("20260101T000000Z", 0.5)},
        jobs={7: ((("source", "temples"), ("action", "rebuild"), ("state", "done")), 3.0)},
    )


def _started_ticks(pid: int) -> str:
    return _stat(pid)[19]


def test_a_snapshot_of_another_worker_is_taken_only_as_far_as_it_checks_out():
    from chiezo.surfaces.rest.metrics import MAX_SERIES, Sample

    sample = _sample_for(4242, 3)
    assert Sample.decode(4242, sample.encode()) == sample
    read = Sample.decode(777, sample.encode())  # the worker is the file's, whatever it says
    assert read is not None and all(dict(k)["worker"] == "777" for k in read.requests)
    good = json.loads(sample.encode())

    def spoiled(**changes) -> bytes:
        return json.dumps({**good, **changes}).encode()

    hostile = [
        b"",
        b"{not json",
        b"[" * 100_000 + b"]" * 100_000,  # deeper than the parser goes
        b"\xff\xfe",
        json.dumps([good]).encode(),
        spoiled(v=2),
        spoiled(started=-1),
        spoiled(started=float("nan")),
        spoiled(requests={"route": 1}),
        spoiled(requests=[[["/x", "GET", "200"], 1]]),  # a label short
        spoiled(requests=[[["/x", "GET", "200", "", "extra"], 1]]),
        spoiled(requests=[[["/x", "GET", "200", 'a"}\nchiezo_evil 1'], 1]]),  # a line of its own
        spoiled(requests=[[["/x", "GET", "200", "\u2028"], 1]]),
        spoiled(requests=[[["/x", "GET", "200", 5], 1]]),
        spoiled(requests=[[["/x", "GET", "200", "x" * 5000], 1]]),
        spoiled(requests=[[["/x", "GET", "200", ""], True]]),
        spoiled(requests=[[["/x", "GET", "200", ""], "1"]]),
        spoiled(requests=[[["/x", "GET", "200", ""], -1]]),
        spoiled(requests=[[["/x", "GET", "200", ""], 10**400]]),
        spoiled(requests=[[["/x", "GET", "200", ""], 1]] * (MAX_SERIES + 1)),
        spoiled(latency=[[["/x", "GET", ""], [1, 0.01]]]),  # not the buckets of the family
        spoiled(fallbacks=[[["temples", "extra"], 1]]),
        spoiled(warmed={"temples": "fast"}),
        spoiled(jobs={"7": ["temples", "rebuild", "running", 3.0]}),  # not finished
        spoiled(jobs={"-7": ["temples", "rebuild", "done", 3.0]}),
        spoiled(jobs=[["7", ["temples", "rebuild", "done"]]]),
    ]
    for raw in hostile:
        assert Sample.decode(4242, raw) is None, raw[:200]
    # a number written as 1e999 reads as infinity: refused too
    assert (
        Sample.decode(4242, sample.encode().replace(b'"started":', b'"started":1e999,"x":')) is None
    )


@pytest.fixture
def child():
    """A process started by this one (so, for the reader, a worker of this 'supervisor')."""
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process.pid
    process.kill()
    process.wait()


def test_the_shared_directory_is_private_and_what_is_planted_there_is_not_read(
    tmp_path, monkeypatch, child
):
    import os
    import stat as stats

    from chiezo.surfaces.rest import worker_snapshots as shared
    from chiezo.surfaces.rest.supervision import SUPERVISOR_ENV

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    with shared.shared_directory(1):
        assert shared.METRICS_DIR_ENV not in os.environ  # one worker answers for itself
    with shared.shared_directory(2):
        folder = Path(os.environ[shared.METRICS_DIR_ENV])
        assert folder.parent == tmp_path and stats.S_IMODE(folder.stat().st_mode) == 0o700
        monkeypatch.setenv(SUPERVISOR_ENV, str(os.getpid()))
        mine = shared.Snapshots.from_env()
        assert mine is not None
        assert mine.missing() and mine.write(b"{}") and not mine.missing()
        assert stats.S_IMODE((folder / mine.name).stat().st_mode) == 0o600
        (folder / "spare").write_bytes(b"{}")
        (folder / "spare").replace(folder / mine.name)
        assert mine.missing()  # not the file it wrote: it writes its own again
        assert mine.write(b"{}") and not mine.missing()
        assert mine.others() == []  # its own file is not another's

        name = f"{child}.{_started_ticks(child)}.json"
        valid = _sample_for(child).encode()
        (folder / name).write_bytes(valid)
        assert mine.others() == [(child, valid)]

        outside = tmp_path / "outside.json"
        outside.write_bytes(valid)
        planted = {
            "a symlink": lambda path: path.symlink_to(outside),
            "a hard link": lambda path: os.link(outside, path),
            "a FIFO": lambda path: os.mkfifo(path),
            "an oversized file": lambda path: path.write_bytes(b" " * (shared.MAX_BYTES + 1)),
        }
        for what, plant in planted.items():
            (folder / name).unlink()
            plant(folder / name)
            assert mine.others() == [], what  # not followed, not read, no wait on the FIFO
        (folder / name).unlink()
        (folder / name).write_bytes(valid)

        gone = [
            "4194305.1.json",  # a process id no kernel gives
            f"{child}.1.json",  # the child's id, not its start: a pid used again
            f"{os.getppid()}.{_started_ticks(os.getppid())}.json",  # alive, not a worker
            f"{os.getpid()}.1.json",  # this process's id with another start
            "4194305.1.0123456789abcdef.tmp",  # left by a worker killed while writing
        ]
        for other in gone:
            (folder / other).write_bytes(valid)
        untouched = ["notes.txt", ".hidden", "12.json", "0.0.json"]
        for other in untouched:
            (folder / other).write_bytes(valid)
        assert mine.others() == [(child, valid)]
        assert sorted(p.name for p in folder.iterdir()) == sorted([mine.name, name, *untouched])

        os.chmod(folder, 0o750)  # a directory others could enter is not used
        assert shared.Snapshots.from_env() is None
        os.chmod(folder, 0o700)
        (tmp_path / "link").symlink_to(folder)
        monkeypatch.setenv(shared.METRICS_DIR_ENV, str(tmp_path / "link"))
        assert shared.Snapshots.from_env() is None
    assert not folder.exists()


def test_a_scrape_of_one_worker_answers_for_the_others_it_reads(child):
    """The merging, without a server: another worker's snapshot (a live child process here)
    joins this worker's own counts; what this worker reports is what it writes for the
    others; what all workers read alike is said once."""
    import os
    from types import SimpleNamespace

    from chiezo.surfaces.rest.metrics import Metrics, Sample

    class Directory:
        written: list[bytes] = []

        def others(self):
            return [(child, _sample_for(child, 5).encode())]

        def missing(self):
            return not self.written

        def write(self, data: bytes) -> bool:
            self.written.append(data)
            return True

    me = str(os.getpid())
    metrics = Metrics(worker=me)
    metrics.snapshots = Directory()
    metrics.request("/v1/sources", "GET", 200, "", 0.02)
    info = {"name": "temples", "generation": "20260101T000000Z", "docs": 2, "status": "ok"}
    library = SimpleNamespace(
        warmed={"temples": {"generation": "g2", "seconds": 0.75}},
        infos=lambda: [SimpleNamespace(to_dict=lambda: info)],
    )
    service = SimpleNamespace(library=library)
    finished = {"id": 8, "state": "done", "finished_at": "2999-01-01T00:00:00Z", "elapsed_s": 2}
    samples = parse(metrics.exposition(service, [{**finished, "source": "temples"}]))
    sources = {"route": "/v1/sources", "method": "GET", "status": "200", "source": ""}
    assert _by_worker(samples, "chiezo_http_requests_total", **sources) == {me: 1, str(child): 5}
    assert _by_worker(samples, "process_open_fds").keys() == {me, str(child)}
    assert value(samples, "chiezo_source_documents", source="temples") == 2  # no worker
    assert value(samples, "chiezo_jobs_running") == 0
    # each worker's own warm: the child's is of the current generation, this one's is not
    assert _by_worker(samples, "chiezo_source_warm_seconds", source="temples") == {str(child): 0.5}
    # job 7 the child counted, job 8 this worker: both once, with no worker
    jobs = {"source": "temples", "action": "rebuild", "state": "done"}
    assert value(samples, "chiezo_job_duration_seconds_count", **jobs) == 1
    jobs["action"] = ""  # the record of job 8 has none
    assert value(samples, "chiezo_job_duration_seconds_count", **jobs) == 1
    (written,) = Directory.written
    mine = Sample.decode(os.getpid(), written)
    assert mine is not None and mine.requests == {
        (*((k, v) for k, v in sources.items()), ("worker", me)): 1
    }
    assert sorted(mine.jobs) == [7, 8]  # passed on: whichever worker answers next counts both
    parse(metrics.exposition(service, []))
    assert len(Directory.written) == 1  # nothing changed: not written again
    metrics.request("/metrics", "GET", 200, "", 0.01)
    parse(metrics.exposition(service, []))
    assert len(Directory.written) == 2


def test_process_metrics_come_from_proc():
    import os

    from chiezo.surfaces.rest.worker_snapshots import process_stats

    found = process_stats(os.getpid())
    assert found is not None
    assert 10 << 20 < found.resident_bytes < 64 << 30
    assert found.private_bytes is not None and 0 < found.private_bytes <= found.resident_bytes * 2
    assert found.cpu_seconds > 0 and found.open_fds >= 3
    assert time.time() - 3600 < found.start_time <= time.time()
    assert process_stats(4194305) is None


@dataclass
class Workers:
    process: subprocess.Popen
    url: str
    shared: Path  # the directory the workers share their snapshots in
    client: httpx.Client  # a new connection for each request: any worker may take it
    sent: int = 0  # requests to /healthz so far

    def scrape(self) -> dict:
        return scrape(self.url, self.client)


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    """One ``chiezo serve --workers 2`` for the tests below (a start costs seconds)."""
    import os
    import sys

    temporary = tmp_path_factory.mktemp("tmp")
    port = free_port()
    env = {
        **os.environ,
        "CHIEZO_DATA": str(tmp_path_factory.mktemp("data")),
        "TMPDIR": str(temporary),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "chiezo", "serve", "--port", str(port), "--workers", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0))
    served = Workers(process, f"http://127.0.0.1:{port}", temporary, client)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                client.get(served.url + "/healthz", timeout=2).raise_for_status()
                served.sent += 1
                break
            except httpx.HTTPError:
                assert process.poll() is None, "the server ended"
                assert time.monotonic() < deadline, "the server did not come up"
                time.sleep(0.2)
        (served.shared,) = temporary.glob("chiezo-metrics-*")
        yield served
    finally:
        client.close()
        process.terminate()  # the supervisor stops its workers, then removes the directory
        try:
            process.wait(timeout=30)
        finally:
            process.kill()  # nothing once it has ended
    assert not any(temporary.glob("chiezo-metrics-*")), "the supervisor leaves it behind"


HEALTHZ = {"route": "/healthz", "method": "GET", "status": "200", "source": ""}


def _by_worker(samples, name: str, **labels) -> dict[str, float]:
    """{worker: value} of the series ``name`` with ``labels`` (and any worker)."""
    out = {}
    for key, found in samples.get(name, {}).items():
        rest = dict(key)
        worker = rest.pop("worker", None)
        if rest == labels and worker:
            out[worker] = found
    return out


def _burst(served: Workers, count: int) -> None:
    """``count`` requests at once, each on its own connection: both workers take some."""
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: served.client.get(served.url + "/healthz"), range(count)))
    assert all(a.status_code == 200 for a in answers)
    served.sent += count


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _parent(pid: int) -> int:
    return int(_stat(pid)[1])


def _state(pid: int) -> str | None:
    """R, S, … ; Z once killed (until its parent reaps it); None once gone."""
    try:
        return _stat(pid)[0]
    except OSError:
        return None


@pytest.mark.slow
def test_one_scrape_answers_for_every_worker_with_its_process_metrics(workers):
    deadline = time.monotonic() + 30
    while len(_by_worker(workers.scrape(), "chiezo_http_requests_total", **HEALTHZ)) < 2:
        assert time.monotonic() < deadline, "one worker took every request"
        _burst(workers, 16)
    # every request counted once, by the worker that answered it (the others' snapshots are
    # at most a second old)
    deadline = time.monotonic() + 5
    while (
        sum(
            (
                counts := _by_worker(
                    samples := workers.scrape(), "chiezo_http_requests_total", **HEALTHZ
                )
            ).values()
        )
        != workers.sent
    ):
        assert time.monotonic() < deadline, (counts, workers.sent)
        time.sleep(0.2)
    assert len(counts) == 2 and all(_parent(int(pid)) == workers.process.pid for pid in counts)
    timing = {k: v for k, v in HEALTHZ.items() if k != "status"}
    assert _by_worker(samples, "chiezo_http_request_duration_seconds_count", **timing) == counts
    resident = _by_worker(samples, "process_resident_memory_bytes")
    private = _by_worker(samples, "chiezo_process_private_memory_bytes")
    assert resident.keys() == private.keys() == counts.keys()
    assert all(resident[w] > 20 << 20 and 0 < private[w] <= 2 * resident[w] for w in counts)
    assert all(v > 0 for v in _by_worker(samples, "process_cpu_seconds_total").values())
    assert all(v >= 3 for v in _by_worker(samples, "process_open_fds").values())
    started = _by_worker(samples, "process_start_time_seconds")
    assert started.keys() == counts.keys()
    assert all(time.time() - 300 < v <= time.time() for v in started.values())
    assert _by_worker(samples, "chiezo_process_start_time_seconds").keys() == counts.keys()
    assert value(samples, "chiezo_jobs_running") == 0  # the same for all: said once, no worker
    # whichever worker answers (each scrape is a request too), no series goes back
    last = samples
    for _ in range(12):
        now = workers.scrape()
        for name in ("chiezo_http_requests_total", "chiezo_http_request_duration_seconds_count"):
            for key, before in last[name].items():
                assert now[name].get(key, 0) >= before, (name, key)
        last = now


@pytest.mark.slow
def test_what_is_planted_in_the_shared_directory_adds_nothing_and_breaks_nothing(workers, tmp_path):
    import os
    import stat as stats

    assert stats.S_IMODE(workers.shared.stat().st_mode) == 0o700
    files = sorted(workers.shared.glob("*.json"))
    assert len(files) == 2 and all(stats.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    evil = _sample_for(os.getpid(), 1e15, route="/evil")
    outside = tmp_path / "evil.json"
    outside.write_bytes(evil.encode())
    planted = {
        f"{os.getpid()}.{_started_ticks(os.getpid())}.json": evil.encode(),  # alive, no worker
        "4194305.1.json": evil.encode(),  # no such process
        "notes.txt": b"hello",
    }
    for name, content in planted.items():
        (workers.shared / name).write_bytes(content)
    (workers.shared / f"{os.getppid()}.{_started_ticks(os.getppid())}.json").symlink_to(outside)
    bad_content = [
        b"{not json",
        b"[" * 100_000,
        json.dumps(
            {"v": 1, "started": 1, "requests": [[["/evil", "GET", "200", "\n"], 1]]}
        ).encode(),
    ]
    for index, content in enumerate([*bad_content, None]):
        # a worker's own file replaced (it writes it again within a second)
        victim = files[index % 2]
        spare = workers.shared / "spare"
        if content is None:
            spare.symlink_to(outside)
        else:
            spare.write_bytes(content)
        spare.replace(victim)
        for _ in range(3):
            answer = workers.client.get(workers.url + "/metrics")
            assert answer.status_code == 200
            samples = parse(answer.text)
            assert "/evil" not in answer.text and "chiezo_evil" not in answer.text
            assert max(v for series in samples.values() for v in series.values()) < 1e12
    assert not (workers.shared / "4194305.1.json").exists()  # removed: its process is gone
    assert (workers.shared / "notes.txt").exists()  # not a name a worker writes: not touched
    # each worker writes its own file again: both answer in the next scrapes again
    deadline = time.monotonic() + 10
    while len(_by_worker(workers.scrape(), "process_open_fds")) != 2 or any(
        f.is_symlink() for f in workers.shared.glob("*.json")
    ):
        assert time.monotonic() < deadline
        time.sleep(0.2)


@pytest.mark.slow
def test_a_killed_workers_series_go_and_its_replacement_counts_afresh(workers):
    import os
    import signal

    _burst(workers, 8)
    before = _by_worker(workers.scrape(), "process_open_fds")
    assert len(before) == 2
    killed, kept = sorted(before)
    os.kill(int(killed), signal.SIGKILL)
    deadline = time.monotonic() + 90
    while _state(int(killed)) not in ("Z", None):  # the signal takes a moment
        assert time.monotonic() < deadline
        time.sleep(0.01)
    while True:
        samples = workers.scrape()
        seen = _by_worker(samples, "process_open_fds").keys()
        everywhere = {dict(k).get("worker") for series in samples.values() for k in series}
        assert killed not in everywhere  # gone at once: not counted twice with its replacement
        if len(seen) == 2:
            break
        assert time.monotonic() < deadline, "no replacement worker"
        time.sleep(0.3)
    (replacement,) = set(seen) - {kept}
    assert _parent(int(replacement)) == workers.process.pid
    assert not list(workers.shared.glob(f"{killed}.*"))  # its file removed
    healthz = _by_worker(samples, "chiezo_http_requests_total", **HEALTHZ)
    assert healthz.get(replacement, 0) <= 1  # its own count, from nothing
