"""A cold ``chiezo search`` answered by the server that serves the same data directory.

Measured (docs/design.md §35.13, bench/worker_memory.py): a new ``chiezo search`` process on a
source with use-m vectors took 0.73 s median while a server ran on the same data, against
0.34 s keyword-only. Its query was already embedded by the server's model host; what was left
was this process importing numpy and usearch (0.085 s), opening the index, loading the word
splitter's dictionary (0.05 s) and running a first, cold search (0.1–0.17 s) — all of which
the server has done already. So when a server's model host answers for this data directory
(store/model_host.py, whose socket directory is this user's only), the command asks that
host where the server listens and sends it the search as ``GET /v1/search``: the request
model's parameters under their REST names, so that the server reads the very request this
command parsed. The server's JSON is what ``SearchResult.to_dict`` writes, printed as is
with ``--json`` and read back into a ``SearchResult`` otherwise.

Trust: the address comes from the host (this user's private socket, SO_PEERCRED-checked),
and before anything is sent the listening socket on that port must belong to this user
(/proc/net/tcp): after a server died, whoever took its port is not asked. Anything short of a
200 with a result — no server, a refusal, an error, a timeout, an answer that does not parse
— and the command searches here itself, so errors and exit codes are this process's own.
``CHIEZO_MODEL_HOST=off`` turns this off with the host.
"""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

from chiezo.core.config import Settings
from chiezo.core.models import SearchResult
from chiezo.ops.requests import Request, params
from chiezo.search.notices import Notice
from chiezo.store import model_host

MARGIN_SECONDS = 5.0  # beyond the server's own query deadline, which answers 504 by then


@dataclass
class _Notice:
    """One of ``SearchResult.to_dict``'s ``notices``."""

    code: str
    params: dict[str, Any]
    text: str


def search(settings: Settings, request: Request) -> tuple[SearchResult, dict[str, Any]] | None:
    """(the result, the server's JSON) from the server on ``settings.data_dir``, or None when
    none answered with one (the caller then searches itself)."""
    url = model_host.own_server_url(settings.data_dir)  # its port checked to be this user's
    if url is None:
        return None
    address = urllib.parse.urlsplit(url)
    target = "/v1/search?" + urllib.parse.urlencode(query_pairs(request))
    answer = _get(address, target, settings.query_timeout + MARGIN_SECONDS)
    if answer is None:
        return None
    try:
        return result_from_dict(answer), answer
    except ValueError:  # pydantic's ValidationError among them
        return None


def query_pairs(request: Request) -> list[tuple[str, str]]:
    """The request's parameters as ``/v1/search`` reads them: REST names, a list as repeated
    keys, defaults left out."""
    pairs = []
    for param in params(type(request)):
        value = getattr(request, param.name)
        if value is None or value == param.default:
            continue
        for item in value if param.many else [value]:
            text = ("true" if item else "false") if isinstance(item, bool) else str(item)
            pairs.append((param.rest, text))
    return pairs


def result_from_dict(data: dict[str, Any]) -> SearchResult:
    """A result as ``SearchResult.to_dict`` wrote it, every field checked against its type
    (pydantic.ValidationError, a ValueError, otherwise); each note keeps its code and
    parameters where ``notices`` gives them."""
    from pydantic import TypeAdapter

    result = TypeAdapter(SearchResult).validate_python(data)
    notices = TypeAdapter(list[_Notice]).validate_python(data.get("notices", []))
    coded = {n.text: n for n in notices}
    result.notes = [
        Notice(coded[n].code, **coded[n].params) if n in coded else n for n in result.notes
    ]
    return result


def _get(address: urllib.parse.SplitResult, target: str, timeout: float) -> dict[str, Any] | None:
    import http.client

    conn = http.client.HTTPConnection(address.hostname or "", address.port, timeout=timeout)
    try:
        conn.request("GET", target, headers={"Accept": "application/json"})
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            return None
        answer = json.loads(body)
    except (OSError, ValueError, http.client.HTTPException):
        return None
    finally:
        conn.close()
    return answer if isinstance(answer, dict) else None
