"""``chiezo ingest wikipedia DUMP --ray``: the wikitext rendering (and the word splitting,
cluster/words.py) as tasks on a Ray cluster.

Rendering (mwparserfromhell, templates, tables) is the expensive part of a Wikipedia build; the
rest — recording redirects, writing the generation — stays in the one builder process
(ingest/wikipedia.py). Two forms, both giving back what the builder stores, in the order it
was sent, so the generation is the one a local build writes, document for document:

* ``ray_parsers`` — the builder reads the XML and sends batches of pages (any dump);
* ``ray_stream_readers`` — for a multistream dump with its index beside it, the builder sends
  only byte ranges: each task reads, decompresses and parses its streams itself
  (ingest/wikistreams.py), so the builder's one core is not spent on XML. The dump must then
  be at the same path on every node.

Importing this module registers both as the ``ray`` rendering of ingest/wikipedia.py (its
``RenderBackend`` seam): the CLI imports it when ``--ray`` is given; a program that builds
with ``WikiOptions(ray=…)`` imports it first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from chiezo.cluster import cluster_cpus, connect
from chiezo.cluster.words import ray_word_splitter
from chiezo.core.errors import ChiezoError
from chiezo.ingest.wikipedia import RAY_RENDERING, RenderBackend, register_render_backend
from chiezo.ingest.wikirender import init_worker, render_batch
from chiezo.ingest.wikistreams import read_and_render
from chiezo.ingest.wikitext import Namespaces

if TYPE_CHECKING:
    from ray import ObjectRef


def ray_parsers(address: str | None, ns: Namespaces, chunk_chars: int, workers: int | None):
    """The ``parsers`` of the ``ray`` rendering (ingest/wikipedia.RenderBackend):
    ``(submit(batch), workers)``, each batch a task."""
    return _tasks(address, ns, chunk_chars, workers, render_batch)


def ray_stream_readers(address: str | None, ns: Namespaces, chunk_chars: int, workers: int | None):
    """``(submit(dump_path, start, end), workers)``: ``wikistreams.read_and_render`` on a
    cluster."""
    return _tasks(address, ns, chunk_chars, workers, read_and_render)


@contextlib.contextmanager
def _tasks(
    address: str | None, ns: Namespaces, chunk_chars: int, workers: int | None, work: Callable
):
    """``work(*args)`` as tasks on workers set up with the wiki's namespaces; ``workers``:
    how many the caller keeps busy (default: the cluster's CPUs)."""
    ray = connect(address)
    task = ray.remote(_set_up_and_run).options(num_cpus=1, max_retries=2)
    shared_ns = ray.put(ns)  # sent to each node once, not with every task
    running: list = []
    try:
        yield (
            (
                lambda *args: _Rendering(
                    ray, task.remote(shared_ns, chunk_chars, work, *args), running
                )
            ),
            workers or cluster_cpus(ray),
        )
    finally:
        for ref in running:  # a build that failed: what is still rendering is not wanted
            ray.cancel(ref)


def _set_up_and_run(ns: Namespaces, chunk_chars: int, work: Callable, *args: object):
    """On a cluster worker: the set-up of a local parser process, then the work."""
    init_worker(ns, chunk_chars)
    return work(*args)


class _Rendering:
    """Work on its way back: ``get()`` as a process pool's result has it; an error of
    Chiezo's own (a broken stream, a dump a node cannot read) is raised as itself."""

    def __init__(self, ray: ModuleType, ref: ObjectRef[Any], running: list) -> None:
        self.ray, self.ref, self.running = ray, ref, running
        running.append(ref)

    def get(self):
        from ray.exceptions import RayTaskError

        try:
            return self.ray.get(self.ref)
        except RayTaskError as exc:
            if isinstance(exc.cause, ChiezoError):
                raise exc.cause from None
            raise
        finally:
            self.running.remove(self.ref)


register_render_backend(
    RAY_RENDERING,
    RenderBackend(
        parsers=ray_parsers, stream_readers=ray_stream_readers, word_splitter=ray_word_splitter
    ),
)
