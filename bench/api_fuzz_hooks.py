"""Schemathesis hooks for bench/api_fuzz.py: what Chiezo's API does that no OpenAPI schema can
state — whatever a schema can say is said in /openapi.json instead. ``filter_case``: rules that
involve several parameters at once; a positive (schema-valid) case that breaks one is dropped,
since the server rightly answers it 400; negative cases are untouched. ``filter_failure``:
rejections that depend on the library's contents or the model's answer rather than on the
request, each documented in /openapi.json (status and reason), which schemathesis' "valid data
accepted" check does not read (it takes one list of statuses for every operation). Each rule
is also in the parameter's or response's description. ``map_path_parameters`` and
``map_case`` only steer positive cases toward what the library has (sources, ids, questions
it can answer), so that requests get past the 404 and the "no basis" reply."""

from __future__ import annotations

import json
import os
import re
import zlib

import schemathesis

# set by bench/api_fuzz.py: the sources the scratch library has, and the embedding models its
# jobs may name (/v1/jobs/plan answers any other with a 400 listing these)
SOURCES = [s for s in os.environ.get("CHIEZO_FUZZ_SOURCES", "").split(",") if s]
MODELS = ["e5-small", "use-m"]


def _floats(text: str) -> list[float]:
    try:  # the spaces around a number are what str.strip() removes (filters._degrees)
        return [float(part.strip()) for part in str(text).split(",")]
    except ValueError:
        return []


def _given(text) -> bool:
    return text is not None and bool(str(text).strip())


def _items(values) -> int:
    """Conditions a repeated parameter makes: values with something besides commas and spaces."""
    if isinstance(values, str):
        values = [values]
    return sum(any(part.strip() for part in str(v).split(",")) for v in values or [])


@schemathesis.hook
def filter_case(context, case) -> bool:
    meta = getattr(case, "meta", None)
    if meta is None or not meta.generation.mode.is_positive:
        return True
    query = case.query or {}
    path = case.operation.path
    near, near_doc = query.get("near"), query.get("near_doc")
    if query.get("radius_km") is not None and not (near or near_doc):
        return False  # radius_km needs near or near_doc
    if near and near_doc:
        return False  # one point, not two
    if path.endswith("/random") and (near or near_doc) and query.get("radius_km") is None:
        return False  # random draws from a set: near makes one only with a radius
    box = _floats(query.get("bbox") or "")
    if len(box) == 4 and box[0] > box[2]:
        return False  # south must not be north of north
    if len(box) == 4 and box[1] > box[3]:
        return False  # a box across the antimeridian is refused: split it in two
    within = str(query.get("within") or "")
    if within.strip().startswith("{"):
        return False  # a polygon's rules (JSON, closed rings, no crossings) go past a pattern
    area_box = _floats(within) if within.count(",") == 3 else []
    if len(area_box) == 4 and (area_box[0] > area_box[2] or area_box[1] > area_box[3]):
        return False  # a box within= is a bbox: south below north, west of east
    if path.endswith(("/tags", "/features")) and query.get("prefix") and query.get("contains"):
        return False  # prefix or contains, not both
    conditions = sum(_items(query.get(k)) for k in ("tag", "feature", "area", "wikidata", "attr"))
    if path.endswith("/filter") and not (conditions or box or near or near_doc or within.strip()):
        return False  # a filter needs at least one condition
    if conditions + bool(box) + bool(within.strip()) + bool(query.get("radius_km")) > 12:
        return False  # at most 12 conditions
    if path.endswith("/doc") and not (_given(query.get("title")) or _given(query.get("key"))):
        return False  # a document by title or key (a blank one is none)
    if path.endswith("/links") and not (
        _given(query.get("title")) or _given(query.get("key")) or query.get("doc_id") is not None
    ):
        return False  # the links of which document
    if path == "/v1/jobs/plan" and query.get("action") == "embed" and _true(query.get("fetch")):
        return False  # fetch is for a rebuild (the body of POST /v1/jobs says so in its schema)
    body = case.body if isinstance(case.body, dict) else {}
    model = body.get("model", query.get("model"))
    if model is not None and model not in MODELS:
        return False  # one of the server's models (they depend on the library)
    messages = body.get("messages")
    # the last message of a chat is the question
    return not (path == "/v1/chat" and messages and messages[-1].get("role") != "user")


@schemathesis.hook
def map_path_parameters(context, path_parameters):
    """Most generated source names name nothing (404 and no further): three in four are
    swapped for a source the library has, chosen by the generated name so that a case
    replays the same; document and note ids likewise mostly land on small numbers."""
    out = dict(path_parameters or {})
    name = out.get("source")
    if isinstance(name, str) and SOURCES:
        pick = zlib.crc32(name.encode("utf-8", "surrogatepass")) % (len(SOURCES) * 4 // 3 + 1)
        if pick < len(SOURCES):
            out["source"] = SOURCES[pick]
    for key in ("doc_id", "note_id", "job_id"):
        value = out.get(key)
        if isinstance(value, int) and value % 4:
            out[key] = value % 60 + 1
    return out


# Questions the library can answer (the guide, Helsinki, the notes; 浅草寺 in both wikis)
QUESTIONS = ["What is a generation?", "Helsinki", "浅草寺", "When does the backup run?"]


@schemathesis.hook
def map_case(context, case):
    """Generated questions find nothing (the fixed "no basis" reply, the model never called),
    and Hypothesis sends its simplest one ("0") again and again: the question of a positive
    case of /v1/ask or /v1/chat is swapped for one the library has, half of them asked with
    ``strict`` (both chosen by the generated request, so that a case replays the same), so
    that the answer path — the model, the citations, the strict 422 — is fuzzed with every
    other parameter, even in a short run. Hostile questions are the negative cases' (left
    untouched), /v1/search's and tests/test_hostile_input_fuzzed.py's."""
    meta = getattr(case, "meta", None)
    if meta is None or not meta.generation.mode.is_positive:
        return case
    path = case.operation.path
    body = case.body if isinstance(case.body, (dict, list)) else None
    pick = zlib.crc32(repr((case.query, body)).encode("utf-8", "surrogatepass"))
    question, strict = QUESTIONS[pick % len(QUESTIONS)], pick // len(QUESTIONS) % 2 == 0
    if path == "/v1/ask" and isinstance((case.query or {}).get("q"), str):
        case.query["q"] = question
        if strict:
            case.query["strict"] = "true"
    elif path == "/v1/chat" and isinstance(body, dict):
        last = (body.get("messages") or [None])[-1]
        if isinstance(last, dict) and isinstance(last.get("content"), str):
            last["content"] = question
            if strict:
                body["strict"] = True
    return case


@schemathesis.hook
def filter_failure(context, failure, case, response) -> bool:
    """A schema-valid request rejected for a reason the document states but no schema of the
    request can: it depends on what the library holds or on what the model answered, not on
    the request's form (see ``_stated_rejection``). Such a rejection is not a failure; any
    other is. Also dropped: a "schema-violating request accepted" whose only violation is the
    JSON type of a query parameter (the number 0.0 for the string "0.0", a string for a list of
    one): a query string has no types, so the server received a valid request. Every one
    dropped is counted in schemathesis' summary and, by reason, in the bench's report."""
    code = getattr(failure, "code", "")
    if code == "ST201" and _same_on_the_wire(failure.message):
        return _dropped("query type only", case)
    if code != "ST202":
        return True
    try:
        body = json.loads(response.content)
    except ValueError:
        return True
    reason = _stated_rejection(case, response.status_code, body) if isinstance(body, dict) else None
    return _dropped(reason, case) if reason else True


def _stated_rejection(case, status: int, body: dict) -> str | None:
    """Why this rejection of a schema-valid request is the API working as documented, or None.
    Each is recognised by the operation, what the request asked and the error's own fields,
    and only where /openapi.json lists the status for the operation (with the reason in its
    description): a status the document drops is a failure again.

    - 400 naming a source that "has no" features, tags, attributes or coordinates (with
      ``known_attributes`` or ``sources_with_it``): a well-formed filter on what this source
      does not have.
    - 400 "no place in the library matches near": an address or place name as ``near`` that
      no place source of this library knows.
    - 400 naming ``location`` (a date that does not exist, a time in the future) or with cause
      ``no_location``/``location_expired`` (``near=here`` with no location, or one older than
      ``CHIEZO_LOCATION_TTL``): what the clock says, which no schema can.
    - 400 for an embed job (or its plan) without ``model`` on a source that "has no vectors
      yet": the model must be named then (``known_models``); with vectors it is optional.
    - 400 for a rebuild (or its plan) naming the source asked for: a rebuild that source
      cannot run (its input was not downloaded, so there is nothing to fetch again; its input
      is gone). Not for an embed, nor for the notes: what the schema states (`source` is not
      the notes, no `fetch` with an embed) stays a failure when the server breaks it.
    - 422 for ``strict`` on /v1/ask and /v1/chat, with ``uncited`` and ``unsupported``: the
      model's answer has a sentence its sources do not back (this bench's scripted model
      answers the same sentence to every question, whatever the excerpts say)."""
    if not _documented(case, status):
        return None
    path, error = case.operation.path, str(body.get("error", ""))
    if status == 400 and body.get("source") and " has no " in error:
        return "the source has no such attribute"
    if status == 400 and error.startswith("no place in the library matches near"):
        return "near: an address no place source knows"
    if status == 400 and body.get("field") == "location":
        return "location: its date and time read against the calendar and the clock"
    if status == 400 and body.get("cause") in ("no_location", "location_expired"):
        return "near=here: no location given, or one past CHIEZO_LOCATION_TTL"
    if (
        status == 400
        and path in ("/v1/jobs", "/v1/jobs/plan")
        and _asked(case, "action") == "embed"
        and _asked(case, "model") is None
        and "has no vectors yet" in error
        and "known_models" in body
    ):
        return "embed: no vectors yet, the model must be named"
    if (
        status == 400
        and path in ("/v1/jobs", "/v1/jobs/plan")
        and _asked(case, "action") in ("rebuild", None)  # the plan's default
        and body.get("source") not in (None, "notes")
        and body.get("source") == _asked(case, "source")
    ):
        return "a rebuild this source cannot run"
    if (
        status == 422
        and path in ("/v1/ask", "/v1/chat")
        and _true(_asked(case, "strict"))
        and {"uncited", "unsupported"} <= body.keys()
    ):
        return "strict: the model's answer is not grounded"
    return None


def _documented(case, status: int) -> bool:
    """The operation's responses in /openapi.json include ``status``."""
    definition = getattr(case.operation, "definition", None)
    raw = getattr(definition, "raw", None) or {}
    return str(status) in (raw.get("responses") or {})


def _true(value) -> bool:
    """A boolean as the server reads it, from JSON or a query string."""
    return str(value).lower() in ("true", "1", "yes", "on")


def _asked(case, name: str):
    """A field of the JSON body, else the query parameter of that name (None when absent)."""
    body = case.body if isinstance(case.body, dict) else {}
    return body[name] if name in body else (case.query or {}).get(name)


def _dropped(reason: str, case) -> bool:
    """Record why a failure was dropped (bench/api_fuzz.py reports the counts); False."""
    record = os.environ.get("CHIEZO_FUZZ_DROPPED")
    if record:
        with open(record, "a", encoding="utf-8") as out:
            out.write(json.dumps({"reason": reason, "operation": case.operation.label}) + "\n")
    return False


def _same_on_the_wire(message: str) -> bool:
    """Every violation named is a query parameter's `type`/`anyOf` (see filter_failure)."""
    violations = re.findall(r"violates ((?:`\w+`(?:, )?)+)", message)
    keywords = {k for group in violations for k in re.findall(r"`(\w+)`", group)}
    return (
        "in query" in message
        and "in body" not in message
        and bool(keywords)
        and keywords <= {"type", "anyOf"}
    )
