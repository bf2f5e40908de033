"""``chiezo ingest wikipedia DUMP --ray``: the wikitext rendering as tasks on a Ray cluster.

Rendering (mwparserfromhell, templates, tables) is the expensive part of a Wikipedia build; the
rest — reading the XML, recording redirects, writing the generation — stays in the one builder
process (sources/wikipedia.py). Batches of pages go out as tasks, at most a few per CPU of the
cluster at once, and come back in the order they were sent, so the generation is the one a
local build writes, document for document.
"""

from __future__ import annotations

import contextlib

from ..sources.wikirender import init_worker, render_batch
from ..sources.wikitext import Namespaces
from . import cluster_cpus, connect


@contextlib.contextmanager
def ray_parsers(address: str | None, ns: Namespaces, chunk_chars: int, workers: int | None):
    """``sources/wikipedia._parsers`` on a cluster: ``(submit, workers)``; ``workers``: tasks
    running at once (default: the cluster's CPUs)."""
    ray = connect(address)
    task = ray.remote(_render).options(num_cpus=1, max_retries=2)
    shared_ns = ray.put(ns)  # sent to each node once, not with every batch
    running: list = []
    try:
        yield (lambda batch: _Rendering(ray, task.remote(shared_ns, chunk_chars, batch),
                                        running)), workers or cluster_cpus(ray)  # fmt: skip
    finally:
        for ref in running:  # a build that failed: what is still rendering is not wanted
            ray.cancel(ref)


def _render(ns: Namespaces, chunk_chars: int, batch: list) -> list:
    """On a cluster worker: the same rendering as a local parser process."""
    init_worker(ns, chunk_chars)
    return render_batch(batch)


class _Rendering:
    """A batch on its way back: ``get()`` as a process pool's result has it."""

    def __init__(self, ray, ref, running: list) -> None:
        self.ray, self.ref, self.running = ray, ref, running
        running.append(ref)

    def get(self) -> list:
        try:
            return self.ray.get(self.ref)
        finally:
            self.running.remove(self.ref)
