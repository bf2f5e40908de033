"""The seam every kind of source plugs into.

A kind (documents, wikipedia, geonames, osm, zim, places, or a plugin's) is one ``SourceKind``
object: its name, its options (a dataclass whose fields declare their command-line flags), how
it builds a source from its inputs, how it finds those inputs again to rebuild, whose data it
is (attribution) and what its documents offer (``Capabilities``). The CLI's ingest commands,
background rebuild jobs, attribution and the web pages read the kind; none of them switches on
a kind's name, so registering a kind is its module plus one line in ``BUILT_IN`` (or an entry
point in the ``chiezo.source_kinds`` group, for a package of its own).
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import threading
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from chiezo.core.errors import BadQuery

if TYPE_CHECKING:
    from chiezo.core.addresses import Credentials
    from chiezo.core.config import Settings
    from chiezo.core.outbound import Deadline
    from chiezo.core.progress import Progress
    from chiezo.store.build import BuildOptions, BuildReport
    from chiezo.store.source_info import SourceInfo

# modules of the sources package whose ``SOURCE_KIND`` is registered at first use
# The built-in kinds live in chiezo/ingest/, above this module: they are found by name, as a
# plugin is, so that storage never imports the ingest layer.
BUILT_IN_PACKAGE = "chiezo.ingest"
BUILT_IN = ("documents", "wikipedia", "geonames", "osm", "zim", "kiwix", "places", "notes_source")
ENTRY_POINT_GROUP = "chiezo.source_kinds"
log = logging.getLogger("chiezo.sources")


@dataclass(frozen=True)
class Capabilities:
    """What a kind's documents offer a page or a client."""

    places: bool = False  # documents have coordinates: a map, near/radius/nearest
    headed_pages: bool = False  # the body marks its headings (## …): shown as sections
    originals: bool = False  # a document's file can be served from the folder it was built from
    # documents are entries of the archive file the source was built from (a ZIM): each is
    # served from it with the pictures and styles it names (``SourceKind.archive_entry``)
    archive: bool = False
    writable: bool = False  # written in place (notes): no build, no rebuild, no embedding
    # searched and read through a running server (a kiwix-serve book): its generation only
    # registers where; ``search_live``, ``read_live`` and ``find_live`` do the rest
    live: bool = False
    watchable: bool = False  # inputs are local files a --watch can poll


@dataclass(frozen=True)
class LiveCall:
    """One call of a live source to its server: when it must have ended, and the credentials
    kept for that server (never part of the address it records: core/addresses.py)."""

    deadline: Deadline
    credentials: Credentials | None = None


@dataclass(frozen=True)
class ArchiveEntry:
    """One entry of an archive file, as a browser is sent it: its bytes and media type, or
    the path of the entry it redirects to."""

    media_type: str = ""
    content: bytes | memoryview = b""
    redirect: str | None = None


@dataclass(frozen=True)
class Attribution:
    """Whose data a source is and under which licence: the line under every document."""

    text: str
    licence: str | None = None
    url: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Flag:
    """How an option field appears on the command line (``field(metadata=flag(...))``)."""

    names: tuple[str, ...] = ()  # e.g. ("--lang",); default: --field-name
    help: str = ""
    metavar: str | None = None
    low: int | None = None  # bounds of an int option
    high: int | None = None
    recorded: bool = True  # part of how the source was built (rebuilt the same way)
    for_fetch: bool = False  # only used to download the input when none is given
    cli: bool = True  # a flag of the ingest command; False: set by the kind itself (``fetched``)
    flag_value: str | None = None  # a str option that may also be given alone (``--ray``)


def flag(*names: str, help: str = "", **extra: Any) -> dict[str, Flag]:
    """Field metadata declaring a command-line flag; see ``Flag``."""
    return {"flag": Flag(names=names, help=help, **extra)}


def option_field(default: Any = None, *names: str, help: str = "", **extra: Any) -> Any:
    """A kind option: ``lang: str | None = option_field(None, "--lang", help=...)``."""
    metadata = flag(*names, help=help, **extra)
    if isinstance(default, list | dict | set):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass
class NoOptions:
    """The options of a kind that has none of its own."""


@dataclass(frozen=True)
class OptionField:
    """One option of a kind, as the CLI and the rebuild read it."""

    name: str
    type: Any  # the field's resolved annotation
    default: Any
    flag: Flag

    @property
    def base(self) -> type:
        """``Path`` for ``Path | None``, ``tuple`` for ``tuple[str, ...]``, and so on."""
        args = [a for a in typing.get_args(self.type) if a is not type(None)]
        origin = typing.get_origin(self.type)
        if origin in (tuple, list):
            return tuple
        if args and origin is not None and origin not in (tuple, list):
            inner = args[0]
            return typing.get_origin(inner) or inner
        return origin or self.type


def option_fields(options_type: type) -> list[OptionField]:
    hints = typing.get_type_hints(options_type)
    out = []
    for f in dataclasses.fields(options_type):
        default = (
            f.default
            if f.default is not dataclasses.MISSING
            else (f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        )
        out.append(OptionField(f.name, hints[f.name], default, f.metadata.get("flag", Flag())))
    return out


def recorded_options(options: Any) -> dict[str, Any]:
    """The recorded fields of ``options`` as JSON values (paths absolute: a rebuild may run
    from another directory)."""
    out = {}
    for f in option_fields(type(options)):
        if not f.flag.recorded:
            continue
        out[f.name] = _json_value(getattr(options, f.name))
    return out


def _json_value(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value.resolve())
    if isinstance(value, tuple | list):
        return [_json_value(v) for v in value]
    return value


class SourceKind:
    """A kind of source. Subclasses set the class attributes and implement ``build``."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""  # the ingest command's help
    Options: ClassVar[type] = NoOptions
    argument: ClassVar[str] = "PATH"  # what the input is called on the command line
    many_inputs: ClassVar[bool] = False  # FILE… rather than one PATH
    fetches: ClassVar[bool] = False  # without an input, ``fetch`` downloads one
    # the source's name when --name is not given: a fixed one, or None for a kind that
    # derives it from its input (``names_itself``) or needs --name
    default_name: ClassVar[str | None] = None
    names_itself: ClassVar[bool] = False
    # BuildOptions fields the ingest command offers as flags
    build_flags: ClassVar[tuple[str, ...]] = ("allow_shrink",)
    capabilities: ClassVar[Capabilities] = Capabilities()
    ingestable: ClassVar[bool] = True  # built by ``chiezo ingest`` (notes are not)

    # -- building ------------------------------------------------------------------------------

    def build(
        self,
        settings: Settings,
        inputs: list[Path],
        name: str | None,
        options: Any,
        build: BuildOptions,
        progress: Progress,
    ) -> BuildReport:
        raise NotImplementedError

    def fetch(self, settings: Settings, options: Any, progress: Progress) -> Fetched:
        """Download the input when none was given (kinds with ``fetches``)."""
        raise BadQuery(f"give the {self.argument} to build a {self.name} source from")

    def needs_name(self) -> bool:
        return self.default_name is None and not self.names_itself

    # -- rebuilding ----------------------------------------------------------------------------

    def each_source(self, inputs: list[Path]) -> list[list[Path]]:
        """The inputs of each source these inputs make: one source of them all, unless a kind
        builds one per file (a folder of ZIM files)."""
        return [inputs]

    def unusable(self, inputs: list[Path]) -> str | None:
        """Why no source can be built from one group of ``each_source`` (a file of a folder
        that is empty, truncated, a broken link…), in a few words, told before any build so
        that one broken file does not stop the others; None when the kind sees nothing
        wrong (its build still may)."""
        return None

    def name_for(self, inputs: list[Path]) -> str | None:
        """The name a source of these inputs takes by itself (``names_itself`` kinds)."""
        return None

    def unchanged(self, recorded: dict[str, Any], inputs: list[Path]) -> bool:
        """Whether a source whose build recorded ``recorded`` was built from these very
        inputs (then building it again is skipped); no kind can tell unless it says how."""
        return False

    def inputs_from_record(self, recorded: dict[str, Any]) -> list[Path]:
        """The inputs the source was built from, as its build recorded them."""
        paths = recorded.get("paths") or ([recorded["path"]] if recorded.get("path") else [])
        return [Path(p) for p in paths]

    def options_from_record(self, recorded: dict[str, Any]) -> Any:
        """The options the source was built with: each recorded option field, read by its
        name from ``recorded["options"]`` or, for sources built before that, from the input
        identity itself; fields not recorded keep their defaults."""
        given = {**recorded, **(recorded.get("options") or {})}
        values = {}
        for f in option_fields(self.Options):
            if f.flag.recorded and given.get(f.name) is not None:
                values[f.name] = _from_json(f, given[f.name])
        return self.Options(**values)

    def missing_inputs(self, inputs: list[Path]) -> list[str]:
        """The recorded inputs no longer there (a rebuild then stops and says which)."""
        return [str(p) for p in inputs if not p.exists()]

    def extra_inputs(self, options: Any) -> list[Path]:
        """Further files a build reads (lookups, page views): a rebuild needs them too."""
        return [
            value
            for f in option_fields(type(options))
            if f.flag.recorded and isinstance(value := getattr(options, f.name), Path)
        ]

    # -- showing -------------------------------------------------------------------------------

    def archive_entry(self, archive: Path, path: str) -> ArchiveEntry | None:
        """The entry at ``path`` inside ``archive``, the file a source of this kind was built
        from (kinds with ``capabilities.archive``); None when it has no such entry."""
        return None

    # -- a source searched live (``capabilities.live``) ---------------------------------------

    # Each is one call to the server, ended by ``call.deadline`` whatever the server does
    # (core/outbound.py), its credentials given apart from the recorded address.

    def search_live(self, info: SourceInfo, query: str, *, limit: int, offset: int, call: LiveCall):
        """The server's hits for ``query`` as a SearchResult — at most ``limit`` — each hit's
        ``key`` the document's path on the server, its ``doc_id`` derived from that path alone
        (the same in every process), its ``url`` the page there."""
        raise NotImplementedError

    def read_live(self, info: SourceInfo, path: str, title: str, call: LiveCall):
        """The document at ``path`` on the server (a ``Doc``), or None where it has none."""
        raise NotImplementedError

    def find_live(self, info: SourceInfo, title: str, call: LiveCall):
        """The document titled ``title`` on the server as a hit (as ``search_live`` gives
        them), or None where it has none."""
        return None

    def about(self, info: SourceInfo) -> str | None:
        """A line saying what the source holds, from what its input says of itself (a ZIM's
        title, language, date and article count), for ``chiezo sources``."""
        return None

    def attribution(self, info: SourceInfo) -> Attribution:
        path = info.input.get("path")
        return Attribution(f"{self.name} ({path})" if path else self.name)


def _from_json(f: OptionField, value: Any) -> Any:
    if f.base is tuple:
        return tuple(str(v) for v in value)
    if f.base is Path:
        return Path(value)
    if f.base in (int, float):
        return _within(f, f.base(value))
    if f.base in (str, bool):
        return f.base(value)
    return value


def _within(f: OptionField, number: float) -> float:
    """A recorded number held to its flag's bounds, as the command line holds a typed one: a
    record is read back from a stored or imported file (an archive's `chunk_chars: 0` would
    cut passages of nothing), not taken as authority."""
    low, high = f.flag.low, f.flag.high
    if (low is not None and number < low) or (high is not None and number > high):
        raise BadQuery(
            f"the recorded option {f.name}={number} is outside {low}–{high}",
            hint="build the source anew with the option you want",
        )
    return number


@dataclass
class Fetched:
    """What a download gave: the inputs, and options completed by it (e.g. page views).

    A kind that fetches records how in its ``fetched`` option (recorded, not a flag), so that
    ``chiezo rebuild --fetch`` downloads again: ``{"input": True, "options": {...}, "filled":
    [...]}`` — whether the input itself was downloaded, the option values to fetch with again,
    and the options the download filled in (cleared then, to be filled anew); ops/jobs.py reads it."""

    inputs: list[Path]
    options: Any
    name: str | None = None


@dataclass(frozen=True)
class Skipped:
    """An input no source was built from, and why (``SourceKind.unusable``): a broken file of
    a library whose other files were built."""

    input: str
    why: str

    def to_dict(self) -> dict[str, str]:
        return {"input": self.input, "skipped": self.why}


# -- the registry ---------------------------------------------------------------------------------

_kinds: dict[str, SourceKind] = {}
_loaded = False
_lock = threading.Lock()


def register(kind: SourceKind) -> SourceKind:
    """Add ``kind`` (replacing one of the same name — a built-in one too: the built-in kinds
    are loaded first, so a kind registered before any was asked for is not replaced later)."""
    kinds()
    _kinds[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    _kinds.pop(name, None)


def kinds() -> dict[str, SourceKind]:
    """Every registered kind by name: the built-in ones, then entry-point plugins."""
    global _loaded
    if not _loaded:
        with _lock:
            if not _loaded:
                _load_built_in()
                _loaded = True
    return dict(_kinds)


def kind_named(name: str) -> SourceKind:
    """The kind called ``name``; BadQuery naming the known kinds otherwise."""
    found = kinds().get(name or "")
    if found is None:
        raise BadQuery(f"unknown source kind: {name!r}", known_kinds=sorted(kinds()))
    return found


def _load_built_in() -> None:
    for module in BUILT_IN:
        kind = importlib.import_module(f"{BUILT_IN_PACKAGE}.{module}").SOURCE_KIND
        _kinds[kind.name] = kind
    from importlib.metadata import entry_points

    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:  # a broken plugin is reported, not the end of every command
            loaded = entry.load()
            kind = loaded() if isinstance(loaded, type) else loaded
            _kinds[kind.name] = kind
        except Exception:
            log.exception("source kind plugin %s could not be loaded", entry.name)
