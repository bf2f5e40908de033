"""What the data directory holds, what of it may go, and reclaiming it: ``chiezo gc`` and the
admin page's disk section.

What is deleted, and why it is safe:

* **generations** of a source other than the current one and the kept previous one
  (``generations.previous_path``) — left by a build that died between its switch and its prune.
  The current and the kept previous generation are never deleted.
* **build debris** — ``.building``/``.stage`` files and journals of a build that died, switch
  links and sidecars of no generation (``generations.remove_debris``) — and a source's
  ``.removed-*`` folder left by a removal that died (not one touched in the last
  ``REMOVAL_GRACE_S``: that removal may be running).
* **leftovers**, folders under ``corpus/`` that are no source (listed apart from the sources,
  never as one): a build's scratch folder (``.scratch/<kind>-*``, ``generations.scratch_dir``)
  whose lock no process holds — its build was killed; a scratch folder of the layout before
  (``corpus/geonames-k2j4x9_0/`` holding only lookup files, which names no owner) while no
  build runs in the data directory at all; and a source folder with no generation and nothing
  but its build lock and build debris (a first build or an import that stopped), unless a
  process holds that lock. Each is deleted under the lock that shows it unused.
* A source whose build is running (its build lock is held) is reported and skipped; its
  deletions run under that lock, so a build cannot start meanwhile. A reader still holding a
  deleted generation open reads on: Linux frees an unlinked file's data at its last close.
* **vector caches in the first layout** are converted (store/vector_cache.py: every vector kept,
  ~4× smaller) — unless asked to delete unused caches.
* **a live source's cache** (store/live_cache.py) is compacted when that frees at least
  ``COMPACT_MIN_BYTES``: brought within its bounds, its free pages given back (a cache made
  before its pages were given back as they go is rewritten so that they are).

Only with ``caches=True`` (``chiezo gc --caches``), because what they hold costs time to make
again: a **vector cache of a model no source uses** (current or kept previous generation) —
deleting it means embedding everything again if that model is used later (use-m ~300 units/s,
e5-small ~4 passages/s on 2 cores) — **document-cache entries unused for
``conversions.KEEP_DAYS`` days** (the same entries a documents build drops), then VACUUM — and
**everything a live source's cache holds** (asked of its server again). A cache an embed or a
build has open, or a server is writing at that moment, is skipped.

Reported only: **downloads** no source's current or previous generation was built from (a
rebuild of an older dump may want them: deleting those is the operator's choice), and folders
under ``corpus/`` with generations but no ``current`` (a generation copied in by hand whose
link is not made yet looks like that).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from chiezo.core import db
from chiezo.core.config import Settings
from chiezo.core.errors import BuildError
from chiezo.store import generations, live_cache, vector_cache
from chiezo.store.library import LiveSource, raw_meta

REMOVAL_GRACE_S = 600  # a .removed-* folder touched this recently may still be being deleted
# A first-layout vector cache is converted when that frees at least this much; a smaller one
# is left to be converted by the next embed with its model (a tiny file can even grow: the
# compact layout's 16 KiB pages).
CONVERT_MIN_BYTES = 2**20
DOC_CACHES = ("conversions.db", "read_docs.db")
COMPACT_MIN_BYTES = 2**20  # less is not worth rewriting a cache a server may be writing


@dataclass
class Item:
    """One file or folder the survey found. ``action``: ``delete``, ``convert``, ``compact``,
    ``keep`` or ``report`` (shown, never touched); ``reclaim``: the bytes the action frees (estimated for
    a conversion or for cache entries). ``why`` says it in English (the CLI); a cache's
    ``state`` and ``users`` say it for a page in either language."""

    kind: str  # current, previous, generation, debris, stray; removed, scratch, unbuilt
    # (leftovers); vectors, documents, live (caches); download
    path: str
    bytes: int
    action: str = "keep"
    reclaim: int = 0
    source: str | None = None
    why: str = ""
    model: str | None = None
    state: str = ""  # caches: used, unused, open, legacy(_later), leftover, building, documents
    users: list[str] = field(default_factory=list)  # vector caches: the sources using the model


@dataclass
class SourceDisk:
    name: str
    busy: bool = False  # a build of it is running
    items: list[Item] = field(default_factory=list)

    def total(self, *kinds: str) -> int:
        return sum(i.bytes for i in self.items if not kinds or i.kind in kinds)


@dataclass
class Survey:
    data_dir: str
    sources: list[SourceDisk] = field(default_factory=list)
    caches: list[Item] = field(default_factory=list)
    downloads: list[Item] = field(default_factory=list)
    leftovers: list[Item] = field(default_factory=list)  # folders under corpus/ that are no source
    caches_included: bool = False
    keep_days: int = 0  # document-cache entries unused this long can go (conversions.py)

    def items(self) -> Iterator[Item]:
        for source in self.sources:
            yield from source.items
        yield from self.leftovers
        yield from self.caches
        yield from self.downloads

    @property
    def reclaimable(self) -> int:
        return sum(i.reclaim for i in self.items() if i.action in ("delete", "convert"))

    def to_dict(self) -> dict[str, Any]:
        sources = []
        for s in self.sources:
            sources.append(
                {
                    "name": s.name,
                    "busy": s.busy,
                    "current_bytes": s.total("current"),
                    "previous_bytes": s.total("previous"),
                    "other_bytes": s.total("generation", "debris", "stray"),
                    "items": [asdict(i) for i in s.items],
                }
            )
        return {
            "data_dir": self.data_dir,
            "caches_included": self.caches_included,
            "keep_days": self.keep_days,
            "reclaimable_bytes": self.reclaimable,
            "sources": sources,
            "leftovers": [asdict(i) for i in self.leftovers],
            "caches": [asdict(i) for i in self.caches],
            "downloads": [asdict(i) for i in self.downloads],
        }


# -- survey ------------------------------------------------------------------------------------


def survey(settings: Settings, *, caches: bool = False, count_entries: bool = True) -> Survey:
    """What the data directory holds and what ``reclaim`` (with the same ``caches``) would do.
    Reads only: takes no lock, so a page showing it never keeps a build from starting (a
    running build is seen in /proc/locks). ``count_entries``: count stale document-cache
    entries (reads those caches whole; the admin page leaves it off)."""
    from chiezo.ingest.conversions import KEEP_DAYS

    result = Survey(str(settings.data_dir), caches_included=caches, keep_days=KEEP_DAYS)
    corpus = settings.corpus_dir
    used_models: dict[str, list[str]] = {}
    inputs: set[str] = set()
    for directory in _folders(corpus):
        with contextlib.suppress(FileNotFoundError):  # a build or a removal just finished
            if directory.name.startswith(generations.REMOVED_PREFIX):
                result.leftovers.append(_removed(directory))
            elif directory.name == generations.SCRATCH:
                result.leftovers += [_scratch(d) for d in _folders(directory)]
            elif directory.name.startswith("."):
                continue
            elif _is_source(directory):
                result.sources.append(_source(directory, used_models, inputs))
            else:
                result.leftovers.append(_not_a_source(settings, directory))
    result.caches = _vector_caches(settings, used_models, caches)
    result.caches += _document_caches(settings, caches, count_entries)
    result.caches += _live_caches(settings, caches)
    result.downloads = _downloads(settings, inputs)
    return result


def _source(directory: Path, used_models: dict[str, list[str]], inputs: set[str]) -> SourceDisk:
    disk = SourceDisk(directory.name, busy=flock_held(directory / generations.BUILD_LOCK))
    current = generations.current_path(directory)
    previous = generations.previous_path(directory)
    for path in generations.generation_files(directory):
        size = _size(path) + sum(_size(p) for p in generations.sidecars(path))
        if current is not None and path.name == current.name:
            disk.items.append(Item("current", str(path), size, source=disk.name))
        elif previous is not None and path.name == previous.name:
            disk.items.append(
                Item("previous", str(path), size, source=disk.name, why="kept for a rollback")
            )
        elif current is None:
            disk.items.append(
                Item(
                    "stray",
                    str(path),
                    size,
                    "report",
                    source=disk.name,
                    why="no current generation names this folder's files",
                )
            )
        else:
            disk.items.append(
                Item(
                    "generation",
                    str(path),
                    size,
                    "delete",
                    size,
                    disk.name,
                    "older than the kept previous generation",
                )
            )
        if path.name in {p.name for p in (current, previous) if p is not None}:
            _note_use(path, disk.name, used_models, inputs)
    for path in _debris(directory):
        disk.items.append(
            Item(
                "debris",
                str(path),
                _size(path),
                "delete",
                _size(path),
                disk.name,
                "left by a build that stopped",
            )
        )
    if disk.busy:
        for item in disk.items:
            if item.action == "delete":
                item.action, item.reclaim, item.why = "keep", 0, "a build of it is running"
    return disk


def _removed(directory: Path) -> Item:
    """A ``.removed-<name>-<tag>`` folder: a removal that died (or is running, if recent)."""
    if time.time() - directory.stat().st_mtime < REMOVAL_GRACE_S:
        return _leftover("removed", directory, "a removal may be running", "keep")
    return _leftover("removed", directory, "left by a removal that stopped")


# -- leftovers: folders under corpus/ that are no source ---------------------------------------

# The scratch folders builds made before ``generations.scratch_dir``: tempfile's names (8 of
# [a-z0-9_]) beside the sources, holding only lookup tables (osm.py still makes them).
LEGACY_SCRATCH = re.compile(r"^(geonames|wiki-lookups|osm)-[a-z0-9_]{8}$")
LEGACY_SCRATCH_FILES = ("lookups.db", "nodes.idx")
BUSY_LEGACY = "a build is running, which may be using it"


def _folders(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_dir() and not p.is_symlink())


def _is_source(directory: Path) -> bool:
    """A source has a generation (one with no ``current`` yet is reported as ``stray``)."""
    if generations.current_path(directory) is not None:
        return True
    return bool(generations.generation_files(directory))


def _leftover(kind: str, directory: Path, why: str, action: str = "delete") -> Item:
    size = _tree_size(directory)
    return Item(kind, str(directory), size, action, size if action == "delete" else 0, why=why)


def _scratch(directory: Path) -> Item:
    """A build's scratch folder: its build was killed unless its lock is held."""
    if flock_held(directory / generations.SCRATCH_LOCK):
        return _leftover("scratch", directory, "a build is using it", "keep")
    return _leftover("scratch", directory, "left by a build that was killed")


def _not_a_source(settings: Settings, directory: Path) -> Item:
    """A folder with no generation: an old layout's scratch folder, or a source's folder whose
    first build or import stopped (or is running), or something gc does not know."""
    if _legacy_scratch(directory):
        if _any_build_running(settings):  # the folder names no owner: any build may be it
            return _leftover("scratch", directory, BUSY_LEGACY, "keep")
        return _leftover("scratch", directory, "left by a build that was killed")
    if flock_held(directory / generations.BUILD_LOCK):
        return _leftover("unbuilt", directory, "its first build or an import is running", "keep")
    unknown = _unknown_files(directory)
    if unknown:
        return _leftover(
            "unbuilt",
            directory,
            "no generation, and files gc does not know: "
            + ", ".join(unknown[:3])
            + ("…" if len(unknown) > 3 else ""),
            "report",
        )
    return _leftover("unbuilt", directory, "no generation: a build or an import that stopped")


def _legacy_scratch(directory: Path) -> bool:
    if not LEGACY_SCRATCH.match(directory.name):
        return False
    return all(p.is_file() and p.name.startswith(LEGACY_SCRATCH_FILES) for p in directory.iterdir())


def _unknown_files(directory: Path) -> list[str]:
    """Names in a generation-less folder that are neither its build lock nor build debris."""
    known = {p.name for p in _debris(directory)} | {generations.BUILD_LOCK}
    return sorted(p.name for p in directory.iterdir() if p.name not in known)


def _any_build_running(settings: Settings) -> bool:
    """Whether a build runs in the data directory: the jobs lock (every build from the command
    line or the server) or any source's build lock (a build through the Python API) is held."""
    from chiezo.ops.jobs import LOCK_FILE

    locks = [settings.data_dir / LOCK_FILE]
    locks += [d / generations.BUILD_LOCK for d in _folders(settings.corpus_dir)]
    return any(flock_held(lock) for lock in locks)


def _debris(directory: Path) -> list[Path]:
    """The files ``generations.remove_debris`` deletes, found without deleting them."""
    found = list(directory.glob(f"*{generations.BUILDING_SUFFIX}*"))
    found += directory.glob(f".{generations.CURRENT}.*")
    for path in directory.glob(f"{generations.GEN_PREFIX}*{generations.GEN_SUFFIX}.*"):
        owner = path.parent / (
            path.name.split(generations.GEN_SUFFIX + ".", 1)[0] + generations.GEN_SUFFIX
        )
        if not owner.exists() and path not in found:
            found.append(path)
    return sorted(set(found))


def _note_use(path: Path, source: str, used_models: dict[str, list[str]], inputs: set[str]) -> None:
    """Record the embedding model and the input files of a generation that is kept."""
    meta = raw_meta(path) or {}
    model = meta.get("embedding_model")
    if model:
        users = used_models.setdefault(vector_cache.stem(model), [])
        if source not in users:
            users.append(source)
    with contextlib.suppress(ValueError, TypeError):
        inputs.update(_strings(json.loads(meta.get("input") or "{}")))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _vector_caches(settings: Settings, used: dict[str, list[str]], caches: bool) -> list[Item]:
    directory = vector_cache.directory_of(settings)
    if not directory.is_dir():
        return []
    items = []
    for path in sorted(directory.iterdir()):
        name = path.name
        if name.endswith(vector_cache.BUILDING) and name.startswith("."):
            stem = name[1:].split(vector_cache.SUFFIX)[0]
            busy = flock_held(directory / f".{stem}.lock")
            items.append(
                Item(
                    "vectors",
                    str(path),
                    _size(path),
                    "keep" if busy else "delete",
                    0 if busy else _size(path),
                    model=stem,
                    state="building",
                    why="a conversion is running" if busy else "a conversion that stopped",
                )
            )
        elif name.endswith(vector_cache.LEGACY_SUFFIX) and not name.startswith("."):
            items.append(_vector_cache(path, used, caches))
    return items


def _vector_cache(path: Path, used: dict[str, list[str]], caches: bool) -> Item:
    legacy = not path.name.endswith(vector_cache.SUFFIX)
    stem = path.name.removesuffix(vector_cache.SUFFIX if not legacy else vector_cache.LEGACY_SUFFIX)
    size = _size(path) + _size(Path(f"{path}-wal"))
    users = used.get(stem, [])
    item = Item(
        "vectors",
        str(path),
        size,
        model=stem,
        users=list(users),
        state="used" if users else "unused",
        why=("used by " + ", ".join(users)) if users else "no source uses this model",
    )
    if flock_held(path.with_name(f".{stem}.lock")):
        item.state, item.why = "open", item.why + "; open (an embed is running)"
    elif legacy and path.with_name(stem + vector_cache.SUFFIX).exists():
        # nothing reads a first-layout file once the compact one exists (a conversion stopped
        # between renaming the new file into place and deleting the old)
        item.action, item.reclaim, item.state = "delete", size, "leftover"
        item.why = "first layout, already converted: nothing reads it"
    elif caches and not users:
        item.action, item.reclaim = "delete", size
    elif legacy:
        saved = size - _converted_size(path)
        if saved >= CONVERT_MIN_BYTES:
            item.action, item.reclaim, item.state = "convert", saved, "legacy"
            item.why += "; first layout, converted to the compact one"
        else:
            item.state, item.why = (
                "legacy_later",
                item.why + "; first layout, converted at its next embed",
            )
    return item


def _converted_size(legacy: Path) -> int:
    """About what a first-layout cache takes once converted: its vectors and 10% (measured:
    1,127 bytes a 512-d vector), and its keys. Counting reads the table's leaves, not the
    overflow pages where the old layout kept most of each vector."""
    try:
        conn = db.open_readonly(legacy, immutable=False)
        try:
            count = conn.execute("SELECT count(*) FROM vec").fetchone()[0]
            row = conn.execute("SELECT length(v) FROM vec LIMIT 1").fetchone()
        finally:
            conn.close()
    except db.Error:
        return _size(legacy)  # not readable: nothing to promise
    return int(count * ((row[0] if row else 0) * 1.1 + 40))


def _document_caches(settings: Settings, caches: bool, count_entries: bool) -> list[Item]:
    from chiezo.ingest.conversions import KEEP_DAYS

    items = []
    for name in DOC_CACHES:
        path = settings.data_dir / "cache" / name
        if not path.exists():
            continue
        item = Item(
            "documents",
            str(path),
            _size(path) + _size(Path(f"{path}-wal")),
            state="documents",
            why=f"converted documents; entries unused for {KEEP_DAYS} days can go",
        )
        if count_entries:
            stale = _stale_entries(path, KEEP_DAYS)
            item.why = f"{stale[0]:,} entries unused for {KEEP_DAYS} days"
            if caches and stale[0]:
                item.action, item.reclaim = "delete", stale[1]
        items.append(item)
    return items


def _live_caches(settings: Settings, caches: bool) -> list[Item]:
    """Each live source's cache of what its server answered (store/live_cache.py): compacted
    — within its bounds, its free pages given back — or, with ``caches``, emptied (its hits
    and articles are asked of the server again)."""
    items = []
    for directory in _folders(settings.corpus_dir):
        if not directory.name.startswith("."):  # not a removal's or a build's scratch
            items += [_live_cache(path, caches) for path in live_cache.caches_in(directory)]
    return items


def _live_cache(path: Path, caches: bool) -> Item:
    size = _size(path) + _size(Path(f"{path}-wal"))
    item = Item(
        "live",
        str(path),
        size,
        source=path.parent.name,
        state="live",
        why="what a live source's server answered; asked again when needed",
    )
    if caches:
        item.action, item.reclaim = "delete", size
    elif (free := live_cache.reclaimable(path, LiveSource.bounds)) >= COMPACT_MIN_BYTES:
        item.action, item.reclaim = "compact", free
    return item


def _stale_entries(path: Path, days: int) -> tuple[int, int]:
    """(entries, bytes of their content) unused for ``days``."""
    stale = time.time() - days * 86400
    query = {
        "conversions.db": "SELECT count(*), coalesce(sum(length(parts)), 0) FROM conversions WHERE used < ?",
        "read_docs.db": "SELECT count(DISTINCT f.key), coalesce(sum(length(d.doc)), 0) FROM read_files f "
        "JOIN read_docs d ON d.key = f.key WHERE f.used < ?",
    }[path.name]
    try:
        conn = db.open_readonly(path, immutable=False)
        try:
            count, size = conn.execute(query, (stale,)).fetchone()
        finally:
            conn.close()
    except db.Error:
        return 0, 0
    return int(count), int(size)


def _downloads(settings: Settings, inputs: set[str]) -> list[Item]:
    """Downloaded files no kept generation was built from (reported, never deleted)."""
    root = settings.data_dir / "downloads"
    if not root.is_dir():
        return []
    recorded = {str(Path(s).resolve()) for s in inputs if "/" in s or "\\" in s}
    names = {Path(s).name for s in inputs}
    items = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        if str(path.resolve()) in recorded or path.name in names:
            continue
        items.append(
            Item(
                "download",
                str(path),
                _size(path),
                "report",
                why="no kept generation was built from it; delete it by hand",
            )
        )
    return items


# -- reclaim -----------------------------------------------------------------------------------


@dataclass
class Reclaimed:
    freed: int = 0
    deleted: list[str] = field(default_factory=list)
    converted: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def reclaim(settings: Settings, *, caches: bool = False) -> Reclaimed:
    """Do what ``survey(settings, caches=caches)`` says, each source under its build lock (one
    whose build runs is skipped), each cache only while no process has it open. The survey is
    made again here, so what is deleted is what is true now, not what a page showed."""
    done = Reclaimed()
    plan = survey(settings, caches=caches)
    for source in plan.sources:
        _reclaim_source(settings.corpus_dir / source.name, source, done)
    for item in plan.leftovers:
        if item.action == "delete":
            _reclaim_leftover(settings, item, done)
    for item in plan.caches:
        if item.action in ("delete", "convert", "compact"):
            _reclaim_cache(settings, item, done)
    return done


def _reclaim_source(directory: Path, planned: SourceDisk, done: Reclaimed) -> None:
    if not any(i.action == "delete" for i in planned.items):
        return
    try:
        lock = generations.BuildLock(directory).__enter__()
    except BuildError:
        done.skipped.append({"path": str(directory), "why": "a build of it is running"})
        return
    try:
        keep = {
            p.name
            for p in (generations.current_path(directory), generations.previous_path(directory))
            if p is not None
        }
        if not keep:  # no current generation now: nothing of it is old
            return
        before = _tree_size(directory)
        gone = generations.prune(directory, [directory / name for name in keep])
        gone += generations.remove_debris(directory)
        done.deleted += [str(p) for p in gone]
        done.freed += before - _tree_size(directory)
    finally:
        lock.__exit__(None, None, None)


def _reclaim_leftover(settings: Settings, item: Item, done: Reclaimed) -> None:
    """Delete a leftover folder if what showed it unused still holds now, under the lock that
    shows it where it has one: a build starting meanwhile is refused that lock, or gets it on
    a file deleted since and stops, its folder gone (``generations.try_flock``)."""
    path = Path(item.path)
    if item.kind == "unbuilt":
        why = _remove_unbuilt(path)
    elif item.kind == "scratch" and path.parent.name == generations.SCRATCH:
        why = _remove_scratch(path)
    elif item.kind == "scratch" and _any_build_running(settings):
        why = BUSY_LEGACY
    else:  # a removal that stopped, or an old layout's scratch folder while no build runs
        shutil.rmtree(path, ignore_errors=True)
        why = None
    if why:
        done.skipped.append({"path": item.path, "why": why})
    elif not path.exists():
        done.deleted.append(item.path)
        done.freed += item.bytes


def _remove_scratch(path: Path) -> str | None:
    """Delete a scratch folder holding its lock: a build killed left it, or (the lock held
    elsewhere) it is in use — said as the reason it was skipped."""
    try:
        fd = generations.try_flock(path / generations.SCRATCH_LOCK)
    except FileNotFoundError:  # its build finished meanwhile and deleted it
        return None
    if fd is None:
        return "a build is using it"
    try:
        shutil.rmtree(path, ignore_errors=True)
    finally:
        os.close(fd)
    return None


def _remove_unbuilt(directory: Path) -> str | None:
    """Delete a source folder with no generation, under its build lock: its debris, the lock
    file, the folder (``rmdir``, so anything made meanwhile stays, and the folder with it)."""
    try:
        lock = generations.BuildLock(directory).__enter__()
    except BuildError:
        return "its first build or an import is running"
    except FileNotFoundError:
        return None
    try:
        if _is_source(directory) or _unknown_files(directory):
            return "a build wrote to it meanwhile"
        generations.remove_debris(directory)
        (directory / generations.BUILD_LOCK).unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # not empty: left for the next gc to look at
            directory.rmdir()
    finally:
        lock.__exit__(None, None, None)
    return None


def _reclaim_cache(settings: Settings, item: Item, done: Reclaimed) -> None:
    path = Path(item.path)
    if item.kind == "documents":
        _compact_document_cache(path, done)
        return
    if item.kind == "live":
        _compact_live_cache(path, item, done)
        return
    target = path.with_name(f"{item.model}{vector_cache.SUFFIX}")  # the model's cache file
    with vector_cache.unused(target) as free:
        if not free:
            done.skipped.append({"path": item.path, "why": "an embed has it open"})
            return
        before = _size(path) + _size(Path(f"{path}-wal"))
        if item.action == "convert":
            if target.exists():  # made meanwhile: the old file's vectors are in it or not
                done.skipped.append({"path": item.path, "why": f"{target.name} exists beside it"})
                return
            vector_cache.create(target, path)
            done.converted.append(item.path)
            done.freed += before - _size(target)
            return
        for file in vector_cache.legacy_files(path):
            file.unlink(missing_ok=True)
        done.deleted.append(item.path)
        done.freed += before


def _compact_live_cache(path: Path, item: Item, done: Reclaimed) -> None:
    before = _size(path) + _size(Path(f"{path}-wal"))
    try:
        live_cache.compact(path, LiveSource.bounds, empty=item.action == "delete")
    except db.Error as exc:
        done.skipped.append({"path": str(path), "why": f"in use ({exc})"})
        return
    done.deleted.append(f"{path} ({'emptied' if item.action == 'delete' else 'compacted'})")
    done.freed += max(before - _size(path) - _size(Path(f"{path}-wal")), 0)


def _compact_document_cache(path: Path, done: Reclaimed) -> None:
    """Drop the entries a documents build would drop (conversions.py) and give the space back."""
    from chiezo.ingest.conversions import ConversionCache, DocCache

    before = _size(path) + _size(Path(f"{path}-wal"))
    try:
        cache = (
            ConversionCache(path.parent) if path.name == "conversions.db" else DocCache(path.parent)
        )
        cache.close()  # closing drops entries unused for KEEP_DAYS
        conn = db.open_for_writing(path)
        try:
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
    except db.Error as exc:
        done.skipped.append({"path": str(path), "why": f"in use ({exc})"})
        return
    done.deleted.append(f"{path} (unused entries)")
    done.freed += max(before - _size(path) - _size(Path(f"{path}-wal")), 0)


# -- helpers -----------------------------------------------------------------------------------


def flock_held(path: Path) -> bool:
    """Whether any process holds a ``flock`` on ``path`` — read from /proc/locks, so asking
    takes no lock (a build starting at that instant would find its lock taken and fail).
    False where /proc/locks cannot be read."""
    try:
        st = path.stat()
    except OSError:
        return False
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii") as fh:
            return any("FLOCK" in line and device in line.split() for line in fh)
    except OSError:
        return False


def _size(path: Path) -> int:
    try:
        return path.stat(follow_symlinks=False).st_size if path.exists() else 0
    except OSError:
        return 0


def _tree_size(directory: Path) -> int:
    """The bytes of a folder's files and of its folders, itself included (as ``du`` counts
    them): a folder that holds only an empty lock file still takes a block."""
    total = _size(directory)
    for root, dirs, files in os.walk(directory):
        for name in files + dirs:
            total += _size(Path(root) / name)
    return total
