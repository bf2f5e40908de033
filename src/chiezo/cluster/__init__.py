"""Chiezo on a Ray cluster — the optional extra ``pip install 'chiezo[cluster]'``.

Three jobs outgrow one small machine, and each has its cluster form here:

* ``embedding.py`` — ``chiezo embed SRC --ray``: an actor pool computes the vectors the
  per-model cache lacks; the driver writes them through the same cache and derives the
  generation exactly as a local run does (resumable, incremental, the same result);
* ``wiki.py`` — ``chiezo ingest wikipedia DUMP --ray``: the wikitext rendering runs as tasks on
  the cluster; the one builder receives the results in dump order;
* ``serving.py`` — ``chiezo serve --ray``: the same application as a Ray Serve deployment with
  replicas, each reading the immutable generation files every node has.

Nothing outside this package imports ray (tests/test_cluster.py checks the default path), and
everything here imports it only when called.
"""

from __future__ import annotations

import logging
import os
import socket
from types import ModuleType
from typing import Any

from chiezo.core.config import RAY_DEFAULT_ADDRESS
from chiezo.core.errors import ConfigError

INSTALL_HINT = "install the cluster extra: pip install 'chiezo[cluster]'"


def ray_module():
    """``ray``, or a clear configuration error (exit 2) naming the extra to install."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("--ray needs Ray, which is not installed", hint=INSTALL_HINT) from exc
    return ray


def connect(address: str | None = RAY_DEFAULT_ADDRESS):
    """Join the cluster at ``address`` (``RAY_DEFAULT_ADDRESS``: core/config.py) unless this
    process already has; returns ``ray``. An address nobody answers at is a configuration
    error."""
    ray = ray_module()
    if ray.is_initialized():
        return ray
    target = None if address in (None, "", RAY_DEFAULT_ADDRESS) else address
    _check_reachable(target or os.environ.get("RAY_ADDRESS"))
    try:
        ray.init(
            address=target,
            logging_level=logging.WARNING,
            log_to_driver=False,
            configure_logging=False,
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ConfigError(
            f"could not join the Ray cluster at {target or 'this machine'}: {exc}",
            hint="start one with `ray start --head`, or give its address "
            "(host:6379 or ray://host:10001)",
        ) from exc
    return ray


def _check_reachable(address: str | None) -> None:
    """A cluster address nobody listens at fails in a second — Ray itself waits minutes for
    its control store before giving up."""
    if not address or address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not port.isdigit():
        raise ConfigError(
            f"not a Ray cluster address: {address!r}",
            hint="host:port (e.g. 10.0.0.5:6379) or ray://host:10001",
        )
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=3).close()
    except OSError as exc:
        raise ConfigError(
            f"no Ray cluster answers at {address}: {exc.strerror or exc}",
            hint="start one with `ray start --head` (it prints the address), "
            "or give --ray without an address for this machine's",
        ) from exc


def chiezo_environment(**extra: str) -> dict[str, Any]:
    """A runtime environment carrying this process's ``CHIEZO_*`` settings to the workers
    (their own environment is the node's, not the driver's), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k.startswith("CHIEZO_")}
    return {"env_vars": {**env, **extra}}


def cluster_cpus(ray: ModuleType) -> int:
    """The CPUs the cluster offers, at least one."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def check_fits(ray: ModuleType, what: str, count: int, cpus_each: float, flag: str) -> None:
    """``count`` actors of ``cpus_each`` CPUs must fit the cluster: one that cannot be placed
    waits for ever, and the work sent to it with it."""
    have = ray.cluster_resources().get("CPU", 0)
    if count * cpus_each > have:
        raise ConfigError(
            f"{count} {what} need {count * cpus_each:g} CPUs; the cluster has {have:g}",
            hint=f"give {flag} {max(1, int(have // cpus_each))} or "
            "fewer, or add nodes (`ray start --address=HEAD:6379`)",
        )
