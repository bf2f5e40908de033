"""``chiezo serve --ray``: the same application (REST, MCP, web) as a Ray Serve deployment.

Each replica builds the app ``chiezo serve`` runs (surfaces/rest/app.py) from the settings the driver
hands over in the runtime environment, and reads the generation files under ``CHIEZO_DATA`` —
a path every node must have: a shared file system, or copies made with ``chiezo export`` /
``chiezo import`` (checked by sha256). Ray Serve's proxy on every node listens on ``host:port``
and spreads requests over the replicas; a replica that dies is replaced by the controller, and
a request on its way to it is the only one lost.

Generations switch per replica, as each one's library sees the new ``current`` (about a second,
library.WATCH_SECONDS): during a rolling switch two replicas may answer from two generations,
but one response never mixes them — every request is pinned to one generation per source and
says which in ``X-Chiezo-Generation`` (surfaces/rest/pinning.py).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, ModuleType

from chiezo.cluster import check_fits, chiezo_environment, connect
from chiezo.core.config import Settings

APP_NAME = "chiezo"
# Ray Serve's HAProxy ingress and its direct data plane, in place of the Python proxy: on two
# cores /healthz went from 240 to 540 requests/s and a search from 56 to 78 (one replica, 16
# clients; design.md §29). Read when Ray starts, so a `ray start` cluster sets them itself.
FAST_INGRESS = {"RAY_SERVE_ENABLE_HA_PROXY": "1", "RAY_SERVE_THROUGHPUT_OPTIMIZED": "1"}
DEPLOYMENT = "chiezo"


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8080
    replicas: int = 2
    replica_cpus: float = 1.0  # a replica answers on its own thread pool (CHIEZO_SERVE_THREADS)
    address: str | None = None  # the cluster, as cluster.connect takes it
    max_ongoing_requests: int = 64  # per replica


def build_app():
    """On a replica: the application, from the settings in this worker's environment."""
    import socket

    from chiezo.surfaces.rest.app import create_app

    # each replica's series apart: a scrape through the proxy reaches one replica at a time
    return create_app(
        Settings.from_env(),
        bind_host=os.environ.get("CHIEZO_BIND_HOST", "127.0.0.1"),
        worker=f"{socket.gethostname()}:{os.getpid()}",
    )


def deploy(settings: Settings, options: ServeOptions, public_url: str | None = None):
    """Start (or update, in place) the deployment; returns once its replicas answer."""
    for name, value in FAST_INGRESS.items():  # for a Ray this command starts itself
        os.environ.setdefault(name, value)
    ray = connect(options.address)
    check_fits(ray, "replicas", options.replicas, options.replica_cpus, "--replicas")
    from ray import serve

    serve.start(http_options={"host": options.host, "port": options.port})
    env = {"CHIEZO_DATA": str(settings.data_dir.resolve()), "CHIEZO_BIND_HOST": options.host}
    if public_url:
        env["CHIEZO_PUBLIC_URL"] = public_url
    deployment = serve.deployment(
        serve.ingress(build_app)(),
        name=DEPLOYMENT,
        num_replicas=options.replicas,
        ray_actor_options={
            "num_cpus": options.replica_cpus,
            "runtime_env": chiezo_environment(**env),
        },
        # Serve's default (5) makes the proxy back off and retry once 5 requests wait on a
        # replica: at 16 clients throughput fell to a third (design.md §29); the replica's
        # own thread pool (CHIEZO_SERVE_THREADS) bounds the work, its queue is cheap
        max_ongoing_requests=options.max_ongoing_requests,
        # a replica that stops answering its health check is replaced
        health_check_period_s=2,
        health_check_timeout_s=10,
        # a replica taken down may finish what it answers: the query time limit bounds that
        graceful_shutdown_timeout_s=settings.query_timeout + 1,
    )
    # Ray types serve.deployment as the decorator only; given the class it is the Deployment
    serve.run(deployment.bind(), name=APP_NAME, route_prefix="/")  # type: ignore[attr-defined]
    return ray


def generations_here(data_dir: str) -> dict[str, tuple[str, int]]:
    """On a node: {source: (current generation file, its size)} under ``data_dir``."""
    from chiezo.store.generations import current_path

    corpus = Path(data_dir) / "corpus"
    found = {}
    for directory in sorted(corpus.iterdir()) if corpus.is_dir() else []:
        path = current_path(directory)
        if path is not None:
            found[directory.name] = (path.name, path.stat().st_size)
    return found


def nodes_out_of_step(
    ray: ModuleType, data_dir: str, wanted: dict[str, tuple[str, int]] | None = None
) -> list[str]:
    """Each live node asked what it would serve: the sources whose current generation there
    is missing or not ``wanted`` (default: this machine's) — a node without the shared path,
    or with an old copy."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    wanted = generations_here(data_dir) if wanted is None else wanted
    ask = ray.remote(num_cpus=0)(generations_here)
    problems = []
    for node in (n for n in ray.nodes() if n.get("Alive")):
        where = f"node {node['NodeManagerAddress']} ({node['NodeID'][:8]})"
        strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        seen = ray.get(ask.options(scheduling_strategy=strategy).remote(data_dir), timeout=60)
        for name, (generation, size) in wanted.items():
            if seen.get(name) != (generation, size):
                has = seen[name][0] if name in seen else "nothing"
                problems.append(f"{where} has {has} for {name}, this machine {generation}")
    return problems


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def replica_states() -> dict[str, int]:
    """How many replicas of the deployment are in each state (RUNNING, STARTING, …)."""
    from ray import serve

    app = serve.status().applications.get(APP_NAME)
    if app is None:
        return {}
    status = app.deployments[DEPLOYMENT]
    return {
        str(state.value if hasattr(state, "value") else state): n
        for state, n in status.replica_states.items()
    }


def serve_until_stopped(
    settings: Settings,
    options: ServeOptions,
    public_url: str | None,
    say: Callable[[str], None] = print,
) -> None:
    """The CLI's ``serve --ray``: deploy, report the replicas now and then, and take the
    deployment down on Ctrl-C or SIGTERM (the cluster itself keeps running)."""
    from ray import serve

    ray = deploy(settings, options, public_url)
    for problem in nodes_out_of_step(ray, str(settings.data_dir.resolve())):
        say(
            f"warning: {problem} — its replicas answer from that (docs/cluster.md: a shared "
            "path, or chiezo export / chiezo import on each node)"
        )
    # a service manager stops it so (set after joining: Ray installs a handler of its own)
    signal.signal(signal.SIGTERM, _interrupt)
    say(f"{options.replicas} replicas on the Ray cluster: {replica_states()}")
    try:
        last = None
        while True:
            time.sleep(5)
            states = replica_states()
            if states != last:
                say(f"replicas: {states}")
                last = states
    except KeyboardInterrupt:
        pass
    finally:
        # the ingress drains a replica it takes down for up to 30 s, so nothing in flight is cut
        say("taking the deployment down (its replicas drain for up to 30 s)")
        serve.delete(APP_NAME)
