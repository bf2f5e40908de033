"""``chiezo embed SRC --ray``: the missing vectors computed by a pool of actors on a cluster.

Each actor loads the model once, on its node, and embeds whole batches (``embed.EmbedBatch``);
the driver keeps doing what a local run does — choose the units, look them up in the per-model
cache, write each batch's vectors into the cache as it comes back, then derive the generation
(store/embed.py). So a cluster run is resumable (everything that came back is cached),
incremental, and gives the same vectors as a local one: the same model files on every node, and
the vectors travel as the float16 rows the cache stores.

Batches are handed out as actors free up, at most ``IN_FLIGHT`` per actor queued: memory on the
driver holds that many batches, whatever the source's size.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from chiezo.cluster import check_fits, chiezo_environment, cluster_cpus, connect
from chiezo.store.embed import EmbedBatch, Vectorize
from chiezo.store.embedders import GPU_ENV, Embedder, gpu_usable

IN_FLIGHT = 2  # batches per actor: one computing, one on its way


@dataclass(frozen=True)
class RayEmbedding:
    """A runner (``embed.Runner``) for ``embed_source``: ``address`` as ``cluster.connect``
    takes it; ``actors`` on CPUs (default: one per CPU of the cluster, ``actor_cpus`` each).
    Where the cluster has GPUs and the model can use them there (asked of a GPU node), one
    more actor per GPU runs the model on it."""

    address: str | None = None
    actors: int | None = None
    actor_cpus: float = 1.0

    def __call__(self, embedder: Embedder) -> Vectorize:
        ray = connect(self.address)
        gpus = _usable_gpus(ray, embedder.name)
        count = self.actors or max(1, int((cluster_cpus(ray) - gpus) // self.actor_cpus))
        check_fits(ray, "embedding actors", count + gpus, self.actor_cpus, "--actors")
        threads = str(max(1, int(self.actor_cpus)))
        # an actor lost with its node is started again and its batches sent again; beyond
        # that the run stops, with every batch that came back already in the cache
        actor_class = ray.remote(max_restarts=2, max_task_retries=2)(EmbeddingActor)
        pool = [
            actor_class.options(
                num_cpus=self.actor_cpus,
                # the model's threads: the CPUs this actor was given, not every core of its node
                runtime_env=chiezo_environment(
                    CHIEZO_EMBED_THREADS=threads, OMP_NUM_THREADS=threads
                ),
            ).remote(embedder.name)
            for _ in range(count)
        ]
        pool += [
            actor_class.options(
                num_cpus=1,
                num_gpus=1,
                runtime_env=chiezo_environment(**{GPU_ENV: "cuda"}, CHIEZO_EMBED_THREADS="1"),
            ).remote(embedder.name)
            for _ in range(gpus)
        ]
        where = f"a Ray cluster: {count} CPU actor{'s' * (count != 1)}"
        if gpus:
            where += f", {gpus} GPU actor{'s' * (gpus != 1)}"
        return Spread(ray, pool, where)


def _usable_gpus(ray: ModuleType, model: str) -> int:
    """The cluster's whole GPUs, if the model can run on them: asked of a GPU node itself
    (its onnxruntime or torch, not this machine's); 0 otherwise."""
    gpus = int(ray.cluster_resources().get("GPU", 0))
    if not gpus:
        return 0
    probe = ray.remote(gpu_usable).options(num_gpus=1, num_cpus=0)
    try:
        return gpus if ray.get(probe.remote(model), timeout=120) else 0
    except Exception:  # noqa: BLE001 - a probe that fails means CPU actors only
        return 0


class Spread:
    """``embed.Vectorize`` over an actor pool: each batch to the least busy actor, at most
    ``IN_FLIGHT`` per actor; (work, vectors) as they finish. A batch with nothing to embed (all
    cached) passes straight through. The actors are released at the end. ``where`` says what
    computed the vectors."""

    def __init__(self, ray: ModuleType, pool: list, where: str) -> None:
        self.ray, self.pool, self.where = ray, pool, where

    def __call__(self, batches: Iterable[EmbedBatch]) -> Iterator[tuple[EmbedBatch, Any]]:
        busy = {id(actor): 0 for actor in self.pool}
        running: dict[Any, tuple[EmbedBatch, Any]] = {}  # object ref → (work, actor)
        try:
            for work in batches:
                if not work.passages:
                    yield work, None
                    continue
                while len(running) >= IN_FLIGHT * len(self.pool):
                    yield from self._collect(running, busy, block=True)
                actor = min(self.pool, key=lambda a: busy[id(a)])
                busy[id(actor)] += 1
                running[actor.embed.remote(work.passages)] = (work, actor)
                yield from self._collect(running, busy, block=False)
            while running:
                yield from self._collect(running, busy, block=True)
        finally:
            for actor in self.pool:
                self.ray.kill(actor)

    def _collect(self, running: dict, busy: dict, *, block: bool):
        done, _ = self.ray.wait(list(running), num_returns=1, timeout=None if block else 0)
        for ref in done:
            work, actor = running.pop(ref)
            busy[id(actor)] -= 1
            yield work, self.ray.get(ref)  # an actor's error is raised here, with its traceback


class EmbeddingActor:
    """On a cluster node: one model, loaded once; batches of passages in, float16 rows out."""

    def __init__(self, model: str) -> None:
        from chiezo.store.embedders import get_embedder

        self.embedder = get_embedder(model)

    def embed(self, passages: list[str]):
        from chiezo.store.embed import as_fp16

        return as_fp16(self.embedder.embed(passages, "passage"))
