"""Where the person asking is: a current location, taken by their browser when they press "use
my location", used briefly and kept nowhere.

A location travels with a request (REST ``location=LAT,LON,TAKEN_AT[,ACCURACY_M]``, the web
chat's ``{lat, lon, accuracy_m, taken_at}``, the CLI's ``CHIEZO_HERE``) and is named in a
query only as ``near=here``: a model, a log line or an answer never carries its numbers. The
rules are enforced here, in code, not asked of a model:

* it is refused once older than ``CHIEZO_LOCATION_TTL`` seconds (default 420: the seed's
  7 minutes, one question and a short follow-up) with a reason that says to press the button
  again; every use checks the clock again, so a long chat cannot keep an old one alive by
  sending it again;
* a ``taken_at`` in the future (beyond a clock skew of ``FUTURE_SKEW_S``), without a time zone
  or unreadable, coordinates out of range or not finite, an accuracy coarser than
  ``MAX_ACCURACY_M`` are refused — and no refusal repeats the coordinates it was given;
* what a person is asked for when something is missing is a :class:`Need` (``needs`` in an
  error or an answer), in the language of their question.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from chiezo.core.errors import BadQuery

HERE = "here"  # near=here: the location attached to the request
# where the CLI (and `chiezo mcp` over stdio) reads it: LAT,LON,TAKEN_AT[,ACCURACY_M]
ENVIRONMENT = "CHIEZO_HERE"
# Browsers report a Wi-Fi fix within tens to hundreds of metres and an IP guess within tens
# of kilometres; a search "within 2 km" around a point known to ±5 km says nothing true.
MAX_ACCURACY_M = 5000.0
# The browser and the server are usually one machine; a minute covers a phone's clock drift.
FUTURE_SKEW_S = 60.0


@dataclass(frozen=True)
class Need:
    """Something the person must give before the question can be answered: ``what`` is
    ``location``, ``radius`` or ``feature`` (``key`` names the feature, ``choices`` its
    values); ``ask`` says it in their language."""

    what: str
    ask: str
    key: str | None = None
    choices: tuple[str, ...] = ()
    expired: bool = False  # a location was attached, too old to use

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"what": self.what, "ask": self.ask}
        if self.expired:
            out["expired"] = True
        if self.key:
            out["key"] = self.key
        if self.choices:
            out["choices"] = list(self.choices)
        return out


# what each need asks, (Japanese, English); {choices} and {age} filled in
_ASKS: dict[str, tuple[str, str]] = {
    "location": (
        "現在地が分かりません。「現在地を使う」ボタンを押してから、もう一度聞いてください。",
        'Your location is not known: press "use my location", then ask again.',
    ),
    "expired": (
        "現在地の取得から{age}秒たち、期限（{ttl}秒）を過ぎました。"
        "「現在地を使う」ボタンをもう一度押してください。",
        'Your location was taken {age} s ago, past its {ttl} s limit: press "use my location" '
        "again.",
    ),
    "expired_again": (
        "現在地の期限が切れました。「現在地を使う」ボタンをもう一度押してください。",
        'Your location has expired: press "use my location" again.',
    ),
    "radius": (
        "どのくらいの範囲で探しますか？（例：「2km以内」）",
        'How far should I look? (e.g. "within 2 km")',
    ),
    "feature": (
        "どの種類ですか？ {choices}",
        "Which kind? {choices}",
    ),
}


def need(what: str, lang: str = "en", **fill: Any) -> Need:
    """A :class:`Need` asked in ``lang`` (``expired`` is a ``location`` need)."""
    ja, en = _ASKS[what]
    choices = tuple(str(c) for c in fill.pop("choices", ()) or ())
    separator = "、" if lang == "ja" else ", "
    text = (ja if lang == "ja" else en).format(choices=separator.join(choices), **fill)
    expired = what.startswith("expired")
    what = "location" if expired else what
    return Need(what, text, key=fill.get("key"), choices=choices, expired=expired)


class NeedsAnswer(BadQuery):
    """A request that cannot be answered until the person gives something (``needs``)."""

    def __init__(self, message: str, *needs: Need, **extras: Any):
        super().__init__(message, needs=[n.to_dict() for n in needs], **extras)
        self.needs = needs


@dataclass(frozen=True)
class Here:
    """A current location as the browser gave it; ``taken_at`` is aware (UTC)."""

    lat: float
    lon: float
    taken_at: datetime
    accuracy_m: float | None = None

    @classmethod
    def of(cls, value: Here | str | Mapping[str, Any]) -> Here:
        """From a request: ``LAT,LON,TAKEN_AT[,ACCURACY_M]`` or ``{lat, lon, taken_at,
        accuracy_m}``; refused (a 400 that does not repeat the numbers) when out of range,
        not finite, coarser than ``MAX_ACCURACY_M`` or at an unreadable or future time."""
        if isinstance(value, Here):
            return value
        if isinstance(value, str):
            parts = [p.strip() for p in value.split(",")]
            if len(parts) not in (3, 4):
                raise BadQuery(
                    "location is LAT,LON,TAKEN_AT or LAT,LON,TAKEN_AT,ACCURACY_M (the time in "
                    "ISO 8601 with its zone)",
                    field="location",
                )
            fields = dict(zip(("lat", "lon", "taken_at", "accuracy_m"), parts, strict=False))
        elif isinstance(value, Mapping):
            unknown = sorted(set(value) - {"lat", "lon", "taken_at", "accuracy_m"})
            if unknown:
                raise BadQuery(f"location takes no field {unknown[0]!r}", field="location")
            fields = dict(value)
        else:
            raise BadQuery("location is an object {lat, lon, taken_at, accuracy_m}")
        return cls._checked(fields)

    @classmethod
    def _checked(cls, fields: Mapping[str, Any]) -> Here:
        lat = _number(fields.get("lat"), "latitude")
        lon = _number(fields.get("lon"), "longitude")
        if not -90 <= lat <= 90 or not -180 <= lon <= 180:
            raise BadQuery("location is outside ±90 latitude / ±180 longitude", field="location")
        accuracy = fields.get("accuracy_m")
        accuracy_m = None if accuracy in (None, "") else _number(accuracy, "accuracy_m")
        if accuracy_m is not None and not 0 <= accuracy_m <= MAX_ACCURACY_M:
            raise BadQuery(
                f"location accuracy must be within 0-{MAX_ACCURACY_M:.0f} m: a place known "
                "only that roughly is no centre to search around (turn on precise location)",
                field="location",
            )
        taken_at = _moment(fields.get("taken_at"))
        if (taken_at - datetime.now(UTC)).total_seconds() > FUTURE_SKEW_S:
            raise BadQuery("location taken_at is in the future", field="location")
        return cls(lat, lon, taken_at, accuracy_m)

    def age(self, now: datetime | None = None) -> float:
        """Seconds since it was taken."""
        return ((now or datetime.now(UTC)) - self.taken_at).total_seconds()

    def fresh(self, ttl: float, lang: str = "en", now: datetime | None = None) -> Here:
        """Itself while younger than ``ttl`` seconds; else refused, asking for a new one."""
        age = self.age(now)
        if age > ttl:
            ask = need("expired", lang, age=int(age), ttl=int(ttl))
            raise NeedsAnswer(ask.ask, ask, cause="location_expired")
        return self

    def text(self) -> str:
        """The request form, ``LAT,LON,TAKEN_AT[,ACCURACY_M]`` (carried, never shown)."""
        at = self.taken_at.isoformat()
        tail = "" if self.accuracy_m is None else f",{self.accuracy_m:g}"
        return f"{self.lat!r},{self.lon!r},{at}{tail}"

    def __repr__(self) -> str:  # a traceback or a debug line never prints the numbers
        return f"Here(taken_at={self.taken_at.isoformat()}, accuracy_m={self.accuracy_m})"

    __str__ = __repr__


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool):  # JSON true is no degree (float(True) would be 1.0)
        raise BadQuery(f"location {name} is not a number", field="location")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BadQuery(f"location {name} is not a number", field="location") from None
    if not math.isfinite(number):
        raise BadQuery(f"location {name} is not a finite number", field="location")
    return number


def _moment(value: Any) -> datetime:
    """An ISO 8601 time with its zone (``Z`` or an offset), as UTC."""
    text = str(value or "").strip()
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise BadQuery(
            "location taken_at is not an ISO 8601 time (e.g. 2026-12-07T17:30:00+09:00)",
            field="location",
        ) from None
    if moment.tzinfo is None:
        raise BadQuery(
            "location taken_at needs its time zone (Z or +09:00): a bare time could be hours off",
            field="location",
        )
    return moment.astimezone(UTC)


def missing(lang: str = "en") -> NeedsAnswer:
    """``near=here`` with no location attached: ask for one."""
    ask = need("location", lang)
    return NeedsAnswer(ask.ask, ask, cause="no_location")


# the location attached to what is being answered (the agent's run, one MCP call; for a process
# that answers one person, `chiezo mcp` over stdio, the CHIEZO_HERE it started with): the tools
# read it for near=here, so a model names the place "here" and never holds numbers. Text is
# carried as given and checked where it is used, so a malformed CHIEZO_HERE fails the calls
# that use it, not every call.
_ATTACHED: ContextVar[Here | str | None] = ContextVar("chiezo_here", default=None)


@contextmanager
def attached(location: Here | str | None) -> Iterator[None]:
    """Within this block, tools answer ``near=here`` with ``location``."""
    token = _ATTACHED.set(location)
    try:
        yield
    finally:
        _ATTACHED.reset(token)


def attached_text() -> str | None:
    """The location attached to what is being answered now, in its request form, or None."""
    found = _ATTACHED.get()
    return found.text() if isinstance(found, Here) else found
