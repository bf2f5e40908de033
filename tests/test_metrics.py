"""``/metrics``: the Prometheus text format, scraped from a real server and parsed — counters move
with the requests that made them, and only those allowed to read them can (an attacker's tries
included)."""

import math
import re
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from chiezo.search import retrieval
from chiezo.surfaces.rest import create_app

from helpers import RunningServer, build_docs, write_files

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


def scrape(url: str, **headers) -> dict:
    response = httpx.get(url + "/metrics", headers=headers)
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
    service.embed("temples", "use-m")
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
        generation = Path(service.embed("temples", "use-m").path).name  # as another process would
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
