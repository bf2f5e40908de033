"""Schemathesis hooks for bench/api_fuzz.py: the rules of Chiezo's API that involve several
parameters at once, which no OpenAPI schema can state. A positive (schema-valid) case that
breaks one is dropped, since the server rightly answers it 400; negative cases are untouched.
Each rule is also in the parameter's description in /openapi.json."""

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
    box = _floats(query.get("bbox") or "")
    if len(box) == 4 and box[0] > box[2]:
        return False  # south must not be north of north
    if len(box) == 4 and box[1] > box[3]:
        return False  # a box across the antimeridian is refused: split it in two
    if path.endswith(("/tags", "/features")) and query.get("prefix") and query.get("contains"):
        return False  # prefix or contains, not both
    conditions = sum(_items(query.get(k)) for k in ("tag", "feature", "area", "wikidata", "attr"))
    if path.endswith("/filter") and not (conditions or box or near or near_doc):
        return False  # a filter needs at least one condition
    if conditions + bool(box) + bool(query.get("radius_km")) > 12:
        return False  # at most 12 conditions
    if path.endswith("/doc") and not (_given(query.get("title")) or _given(query.get("key"))):
        return False  # a document by title or key (a blank one is none)
    if path.endswith("/links") and not (
        _given(query.get("title")) or _given(query.get("key")) or query.get("doc_id") is not None
    ):
        return False  # the links of which document
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


@schemathesis.hook
def filter_failure(context, failure, case, response) -> bool:
    """A well-formed filter on a tag, feature, attribute or coordinates that this source does
    not have is refused with a 400 that names the source ("source 'jawiki' has no features",
    with known_attributes or sources_with_it). That depends on the library, not the request's
    shape, so no schema can state it: such a rejection of positive data is not a failure.
    Also dropped: a "schema-violating request accepted" whose only violation is the JSON type
    of a query parameter (the number 0.0 for the string "0.0", a string for a list of one): a
    query string has no types, so the server received a valid request. Every one dropped is
    counted in schemathesis' summary."""
    code = getattr(failure, "code", "")
    if code == "ST201" and _same_on_the_wire(failure.message):
        return _dropped("query type only", case)
    if code != "ST202" or response.status_code != 400:
        return True
    try:
        body = json.loads(response.content)
    except ValueError:
        return True
    if body.get("source") and " has no " in body.get("error", ""):
        return _dropped("the source has no such attribute", case)
    return True


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
