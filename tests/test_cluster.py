"""Chiezo on a Ray cluster (issue 20), on a real local cluster of two nodes
(``ray.cluster_utils.Cluster``: two raylets, each with its own workers): embedding by an actor
pool, Wikipedia rendering as tasks, and the application as a Ray Serve deployment — each
compared with the single-machine path it stands in for.

Ray is the optional extra ``chiezo[cluster]``; ``make test`` installs it, so these tests run
in CI; without it they skip with that reason and the rest of the suite runs."""

# ruff: noqa: E402 (the imports below the skip need the extra)

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from click.testing import CliRunner

from chiezo.ops import building

# the optional extra: without it these tests skip with the reason, the rest of the suite runs
ray = pytest.importorskip("ray", reason="the cluster extra is not installed (`make cluster`)")
from ray.cluster_utils import Cluster

from chiezo.cluster.embedding import RayEmbedding
from chiezo.cluster.serving import FAST_INGRESS
from chiezo.core import db
from chiezo.core.config import Settings
from chiezo.core.errors import ConfigError, InputError
from chiezo.ingest.wikipedia import WikiOptions, ingest_wikipedia
from chiezo.ingest.wikistreams import index_beside, write_multistream
from chiezo.ops.context import Context
from chiezo.store import generations
from chiezo.surfaces.cli.main import cli

from helpers import build_docs, data_file, generations_of, stored_vectors, write_files

# a real two-node Ray cluster: left out of `make test-fast`
pytestmark = pytest.mark.slow

JA = "wikipedia/jawiki-20230501-excerpt.xml.bz2"
OLD = {"a.md": "---\ntitle: 雷門\n---\n浅草寺の総門。赤い提灯が下がる。\n"}
NEW = {"a.md": "---\ntitle: 雷門\n---\n浅草寺の総門。風神と雷神の像が立つ。\n"}


@pytest.fixture(scope="module")
def cluster():
    """A head and a worker node, one CPU each (so work must spread over both), with the
    serving settings docs/cluster.md recommends."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in FAST_INGRESS.items():
            env.setenv(name, value)
        yield from _two_nodes()


def _two_nodes():
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    # the worker says it has a GPU: the embedding asks it whether the model can use one
    worker = nodes.add_node(num_cpus=1, num_gpus=1)
    ray.init(address=nodes.address, log_to_driver=False)
    nodes.wait_for_nodes()
    yield nodes, worker
    ray.shutdown()
    nodes.shutdown()


def test_the_single_machine_path_never_imports_ray():
    """Ray is optional: the CLI, the server and every source kind load without it."""
    code = (
        "import sys, chiezo.surfaces.cli.main, chiezo.surfaces.rest.app, chiezo.store.embed, chiezo.ingest.wikipedia; "
        "from chiezo.store.kinds import kinds; kinds(); "
        "sys.exit('ray was imported' if 'ray' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0
    listed = subprocess.run(
        [sys.executable, "-m", "chiezo.surfaces.cli.main", "--help"], capture_output=True
    )
    assert listed.returncode == 0


def test_cluster_options_are_checked_before_anything_runs(tmp_path):
    """A cluster nobody answers at fails in a second with a hint (Ray alone waits minutes);
    options that only mean something with --ray are refused without it."""
    service = Context(Settings(data_dir=tmp_path / "data"))
    build_docs(service, write_files(tmp_path / "docs", OLD), "kb")

    def chiezo(*args: str):
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "chiezo.surfaces.cli.main",
                "--data",
                str(tmp_path / "data"),
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )

    with socket.socket() as unused:  # a port on loopback where nothing listens
        unused.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{unused.getsockname()[1]}"
    started = time.monotonic()
    nobody = chiezo("embed", "kb", "--ray", address)
    assert nobody.returncode == 2 and f"no Ray cluster answers at {address}" in nobody.stderr
    assert "ray start --head" in nobody.stderr and time.monotonic() - started < 30
    garbled = chiezo("ingest", "wikipedia", str(data_file(JA)), "--ray", "not an address")
    assert garbled.returncode == 2 and "not a Ray cluster address" in garbled.stderr
    assert generations.current_path(tmp_path / "data" / "corpus" / "jawiki") is None
    for args in (["embed", "kb", "--actors", "2"], ["serve", "--replicas", "2"]):
        alone = chiezo(*args)
        assert alone.returncode == 2 and "goes with --ray" in alone.stderr
    mixed = chiezo("serve", "--ray", address, "--workers", "4")
    assert mixed.returncode == 2 and "give --replicas" in mixed.stderr


@pytest.fixture(scope="module")
def jawiki_built(tmp_path_factory) -> Path:
    settings = Settings(data_dir=tmp_path_factory.mktemp("built") / "data")
    ingest_wikipedia(settings, data_file(JA))
    return settings.data_dir


def _copy(data: Path, to: Path) -> Context:
    shutil.copytree(data, to, symlinks=True)
    return Context(Settings(data_dir=to, query_timeout=10))


def _vectors(service: Context, name: str = "jawiki") -> dict:
    stored = stored_vectors(generations.current_path(service.settings.corpus_dir / name))
    return {key: np.frombuffer(v, "<f2").astype(np.float32) for key, v in stored.items()}


def test_embedding_by_an_actor_pool_gives_the_local_vectors(cluster, jawiki_built, tmp_path):
    local, spread = _copy(jawiki_built, tmp_path / "local"), _copy(jawiki_built, tmp_path / "ray")
    here = building.embed(local, "jawiki", "use-m", max_chunks=30)
    there = building.embed(spread, "jawiki", "use-m", max_chunks=30, runner=RayEmbedding(actors=2))
    assert there.embedded == here.embedded > 100 and there.vectors == here.vectors
    # onnxruntime there has no CUDA provider: CPU actors only, and the report says so
    assert here.computed_by == "this process"
    assert there.computed_by == "a Ray cluster: 2 CPU actors"
    a, b = _vectors(local), _vectors(spread)
    assert a.keys() == b.keys()
    worst = max(float(np.abs(a[k] - b[k]).max()) for k in a)
    assert worst < 2e-3  # float16 rounding of the same model's output
    # incremental and resumable: what the cache holds is not embedded again, on the cluster too
    more = building.embed(spread, "jawiki", "use-m", max_chunks=45, runner=RayEmbedding(actors=2))
    assert more.reused == there.vectors and more.embedded > 0  # every unit of the first 30 cached
    # more actors than the cluster can place would wait for ever: refused, saying what fits
    with pytest.raises(ConfigError, match="5 embedding actors need 5 CPUs; the cluster has 2"):
        building.embed(spread, "jawiki", "use-m", max_chunks=45, runner=RayEmbedding(actors=5))
    assert spread.library.get("jawiki").info().vectors["model"] == "use-m"


def test_wikipedia_rendered_on_the_cluster_is_the_local_build(
    cluster, jawiki_built, tmp_path, monkeypatch
):
    from chiezo.cluster import words

    nodes, _ = cluster
    data = tmp_path / "data"
    splitters = []
    started = words.RayWordSplitter.start
    monkeypatch.setattr(words.RayWordSplitter, "start", lambda s: splitters.append(s) or started(s))
    result = CliRunner().invoke(
        cli,
        [
            "--data",
            str(data),
            "ingest",
            "wikipedia",
            str(data_file(JA)),
            "--ray",
            nodes.address,
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert _rows(data) == _rows(jawiki_built)  # the word index included
    assert len(splitters) == 1 and splitters[0]._done == len(_rows(data)[0])  # words split there


def _rows(data: Path) -> list:
    """What a jawiki build wrote: documents, passages, titles and words, in order."""
    conn = db.open_readonly(generations.current_path(data / "corpus" / "jawiki"))
    try:
        docs = conn.execute(
            "SELECT doc_id, title, aliases, body, rank_score FROM docs ORDER BY doc_id"
        )
        chunks = conn.execute(
            "SELECT chunk_id, doc_id, heading_path, spans, text FROM chunks ORDER BY chunk_id"
        )
        titles = conn.execute("SELECT norm, doc_id, is_alias FROM titles ORDER BY 1, 2")
        words = conn.execute("SELECT word, df FROM word_df ORDER BY word")
        return [docs.fetchall(), chunks.fetchall(), titles.fetchall(), words.fetchall()]
    finally:
        conn.close()


def test_workers_read_their_own_streams_of_a_multistream_dump(
    cluster, jawiki_built, tmp_path, monkeypatch
):
    """With the index beside the dump, the builder sends byte ranges, never reads a page of
    XML itself, and writes the same source as a local build of the same dump."""
    import chiezo.cluster.wiki  # noqa: F401 - registers the ray rendering, as the CLI's --ray does
    from chiezo.ingest import wikidump

    dump = write_multistream(data_file(JA), tmp_path, per_stream=10)
    assert index_beside(dump) is not None  # found by its name, as Wikimedia names it
    read_here: list[str] = []
    original = wikidump.WikiDump.pages
    monkeypatch.setattr(
        wikidump.WikiDump,
        "pages",
        lambda self: (read_here.append(p.title) or p for p in original(self)),
    )
    settings = Settings(data_dir=tmp_path / "data")
    report = ingest_wikipedia(settings, dump, wiki=WikiOptions(ray=nodes_address(cluster)))
    assert report.docs == 71 and read_here == []  # the siteinfo only, no page, read here
    assert _rows(settings.data_dir) == _rows(jawiki_built)

    # a broken stream fails the build with its byte range; nothing is switched in
    broken = tmp_path / "broken"
    broken.mkdir()
    copy = write_multistream(data_file(JA), broken, per_stream=10)
    raw = bytearray(copy.read_bytes())
    middle = len(raw) // 2
    raw[middle : middle + 64] = bytes(64)
    copy.write_bytes(bytes(raw))
    with pytest.raises(InputError, match="are broken"):
        ingest_wikipedia(
            Settings(data_dir=broken / "data"), copy, wiki=WikiOptions(ray=nodes_address(cluster))
        )
    assert generations.current_path(broken / "data" / "corpus" / "jawiki") is None


def nodes_address(cluster) -> str:
    return cluster[0].address


LOSS_WINDOW = 3.0  # seconds after a replica or node is lost in which a request may fail


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Load:
    """Clients asking the deployment for one document without pause, keeping every answer:
    (status or the error's name, the generation named, the body, when it came)."""

    def __init__(self, url: str, clients: int = 2, fresh_connections: bool = False) -> None:
        self.url, self.answers, self.stop = url, [], threading.Event()
        self.limits = httpx.Limits(max_keepalive_connections=0 if fresh_connections else None)
        self.threads = [threading.Thread(target=self._ask, daemon=True) for _ in range(clients)]
        for thread in self.threads:
            thread.start()

    def _ask(self) -> None:
        with httpx.Client(timeout=30, limits=self.limits) as client:
            while not self.stop.is_set():
                try:
                    r = client.get(self.url, params={"title": "雷門"})
                    gen = generations_of(r.headers.get("x-chiezo-generation")).get("kb")
                    self.answers.append((r.status_code, gen, r.text, time.monotonic()))
                except httpx.HTTPError as exc:
                    self.answers.append((type(exc).__name__, None, "", time.monotonic()))

    def lost_only_around(self, moment: float) -> None:
        """The only failures are the requests in flight when the loss came (one per client at
        most: each has one at a time); every request after that is answered."""
        failed = [a for a in self.answers if a[0] != 200]
        assert len(failed) <= len(self.threads), failed
        assert all(moment <= a[3] <= moment + LOSS_WINDOW for a in failed), failed
        later = [a for a in self.answers if a[3] > moment + LOSS_WINDOW]
        assert len(later) > 4 and all(a[0] == 200 for a in later)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)


def _answered_after(load: Load, moment: float) -> None:
    """Keep the load on until a few answers came after the window a loss may fail in."""
    _until(lambda: sum(a[3] > moment + LOSS_WINDOW for a in load.answers) > 4, 30)


def _replica_nodes() -> set[str]:
    from ray.util.state import list_actors

    alive = list_actors(filters=[("state", "=", "ALIVE")], limit=1000)
    return {a.node_id for a in alive if a.class_name.startswith("ServeReplica")}


def _until(check, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.5)


def test_serving_on_the_cluster_switches_and_recovers(cluster, tmp_path):
    from ray import serve

    from chiezo.cluster.serving import (
        APP_NAME,
        ServeOptions,
        deploy,
        nodes_out_of_step,
        replica_states,
    )

    nodes, worker = cluster
    service = Context(Settings(data_dir=tmp_path / "data"))
    build_docs(service, write_files(tmp_path / "old", OLD), "kb")
    old = generations.current_path(service.settings.corpus_dir / "kb").name
    port = _free_port()
    deploy(service.settings, ServeOptions(port=port, replicas=2, replica_cpus=0.4))
    base = f"http://127.0.0.1:{port}"
    try:
        assert replica_states() == {"RUNNING": 2}
        first = httpx.get(f"{base}/v1/kb/doc", params={"title": "雷門"}, timeout=30)
        assert first.status_code == 200 and "提灯" in first.json()["body"]
        assert generations_of(first.headers["x-chiezo-generation"]) == {"kb": old}
        # every node would serve what this machine has (one file system here); a node with
        # another generation of a source, or none, is named
        data = str(service.settings.data_dir.resolve())
        assert nodes_out_of_step(ray, data) == []
        elsewhere = {"kb": ("gen-20260101T000000-abcdef.db", 1), "gone": ("gen-x.db", 1)}
        problems = nodes_out_of_step(ray, data, wanted=elsewhere)
        assert len(problems) == 4  # two sources on two nodes
        assert any(
            f"has {old} for kb, this machine gen-20260101T000000-abcdef.db" in p for p in problems
        ) and any("has nothing for gone" in p for p in problems)
        # the host and origin rules hold on the cluster as in one process
        assert httpx.get(f"{base}/v1/sources", headers={"Host": "evil.example"}).status_code == 421
        # each replica's metrics carry its own label: a scrape reaches one replica at a time
        labels = set()
        for _ in range(20):
            scraped = httpx.get(f"{base}/metrics", timeout=30).text
            labels |= set(
                re.findall(r'chiezo_process_start_time_seconds\{worker="([^"]+)"\}', scraped)
            )
        assert len(labels) == 2

        with Load(f"{base}/v1/kb/doc") as load:
            # a rolling switch: the replicas see the new generation one after the other
            build_docs(service, write_files(tmp_path / "new", NEW), "kb")
            new = generations.current_path(service.settings.corpus_dir / "kb").name
            _until(lambda: any(a[1] == new for a in load.answers[-4:]))
            time.sleep(2)
        assert load.answers and all(a[0] == 200 for a in load.answers)
        for _, gen, body, _ in load.answers:  # never one generation's name on the other's text
            assert gen in (old, new)
            assert ("提灯" in body) == (gen == old) and ("風神" in body) == (gen == new)

        # the worker node lost: its replica comes back on the node that is left. (Clients
        # connect anew for each request, as through a load balancer: a connection held to the
        # lost node's own proxy goes down with it.)
        with Load(f"{base}/v1/kb/doc", fresh_connections=True) as load:
            time.sleep(1)
            assert worker.node_id in _replica_nodes()  # the replicas are spread over the nodes
            lost = time.monotonic()
            nodes.remove_node(worker)
            _until(lambda: replica_states().get("RUNNING", 0) < 2, 30)
            _until(lambda: replica_states().get("RUNNING") == 2, 90)
            _answered_after(load, lost)
        load.lost_only_around(lost)

        # a replica killed under load: the controller starts another
        with Load(f"{base}/v1/kb/doc") as load:
            time.sleep(1)
            victim = next(
                a
                for a in ray.util.list_named_actors(all_namespaces=True)
                if "SERVE_REPLICA" in a["name"]
            )
            killed = time.monotonic()
            ray.kill(ray.get_actor(victim["name"], namespace=victim["namespace"]), no_restart=True)
            _until(lambda: replica_states().get("RUNNING") == 2)
            _answered_after(load, killed)
        load.lost_only_around(killed)
    finally:
        serve.delete(APP_NAME, _blocking=False)  # no 30 s drain: the cluster goes with the module
